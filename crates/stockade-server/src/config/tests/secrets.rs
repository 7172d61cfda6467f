//! Every secret setting has a `_FILE` form, and no secret shows in the
//! `Debug` of the configuration, as given or resolved.

use super::env;
use crate::config::{RawConfig, ServerConfig};

const ADMIN: &str = "admin-token-0123456789abcdef";
const ADMISSION: &str = "admission-secret-0123456789abcdef0123456789";
const DRAW_KEY: &str = "draw-key-0123456789abcdef0123456789abcd";
const DB_PASSWORD: &str = "db-pa55word-xyz";
const REDIS_PASSWORD: &str = "redis-pa55word-xyz";

fn resolve(vars: &[(&str, &str)]) -> Result<ServerConfig, super::ConfigError> {
    ServerConfig::resolve(RawConfig::default(), env(vars), None)
}

/// One file per secret, each read through its `_FILE` variable.
#[test]
fn every_secret_is_read_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{text}\n")).unwrap();
        path.display().to_string()
    };
    let database = format!("postgres://app:{DB_PASSWORD}@db:5432/orders");
    let redis = format!("redis://:{REDIS_PASSWORD}@cache:6379/");
    let files = [
        ("STOCKADE_ADMIN_TOKEN_FILE", write("admin", ADMIN)),
        (
            "STOCKADE_ADMISSION_SECRET_FILE",
            write("admission", ADMISSION),
        ),
        ("STOCKADE_DATABASE_URL_FILE", write("database", &database)),
        ("STOCKADE_REDIS_URL_FILE", write("redis", &redis)),
        ("STOCKADE_DRAW_KEY_FILE", write("draw", DRAW_KEY)),
    ];
    let vars: Vec<(&str, &str)> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let config = resolve(&vars).unwrap();
    assert_eq!(config.admin().token.expose(), ADMIN);
    assert!(!config.admin().generated);
    assert_eq!(config.admission_secret().key.expose(), ADMISSION.as_bytes());
    assert_eq!(config.store().url(), database);
    assert_eq!(config.engine().name(), "redis");
    assert_eq!(config.draw_key().unwrap().expose(), DRAW_KEY.as_bytes());
}

#[test]
fn debug_of_the_config_shows_no_secret() {
    let database = format!("postgres://app:{DB_PASSWORD}@db:5432/orders");
    let redis = format!("redis://:{REDIS_PASSWORD}@cache:6379/");
    let jwt = "jwt-secret-0123456789abcdef0123456789abcdef";
    let config = resolve(&[
        ("STOCKADE_ADMIN_TOKEN", ADMIN),
        ("STOCKADE_ADMISSION_SECRET", ADMISSION),
        ("STOCKADE_DRAW_KEY", DRAW_KEY),
        ("STOCKADE_PAYMENTS_TOKEN", "payments-0123456789abcdef"),
        ("STOCKADE_JWT_SECRET", jwt),
        ("STOCKADE_DATABASE_URL", &database),
        ("STOCKADE_REDIS_URL", &redis),
        ("STOCKADE_ENGINE", "redis"),
    ])
    .unwrap();
    let shown = format!("{config:?} {config:#?}");
    for secret in [
        ADMIN,
        ADMISSION,
        DRAW_KEY,
        "payments-0123456789abcdef",
        jwt,
        DB_PASSWORD,
        REDIS_PASSWORD,
    ] {
        assert!(!shown.contains(secret), "{secret:?} in {shown}");
    }
    assert!(shown.contains("db:5432"), "the store's host stays: {shown}");
}

/// The settings as given (flags, variables, the file), before they are
/// checked: `Debug` shows no token and no URL's password, in the user
/// part or the query.
#[test]
fn debug_of_the_raw_settings_shows_no_secret() {
    let database = format!("postgres://app:{DB_PASSWORD}@db:5432/orders?password={DB_PASSWORD}");
    let redis = format!("redis://:{REDIS_PASSWORD}@cache:6379/");
    let jwt = "jwt-secret-0123456789abcdef0123456789abcdef";
    let payments = "payments-0123456789abcdef";
    let raw = env(&[
        ("STOCKADE_ADMIN_TOKEN", ADMIN),
        ("STOCKADE_ADMISSION_SECRET", ADMISSION),
        ("STOCKADE_PAYMENTS_TOKEN", payments),
        ("STOCKADE_JWT_SECRET", jwt),
        ("STOCKADE_DATABASE_URL", &database),
        ("STOCKADE_REDIS_URL", &redis),
    ]);
    let flags =
        RawConfig::from_pairs(&[("database_url", &database), ("redis_url", &redis)]).unwrap();
    let shown = format!("{raw:?} {raw:#?} {flags:?}");
    for secret in [ADMIN, ADMISSION, payments, jwt, DB_PASSWORD, REDIS_PASSWORD] {
        assert!(!shown.contains(secret), "{secret:?} in {shown}");
    }
    // What is not secret stays readable.
    assert!(shown.contains("admin_token: Some(<redacted>)"), "{shown}");
    assert!(
        shown.contains(r#"database_url: Some("postgres://db:5432/orders")"#),
        "{shown}"
    );
    assert!(
        shown.contains(r#"redis_url: Some("redis://cache:6379/")"#),
        "{shown}"
    );
    assert!(shown.contains("jwt_secret_file: None"), "{shown}");
}

#[test]
fn a_value_and_its_file_together_or_an_unreadable_file_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin");
    std::fs::write(&file, ADMIN).unwrap();
    let path = file.display().to_string();
    let err = resolve(&[
        ("STOCKADE_ADMIN_TOKEN", ADMIN),
        ("STOCKADE_ADMIN_TOKEN_FILE", &path),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("STOCKADE_ADMIN_TOKEN_FILE") && err.contains("not both"),
        "{err}"
    );
    let missing = dir.path().join("nope").display().to_string();
    for variable in [
        "STOCKADE_ADMIN_TOKEN_FILE",
        "STOCKADE_ADMISSION_SECRET_FILE",
        "STOCKADE_DATABASE_URL_FILE",
        "STOCKADE_REDIS_URL_FILE",
    ] {
        let err = resolve(&[(variable, &missing)]).unwrap_err().to_string();
        assert!(
            err.contains(variable) && err.contains("cannot read") && err.contains(&missing),
            "{variable}: {err}"
        );
    }
}
