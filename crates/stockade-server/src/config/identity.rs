//! How buyers prove who they are: JWTs checked with a shared secret
//! (HS256) or a public key (RS256, ES256); off by default, when the service
//! trusts its caller to name the buyer.

use std::path::PathBuf;

use super::access::secret_or_file;
use super::group::settings_group;
use super::{ConfigError, Sources, invalid};
use crate::identity::Identity;

settings_group! {
    /// Buyers' identity.
    #[command(next_help_heading = "Buyers' identity (JWT)")]
    pub struct IdentitySettings {
        /// Verify buyers: HS256 JWTs signed with this secret, at least 32
        /// bytes; prefer the variable, a flag shows in `ps`. Purchases and
        /// order routes then need Authorization: Bearer JWT and the buyer
        /// is its sub. Default: off, the service trusts its caller to name
        /// the buyer.
        #[arg(long, env = "STOCKADE_JWT_SECRET", value_name = "SECRET")]
        pub jwt_secret: Option<String> as secret,
        /// Verify buyers: HS256 JWTs signed with the secret in this file,
        /// instead of --jwt-secret.
        #[arg(long, env = "STOCKADE_JWT_SECRET_FILE", value_name = "FILE")]
        pub jwt_secret_file: Option<PathBuf>,
        /// Verify buyers: RS256 (RSA key) or ES256 (EC P-256 key) JWTs
        /// checked with this PEM public key file.
        #[arg(long, env = "STOCKADE_JWT_PUBLIC_KEY", value_name = "FILE")]
        pub jwt_public_key: Option<PathBuf>,
        /// The iss buyers' JWTs must carry. Default: any.
        #[arg(long, env = "STOCKADE_JWT_ISSUER", value_name = "ISS")]
        pub jwt_issuer: Option<String>,
        /// The aud buyers' JWTs must carry. Default: any.
        #[arg(long, env = "STOCKADE_JWT_AUDIENCE", value_name = "AUD")]
        pub jwt_audience: Option<String>,
        /// The JWT claim that names the buyer's tier (a string; a sale's
        /// tiers reserve stock for their buyers). Default: tier.
        #[arg(long, env = "STOCKADE_JWT_TIER_CLAIM", value_name = "CLAIM")]
        pub jwt_tier_claim: Option<String>,
    }
}

impl IdentitySettings {
    /// Identity is on when a secret or a public key is given (not both);
    /// an issuer or an audience needs one of them.
    pub(super) fn resolve(&self, sources: &Sources) -> Result<Option<Identity>, ConfigError> {
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        // The secret, and the setting it came from (the value or the file).
        let secret = secret_or_file(
            self.jwt_secret.as_deref(),
            self.jwt_secret_file.as_deref(),
            "jwt_secret",
            "jwt_secret_file",
            sources,
        )?;
        let (secret, secret_key) = match &secret {
            Some((secret, key)) => (Some(secret.as_str()), *key),
            None => (None, "jwt_secret"),
        };
        let key_file = self
            .jwt_public_key
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty());
        let issuer = self.jwt_issuer.as_deref().filter(|s| !s.is_empty());
        let tier_claim = self.jwt_tier_claim.as_deref();
        if tier_claim.is_some_and(|claim| claim.trim().is_empty() || claim == "sub") {
            return Err(bad(
                "jwt_tier_claim",
                "must name a claim other than sub".to_owned(),
            ));
        }
        let claim = |identity: Identity| match tier_claim {
            Some(name) => identity.with_tier_claim(name),
            None => identity,
        };
        let audience = self.jwt_audience.as_deref().filter(|s| !s.is_empty());
        match (secret, key_file) {
            (Some(_), Some(_)) => Err(bad(
                secret_key,
                format!(
                    "give either a secret (HS256) or {} (RS256/ES256), not both",
                    sources.name("jwt_public_key")
                ),
            )),
            (Some(secret), None) => Identity::hs256(secret.as_bytes(), issuer, audience)
                .map(claim)
                .map(Some)
                .map_err(|reason| bad(secret_key, reason.to_string())),
            (None, Some(path)) => {
                let pem = std::fs::read(path).map_err(|e| {
                    bad(
                        "jwt_public_key",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                Identity::public_key_pem(&pem, issuer, audience)
                    .map(claim)
                    .map(Some)
                    .map_err(|reason| {
                        bad("jwt_public_key", format!("{}: {reason}", path.display()))
                    })
            }
            (None, None) if issuer.is_some() || audience.is_some() || tier_claim.is_some() => {
                Err(bad(
                    if issuer.is_some() {
                        "jwt_issuer"
                    } else if audience.is_some() {
                        "jwt_audience"
                    } else {
                        "jwt_tier_claim"
                    },
                    "needs --jwt-secret or --jwt-public-key to verify tokens with".to_owned(),
                ))
            }
            (None, None) => Ok(None),
        }
    }
}
