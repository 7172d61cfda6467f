//! The admin API's bearer token check.

use axum::http::{HeaderMap, StatusCode, header};

use super::error::ApiError;
use crate::state::AppState;

/// Passes if the request carries `Authorization: Bearer <admin token>`.
pub fn require_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if constant_time_eq(token.as_bytes(), state.admin_token().as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the admin token is wrong",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this is an admin endpoint: send Authorization: Bearer <STOCKADE_ADMIN_TOKEN>",
        )),
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
