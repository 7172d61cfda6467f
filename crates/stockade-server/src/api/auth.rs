//! The admin API's bearer token check.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};

use super::error::ApiError;
use crate::state::AppState;

/// The token of `Authorization: Bearer <token>`, if the header has that form.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether the request carries the admin token.
pub fn is_admin(state: &AppState, headers: &HeaderMap) -> bool {
    bearer(headers)
        .is_some_and(|token| constant_time_eq(token.as_bytes(), state.admin_token().as_bytes()))
}

/// Passes if the request carries `Authorization: Bearer <admin token>`.
pub fn require_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if is_admin(state, headers) {
        return Ok(());
    }
    Err(match bearer(headers) {
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the admin token is wrong",
        ),
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
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

/// Whether `token` is the admin token (the dashboard's login form).
pub fn token_matches(state: &AppState, token: &str) -> bool {
    constant_time_eq(token.as_bytes(), state.admin_token().as_bytes())
}

/// Compares without an early exit, so timing does not reveal the prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
