//! Tokens and secrets: the admin token, the payment service's token, the
//! key of the waiting rooms' admission tokens and the draw key, each given
//! directly or in a file (a `_FILE` setting: a mounted secret stays out of `ps` and the
//! environment). The admin token, the admission key and the draw key are
//! never flags;
//! each is a [`Secret`], which `Debug` never shows.

use std::path::{Path, PathBuf};

use stockade_core::draw::DrawKey;
use stockade_core::redact::Secret;

use super::group::settings_group;
use super::{ConfigError, Sources, invalid};

/// The shortest payments token accepted.
pub const MIN_PAYMENTS_TOKEN: usize = 16;

settings_group! {
    /// Tokens and secrets.
    #[command(next_help_heading = "Tokens and secrets")]
    pub struct AccessSettings {
        /// The bearer token of admin requests, at least 16 characters.
        /// Default: generated and printed at start.
        #[arg(long, env = "STOCKADE_ADMIN_TOKEN", hide = true)]
        pub admin_token: Option<String> as secret,
        /// A file holding the admin token (instead of STOCKADE_ADMIN_TOKEN).
        #[arg(long, env = "STOCKADE_ADMIN_TOKEN_FILE", value_name = "FILE")]
        pub admin_token_file: Option<PathBuf>,
        /// The payment service's bearer token, at least 16 characters; prefer
        /// the variable or --payments-token-file, a flag shows in `ps`. POST
        /// /v1/orders/{id}/confirm is the payment service's callback: it
        /// needs this token or the admin token; buyers cannot confirm.
        /// Default: none, only the admin confirms.
        #[arg(long, env = "STOCKADE_PAYMENTS_TOKEN", value_name = "TOKEN")]
        pub payments_token: Option<String> as secret,
        /// A file holding the payments token (instead of --payments-token).
        #[arg(long, env = "STOCKADE_PAYMENTS_TOKEN_FILE", value_name = "FILE")]
        pub payments_token_file: Option<PathBuf>,
        /// The key that signs waiting-room admission tokens, at least 32
        /// characters (e.g. `openssl rand -hex 32`). Default: generated at
        /// start, which suits one instance only: every instance of a
        /// deployment must share it.
        #[arg(long, env = "STOCKADE_ADMISSION_SECRET", hide = true)]
        pub admission_secret: Option<String> as secret,
        /// A file holding the admission key (instead of
        /// STOCKADE_ADMISSION_SECRET).
        #[arg(long, env = "STOCKADE_ADMISSION_SECRET_FILE", value_name = "FILE")]
        pub admission_secret_file: Option<PathBuf>,
        /// The key draw seeds are derived from, at least 32 characters
        /// (e.g. `openssl rand -hex 32`): the store keeps only a nonce, so
        /// nobody who reads it can tell a draw before entries close. Every
        /// instance of a deployment must share it. Default: on SQLite, a key
        /// generated once and kept in the data directory (draw.key); on
        /// PostgreSQL, none, and draw sales are refused until it is set.
        #[arg(long, env = "STOCKADE_DRAW_KEY", hide = true)]
        pub draw_key: Option<String>,
        /// A file holding the draw key (instead of STOCKADE_DRAW_KEY).
        #[arg(long, env = "STOCKADE_DRAW_KEY_FILE", value_name = "FILE")]
        pub draw_key_file: Option<PathBuf>,
    }
}

/// The admin token and whether it was generated at start.
#[derive(Debug, Clone)]
pub struct AdminToken {
    /// The bearer token admin requests must carry.
    pub token: Secret<String>,
    /// True when no token was configured and this one was generated (and
    /// must be printed so the operator can use it).
    pub generated: bool,
}

/// The bearer token of the payment service: with the admin token, the only
/// credential that confirms a held order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentsToken(Secret<String>);

impl PaymentsToken {
    /// The token.
    pub fn as_str(&self) -> &str {
        self.0.expose()
    }
}

/// The key that signs waiting-room admission tokens.
#[derive(Debug, Clone)]
pub struct AdmissionSecret {
    /// The key bytes.
    pub key: Secret<Vec<u8>>,
    /// True when none was configured and this one was generated: tokens
    /// then verify only on this instance, until it restarts.
    pub generated: bool,
}

