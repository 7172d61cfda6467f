//! The payments token, the JWT secret file and the public URL.

use super::flags;
use crate::config::{ConfigError, PaymentsToken, RawConfig, ServerConfig};

fn resolve(raw: RawConfig) -> Result<ServerConfig, ConfigError> {
    ServerConfig::resolve(raw, RawConfig::default(), None)
}

#[test]
fn the_payments_token_comes_from_a_value_or_a_file_never_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "payments-0123456789abcdef\n").unwrap();
    let config = resolve(flags(&[("payments_token_file", file.to_str().unwrap())])).unwrap();
    assert_eq!(
        config.payments_token().map(PaymentsToken::as_str),
        Some("payments-0123456789abcdef")
    );
    assert!(!format!("{config:?}").contains("payments-0123456789abcdef"));
    let err = resolve(flags(&[
        ("payments_token", "payments-0123456789abcdef"),
        ("payments_token_file", file.to_str().unwrap()),
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("not both"), "{err}");
    let err = resolve(flags(&[("payments_token", "short")])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid setting --payments-token:"),
        "{err}"
    );
    let err = resolve(flags(&[
        ("admin_token", "the-same-token-0123456789"),
        ("payments_token", "the-same-token-0123456789"),
    ]))
    .unwrap_err();
    assert!(
        err.to_string().contains("differ from the admin token"),
        "{err}"
    );
    assert!(
        resolve(RawConfig::default())
            .unwrap()
            .payments_token()
            .is_none()
    );
}

#[test]
fn a_jwt_secret_file_turns_identity_on_and_is_checked_like_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jwt");
    std::fs::write(&file, "0123456789abcdef0123456789abcdef\n").unwrap();
    let config = resolve(flags(&[("jwt_secret_file", file.to_str().unwrap())])).unwrap();
    assert_eq!(config.identity().unwrap().algorithm(), "HS256");
    std::fs::write(&file, "too short").unwrap();
    let err = resolve(flags(&[("jwt_secret_file", file.to_str().unwrap())])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid setting --jwt-secret-file:"),
        "{err}"
    );
    std::fs::write(&file, "\n").unwrap();
    let err = resolve(flags(&[("jwt_secret_file", file.to_str().unwrap())])).unwrap_err();
    assert!(err.to_string().contains("is empty"), "{err}");
}

#[test]
fn the_public_url_decides_secure_cookies() {
    let url = |text: &str| {
        resolve(flags(&[("public_url", text)])).map(|c| c.public_url().cloned().unwrap())
    };
    assert!(url("https://shop.example/").unwrap().is_https());
    assert!(!url("http://localhost:8080").unwrap().is_https());
    for bad in ["shop.example", "https://", "ftp://x", "https://a b"] {
        let err = url(bad).unwrap_err();
        assert!(err.to_string().contains("--public-url"), "{bad}: {err}");
    }
}
