//! Bearer tokens of the operators: the admin token (every admin route) and
//! the payments token (the payment service's confirm callback).
//!
//! Every comparison of a presented token with a configured one goes
//! through [`crate::secrets::secrets_match`].

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use stockade_api::ErrorCode;

use super::error::ApiError;
use crate::secrets::bearer;
use crate::secrets::secrets_match;
use crate::state::AppState;

/// Whether the request carries the admin token.
pub fn is_admin(state: &AppState, headers: &HeaderMap) -> bool {
    bearer(headers).is_some_and(|token| token_matches(state, token))
}

/// Whether the request carries the payments token (never, when none is
/// configured).
pub fn is_payments(state: &AppState, headers: &HeaderMap) -> bool {
    match (bearer(headers), state.payments_token()) {
        (Some(token), Some(payments)) => secrets_match(token.as_bytes(), payments.as_bytes()),
        _ => false,
    }
}

/// Passes if the request carries `Authorization: Bearer <admin token>`.
pub fn require_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if is_admin(state, headers) {
        return Ok(());
    }
    Err(match bearer(headers) {
        Some(_) => ApiError::new(ErrorCode::Unauthorized, "the admin token is wrong"),
        None => ApiError::new(
            ErrorCode::Unauthorized,
            "this is an admin endpoint: send Authorization: Bearer <STOCKADE_ADMIN_TOKEN>",
        ),
    })
}

/// An admin request. Taken before the body, so a request without the
/// token learns nothing about the body's schema.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        require_admin(state, &parts.headers).map(|()| Admin)
    }
}

/// The caller of a payment callback (a confirm): the payment service, with
/// the payments token, or the admin. A buyer's own JWT is 403 `forbidden`:
/// a buyer who could confirm would hold items without paying.
#[derive(Debug, Clone, Copy)]
pub struct PaymentService;

impl FromRequestParts<AppState> for PaymentService {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let headers = &parts.headers;
        if is_payments(state, headers) || is_admin(state, headers) {
            return Ok(PaymentService);
        }
        let buyer = bearer(headers)
            .zip(state.identity())
            .is_some_and(|(token, identity)| identity.verify(token).is_ok());
        if buyer {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "a buyer cannot confirm an order: the confirm is the payment service's callback once the payment arrived (Authorization: Bearer <STOCKADE_PAYMENTS_TOKEN>)",
            ));
        }
        let how = if state.payments_token().is_some() {
            "send Authorization: Bearer <STOCKADE_PAYMENTS_TOKEN> (the payment service's token) or the admin token"
        } else {
            "no STOCKADE_PAYMENTS_TOKEN is configured, so only the admin token confirms orders; give the payment service a token of its own with STOCKADE_PAYMENTS_TOKEN"
        };
        let why = if bearer(headers).is_some() {
            "the bearer token is neither the payments token nor the admin token"
        } else {
            "confirming an order is the payment service's callback"
        };
        Err(ApiError::new(
            ErrorCode::Unauthenticated,
            format!("{why}: {how}"),
        ))
    }
}

/// Whether `token` is the admin token (the dashboard's login form).
pub fn token_matches(state: &AppState, token: &str) -> bool {
    secrets_match(token.as_bytes(), state.admin_token().as_bytes())
}