impl AccessSettings {
    /// `admin_token`: at least 16 characters, or generated.
    pub(super) fn resolve_admin(&self, sources: &Sources) -> Result<AdminToken, ConfigError> {
        let given = secret_or_file(
            self.admin_token.as_deref(),
            self.admin_token_file.as_deref(),
            "admin_token",
            "admin_token_file",
            sources,
        )?;
        let (token, generated) = secret_or_generated(given, sources, 16, "")?;
        Ok(AdminToken {
            token: Secret::new(token),
            generated,
        })
    }

    /// `payments_token` or `payments_token_file`: at least
    /// [`MIN_PAYMENTS_TOKEN`] characters, not the admin token.
    pub(super) fn resolve_payments_token(
        &self,
        sources: &Sources,
    ) -> Result<Option<PaymentsToken>, ConfigError> {
        let Some((token, key)) = secret_or_file(
            self.payments_token.as_deref(),
            self.payments_token_file.as_deref(),
            "payments_token",
            "payments_token_file",
            sources,
        )?
        else {
            return Ok(None);
        };
        if token.len() < MIN_PAYMENTS_TOKEN {
            return Err(invalid(
                &sources.name(key),
                format!(
                    "must be at least {MIN_PAYMENTS_TOKEN} characters long (for example `openssl rand -hex 24`)"
                ),
            ));
        }
        if self.admin_token.as_deref() == Some(token.as_str()) {
            return Err(invalid(
                &sources.name(key),
                "must differ from the admin token: the payment service confirms orders, nothing else",
            ));
        }
        Ok(Some(PaymentsToken(Secret::new(token))))
    }

    /// `admission_secret`: at least 32 characters, or generated.
    pub(super) fn resolve_admission_secret(
        &self,
        sources: &Sources,
    ) -> Result<AdmissionSecret, ConfigError> {
        let given = secret_or_file(
            self.admission_secret.as_deref(),
            self.admission_secret_file.as_deref(),
            "admission_secret",
            "admission_secret_file",
            sources,
        )?;
        let (secret, generated) = secret_or_generated(
            given,
            sources,
            32,
            " (for example 64 hex digits from `openssl rand -hex 32`)",
        )?;
        Ok(AdmissionSecret {
            key: Secret::new(secret.into_bytes()),
            generated,
        })
    }
}

impl AccessSettings {
    /// `draw_key`: at least 32 characters, or None (see the setting).
    pub(super) fn resolve_draw_key(
        &self,
        sources: &Sources,
    ) -> Result<Option<DrawKey>, ConfigError> {
        let Some((key, from)) = secret_or_file(
            self.draw_key.as_deref(),
            self.draw_key_file.as_deref(),
            "draw_key",
            "draw_key_file",
            sources,
        )?
        else {
            return Ok(None);
        };
        DrawKey::new(key.into_bytes())
            .map(Some)
            .map_err(|reason| invalid(&sources.name(from), reason))
    }
}

/// A secret kept in a file: its text without surrounding whitespace (a
/// trailing newline is what editors and `echo` leave).
fn read_secret(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(secret.to_owned())
}

/// A secret given directly (`value_key`) or in a file (`file_key`), never
/// both; with the key it came from, for later messages.
pub(super) fn secret_or_file(
    value: Option<&str>,
    file: Option<&Path>,
    value_key: &'static str,
    file_key: &'static str,
    sources: &Sources,
) -> Result<Option<(String, &'static str)>, ConfigError> {
    let value = value.filter(|v| !v.is_empty());
    let file = file.filter(|p| !p.as_os_str().is_empty());
    match (value, file) {
        (Some(_), Some(_)) => Err(invalid(
            &sources.name(file_key),
            format!(
                "give the secret either in a file or as {}, not both",
                sources.name(value_key)
            ),
        )),
        (Some(value), None) => Ok(Some((value.to_owned(), value_key))),
        (None, Some(path)) => read_secret(path)
            .map(|secret| Some((secret, file_key)))
            .map_err(|reason| invalid(&sources.name(file_key), reason)),
        (None, None) => Ok(None),
    }
}

/// A configured secret (with the key it came from) of at least `min`
/// characters, or a generated one (and true).
fn secret_or_generated(
    given: Option<(String, &'static str)>,
    sources: &Sources,
    min: usize,
    hint: &str,
) -> Result<(String, bool), ConfigError> {
    match given {
        Some((secret, key)) if secret.len() < min => Err(invalid(
            &sources.name(key),
            format!("must be at least {min} characters long{hint}"),
        )),
        Some((secret, _)) => Ok((secret, false)),
        None => Ok((generate_token(), true)),
    }
}

fn generate_token() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    hex::encode(bytes)
}
