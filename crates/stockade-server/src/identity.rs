//! Buyers' identity: the verifier of the JWTs buyers prove who they are
//! with (`--jwt-secret` or `--jwt-public-key`). The API's
//! [`crate::api::identity::Caller`] asks it about each request's bearer
//! token.

use std::collections::HashSet;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::HashMap;

use stockade_core::{TierName, UserId};

/// Why a token proves no buyer, for the buyer to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified(pub String);

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
    /// The claim that names the buyer's tier (`--jwt-tier-claim`).
    tier_claim: String,
}

/// The claim that names a buyer's tier unless `--jwt-tier-claim` says
/// another.
pub const DEFAULT_TIER_CLAIM: &str = "tier";

/// A buyer a token proves: its `sub`, and its tier claim if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The buyer.
    pub buyer: UserId,
    /// The buyer's tier.
    pub tier: Option<TierName>,
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

/// The claims Stockade reads: `sub`, and the tier claim among the others.
#[derive(Debug, Clone, Deserialize)]
struct Claims {
    sub: String,
    #[serde(flatten)]
    others: HashMap<String, serde_json::Value>,
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
            tier_claim: DEFAULT_TIER_CLAIM.to_owned(),
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

    /// The buyer a token proves, or why it proves none.
    pub fn verify(&self, token: &str) -> Result<Verified, Unverified> {
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
                Unverified(why.to_owned())
            },
        )?;
        let buyer = UserId::new(data.claims.sub).map_err(|e| {
            Unverified(format!(
                "the token's sub is not a valid buyer id: {}",
                e.reason
            ))
        })?;
        let tier = match data.claims.others.get(&self.tier_claim) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(name)) => {
                Some(TierName::new(name.as_str()).map_err(|e| {
                    Unverified(format!(
                        "the token's {} claim is not a valid tier name: {}",
                        self.tier_claim, e.reason
                    ))
                })?)
            }
            Some(_) => {
                return Err(Unverified(format!(
                    "the token's {} claim is not a string",
                    self.tier_claim
                )));
            }
        };
        Ok(Verified { buyer, tier })
    }

    /// Reads buyers' tiers from the claim `name` instead of `tier`.
    pub fn with_tier_claim(self, name: &str) -> Self {
        Self {
            tier_claim: name.to_owned(),
            ..self
        }
    }
}
