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

use std::collections::HashSet;
use stockade_api::ErrorCode;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use stockade_core::UserId;

use super::auth::{bearer, is_admin};
use super::error::ApiError;
use crate::state::AppState;

/// Seconds of clock difference allowed between the token issuer and this
/// service when checking `exp` and `nbf`.
pub const LEEWAY_SECONDS: u64 = 30;

/// The shortest HS256 secret accepted, in bytes (RFC 7518: a key at least
/// as long as the hash).
pub const MIN_SECRET_BYTES: usize = 32;

/// Verifies buyers' JWTs: the key, the one algorithm it allows, and the
/// issuer and audience the tokens must name.
#[derive(Clone)]
pub struct Identity {
    key: DecodingKey,
    validation: Validation,
    algorithm: Algorithm,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Identity")
            .field("algorithm", &self.algorithm)
            .field("issuer", &self.validation.iss)
            .field("audience", &self.validation.aud)
            .finish_non_exhaustive()
    }
}

/// The claims Stockade reads (others are ignored).
#[derive(Debug, Clone, Deserialize)]
struct Claims {
    sub: String,
}

impl Identity {
    /// Tokens signed with HS256 and `secret` (at least 32 bytes).
    pub fn hs256(
        secret: &[u8],
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "must be at least {MIN_SECRET_BYTES} bytes long (it is {})",
                secret.len()
            ));
        }
        Ok(Self::new(
            DecodingKey::from_secret(secret),
            Algorithm::HS256,
            issuer,
            audience,
        ))
    }

    /// Tokens signed with the private half of a PEM public key: RS256 for
    /// an RSA key, ES256 for a P-256 EC key.
    pub fn public_key_pem(
        pem: &[u8],
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> Result<Self, String> {
        if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
            return Ok(Self::new(key, Algorithm::RS256, issuer, audience));
        }
        match DecodingKey::from_ec_pem(pem) {
            Ok(key) => Ok(Self::new(key, Algorithm::ES256, issuer, audience)),
            Err(error) => Err(format!(
                "is not a PEM public key for RS256 (RSA) or ES256 (EC P-256): {error}"
            )),
        }
    }

    fn new(
        key: DecodingKey,
        algorithm: Algorithm,
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> Self {
        // One algorithm: a token cannot choose another (no `none`, no HS256
        // made with a public key as the secret).
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        // A token not valid yet (`nbf`) is refused, with the same leeway
        // as `exp` (jsonwebtoken leaves `nbf` unchecked by default).
        validation.validate_nbf = true;
        let mut required = vec!["exp", "sub"];
        if let Some(issuer) = issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        match audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.required_spec_claims = required
            .into_iter()
            .map(str::to_owned)
            .collect::<HashSet<_>>();
        Self {
            key,
            validation,
            algorithm,
        }
    }

    /// The algorithm tokens must be signed with.
    pub fn algorithm(&self) -> &'static str {
        match self.algorithm {
            Algorithm::HS256 => "HS256",
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            _ => "unsupported",
        }
    }

    /// The buyer a token proves, or 401 `unauthenticated` saying why not.
    pub fn verify(&self, token: &str) -> Result<UserId, ApiError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation).map_err(
            |error| {
                let why = match error.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
                    ErrorKind::InvalidSignature => "the token's signature does not verify",
                    ErrorKind::InvalidIssuer => "the token's issuer (iss) is not the expected one",
                    ErrorKind::InvalidAudience => {
                        "the token's audience (aud) is not the expected one"
                    }
                    ErrorKind::MissingRequiredClaim(_) => {
                        "the token lacks a required claim (exp, sub, and iss/aud when configured)"
                    }
                    ErrorKind::InvalidAlgorithm
                    | ErrorKind::InvalidAlgorithmName
                    | ErrorKind::MissingAlgorithm => {
                        "the token is not signed with the algorithm this service accepts"
                    }
                    _ => "the token is not a well-formed JWT",
                };
                unauthenticated(why)
            },
        )?;
        UserId::new(data.claims.sub).map_err(|e| {
            unauthenticated(&format!(
                "the token's sub is not a valid buyer id: {}",
                e.reason
            ))
        })
    }
}

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
    /// A buyer proven by a verified JWT (its `sub`).
    Buyer(UserId),
    /// The holder of the admin token: acts for any buyer, unlimited.
    Admin,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Self::from_headers(state, &parts.headers)?;
        if let Self::Buyer(buyer) = &caller {
            state.rate_limiter().check_buyer(buyer).await?;
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
            Some(token) => identity.verify(token).map(Self::Buyer),
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
            Self::Buyer(buyer) => match named {
                Some(named) if named != buyer.as_str() => Err(ApiError::new(
                    ErrorCode::UserMismatch,
                    "user_id names another buyer than the signed-in one; leave it out or send the token's sub",
                )),
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

    /// Whether the caller may read or change an order of `owner`: its
    /// buyer, the admin, or anyone when identity is off. Routes answer 404
    /// (not 403) otherwise, so order ids reveal nothing.
    pub fn may_access(&self, owner: &UserId) -> bool {
        match self {
            Self::Buyer(buyer) => buyer == owner,
            Self::Trusted | Self::Admin => true,
        }
    }
}
