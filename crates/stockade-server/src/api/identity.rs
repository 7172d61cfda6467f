//! Who is calling: the one place every buyer route learns its buyer.
//!
//! With identity on (`--jwt-secret` or `--jwt-public-key`), a buyer proves
//! who they are with `Authorization: Bearer <JWT>`; the buyer is the
//! token's `sub`. With identity off (the embedded default) the service
//! trusts its caller: the body's `user_id` names the buyer, and the
//! service belongs behind a gateway that authenticates buyers. Either way
//! the admin token acts for anyone.
//!
//! A handler takes a [`Caller`] (before its body, so a bad token costs no
//! parsing) and asks it [`Caller::buyer`] (purchases, queue joins) or
//! [`Caller::may_access`] (an order's routes). Both charge the buyer's
//! rate limit once per request.

use stockade_api::ErrorCode;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use stockade_core::{TierName, UserId};

use super::auth::is_admin;
use super::error::ApiError;
use crate::identity::Verified;
use crate::secrets::bearer;
use crate::state::AppState;

/// 401 `unauthenticated`, with the `WWW-Authenticate` challenge of RFC 6750.
fn unauthenticated(why: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Unauthenticated,
        format!("{why}: send Authorization: Bearer <a JWT from your identity provider>"),
    )
    .with_header(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer error=\"invalid_token\""),
    )
}

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Identity is off: the caller is trusted to name the buyer.
    Trusted,
    /// A buyer proven by a verified JWT (its `sub`, and its tier claim).
    Buyer(Verified),
    /// The holder of the admin token: acts for any buyer, unlimited.
    Admin,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Self::from_headers(state, &parts.headers)?;
        if let Self::Buyer(verified) = &caller {
            state.rate_limiter().check_buyer(&verified.buyer).await?;
        }
        Ok(caller)
    }
}

impl Caller {
    /// The caller a request's headers prove (no rate limit charged).
    pub fn from_headers(state: &AppState, headers: &HeaderMap) -> Result<Self, ApiError> {
        if is_admin(state, headers) {
            return Ok(Self::Admin);
        }
        let Some(identity) = state.identity() else {
            return Ok(Self::Trusted);
        };
        match bearer(headers) {
            Some(token) => identity
                .verify(token)
                .map(Self::Buyer)
                .map_err(|why| unauthenticated(&why.0)),
            None if headers.contains_key(header::AUTHORIZATION) => Err(unauthenticated(
                "the Authorization header is not of the form Bearer <token>",
            )),
            None => Err(unauthenticated("this route needs a signed-in buyer")),
        }
    }

    /// The buyer a purchase or a queue join acts for. `named` is the
    /// body's `user_id`: required when identity is off (and for the admin
    /// token), optional with a JWT, where naming anyone but the token's
    /// `sub` is 403 `user_mismatch`. A trusted caller's buyer is charged
    /// its rate limit here (a JWT buyer was charged when the request came
    /// in).
    pub async fn buyer(&self, state: &AppState, named: Option<String>) -> Result<UserId, ApiError> {
        match self {
            // Compared in the canonical form: the sub and the body may
            // spell one buyer differently.
            Self::Buyer(Verified { buyer, .. }) => match named {
                Some(named) if UserId::new(named.as_str()).as_ref() != Ok(buyer) => {
                    Err(ApiError::new(
                        ErrorCode::UserMismatch,
                        "user_id names another buyer than the signed-in one; leave it out or send the token's sub",
                    ))
                }
                _ => Ok(buyer.clone()),
            },
            Self::Trusted | Self::Admin => {
                let named = named
                    .ok_or_else(|| ApiError::invalid("user_id", "is required: name the buyer"))?;
                let buyer = UserId::new(named)?;
                if *self == Self::Trusted {
                    state.rate_limiter().check_buyer(&buyer).await?;
                }
                Ok(buyer)
            }
        }
    }

    /// The buyer's tier. `named` is the body's `tier`: a trusted caller's
    /// (and the admin's) word, where with identity on the tier is the
    /// token's tier claim and naming another is 403 `forbidden`.
    pub fn tier(&self, named: Option<String>) -> Result<Option<TierName>, ApiError> {
        match self {
            Self::Buyer(Verified { tier, .. }) => match named {
                Some(named) if tier.as_ref().is_none_or(|t| t.as_str() != named) => {
                    Err(ApiError::new(
                        ErrorCode::Forbidden,
                        "the buyer's tier comes from their token's tier claim; leave tier out",
                    ))
                }
                _ => Ok(tier.clone()),
            },
            Self::Trusted | Self::Admin => Ok(named.map(TierName::new).transpose()?),
        }
    }

    /// Whether the caller may read or change an order of `owner`: its
    /// buyer, the admin, or anyone when identity is off. Routes answer 404
    /// (not 403) otherwise, so order ids reveal nothing.
    pub fn may_access(&self, owner: &UserId) -> bool {
        match self {
            Self::Buyer(verified) => verified.buyer == *owner,
            Self::Trusted | Self::Admin => true,
        }
    }
}
