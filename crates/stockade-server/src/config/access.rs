//! Settings of who may do what: the payment service's token, secrets read
//! from files (so they stay out of `ps` and the environment), and the
//! public address whose scheme decides whether the dashboard's cookie is
//! `Secure`.

use std::path::Path;

use super::settings::Sources;
use super::{ConfigError, RawConfig, invalid};

/// The shortest payments token accepted.
pub const MIN_PAYMENTS_TOKEN: usize = 16;

/// The bearer token of the payment service: with the admin token, the only
/// credential that confirms a held order.
#[derive(Clone, PartialEq, Eq)]
pub struct PaymentsToken(String);

impl PaymentsToken {
    /// The token.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PaymentsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PaymentsToken(<redacted>)")
    }
}

/// Where browsers reach the service (`--public-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    /// Whether browsers reach the service over TLS: then its cookies are
    /// `Secure`.
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    /// The address as configured.
    pub fn as_str(&self) -> &str {
        &self.0
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
fn secret_or_file(
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

/// `--payments-token` or `--payments-token-file`: at least
/// [`MIN_PAYMENTS_TOKEN`] characters.
pub fn resolve_payments_token(
    raw: &RawConfig,
    sources: &Sources,
) -> Result<Option<PaymentsToken>, ConfigError> {
    let Some((token, key)) = secret_or_file(
        raw.payments_token.as_deref(),
        raw.payments_token_file.as_deref(),
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
    if raw.admin_token.as_deref() == Some(token.as_str()) {
        return Err(invalid(
            &sources.name(key),
            "must differ from the admin token: the payment service confirms orders, nothing else",
        ));
    }
    Ok(Some(PaymentsToken(token)))
}

/// `--jwt-secret` or `--jwt-secret-file`, and the key it came from.
pub fn jwt_secret(
    raw: &RawConfig,
    sources: &Sources,
) -> Result<Option<(String, &'static str)>, ConfigError> {
    secret_or_file(
        raw.jwt_secret.as_deref(),
        raw.jwt_secret_file.as_deref(),
        "jwt_secret",
        "jwt_secret_file",
        sources,
    )
}

/// `--public-url`: an `http://` or `https://` address with a host.
pub fn resolve_public_url(
    raw: &RawConfig,
    sources: &Sources,
) -> Result<Option<PublicUrl>, ConfigError> {
    let Some(url) = raw.public_url.as_deref().map(str::trim) else {
        return Ok(None);
    };
    if url.is_empty() {
        return Ok(None);
    }
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .map(|rest| rest.split('/').next().unwrap_or(""));
    match host {
        Some(host) if !host.is_empty() && !url.contains(char::is_whitespace) => {
            Ok(Some(PublicUrl(url.trim_end_matches('/').to_owned())))
        }
        _ => Err(invalid(
            &sources.name("public_url"),
            format!(
                "{url:?} is not an address like https://shop.example.com (http:// or https://, then a host)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::ServerConfig;
    use super::*;

    fn resolve(raw: RawConfig) -> Result<ServerConfig, ConfigError> {
        ServerConfig::resolve(raw, RawConfig::default(), None)
    }

    #[test]
    fn the_payments_token_comes_from_a_value_or_a_file_never_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "payments-0123456789abcdef\n").unwrap();
        let config = resolve(RawConfig {
            payments_token_file: Some(file.clone()),
            ..RawConfig::default()
        })
        .unwrap();
        assert_eq!(
            config.payments_token.as_ref().map(PaymentsToken::as_str),
            Some("payments-0123456789abcdef")
        );
        assert!(!format!("{config:?}").contains("payments-0123456789abcdef"));
        let err = resolve(RawConfig {
            payments_token: Some("payments-0123456789abcdef".into()),
            payments_token_file: Some(file),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        let err = resolve(RawConfig {
            payments_token: Some("short".into()),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid setting --payments-token:"),
            "{err}"
        );
        let err = resolve(RawConfig {
            admin_token: Some("the-same-token-0123456789".into()),
            payments_token: Some("the-same-token-0123456789".into()),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("differ from the admin token"),
            "{err}"
        );
        assert!(
            resolve(RawConfig::default())
                .unwrap()
                .payments_token
                .is_none()
        );
    }

    #[test]
    fn a_jwt_secret_file_turns_identity_on_and_is_checked_like_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwt");
        std::fs::write(&file, "0123456789abcdef0123456789abcdef\n").unwrap();
        let config = resolve(RawConfig {
            jwt_secret_file: Some(file.clone()),
            ..RawConfig::default()
        })
        .unwrap();
        assert_eq!(config.identity.unwrap().algorithm(), "HS256");
        std::fs::write(&file, "too short").unwrap();
        let err = resolve(RawConfig {
            jwt_secret_file: Some(file.clone()),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid setting --jwt-secret-file:"),
            "{err}"
        );
        std::fs::write(&file, "\n").unwrap();
        let err = resolve(RawConfig {
            jwt_secret_file: Some(file),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
    }

    #[test]
    fn the_public_url_decides_secure_cookies() {
        let url = |text: &str| {
            resolve(RawConfig {
                public_url: Some(text.into()),
                ..RawConfig::default()
            })
            .map(|c| c.public_url.unwrap())
        };
        assert!(url("https://shop.example/").unwrap().is_https());
        assert!(!url("http://localhost:8080").unwrap().is_https());
        for bad in ["shop.example", "https://", "ftp://x", "https://a b"] {
            let err = url(bad).unwrap_err();
            assert!(err.to_string().contains("--public-url"), "{bad}: {err}");
        }
    }
}
