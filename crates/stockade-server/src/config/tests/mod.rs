//! The checks of every setting and the naming of the bad ones (the access
//! group's are in `access`, the table's and the layers' in `declared`).

mod access;
mod declared;
mod secrets;

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::listener::HttpLimits;

/// A layer from `(file key, text)` pairs: the settings a test gives as
/// flags.
fn flags(pairs: &[(&str, &str)]) -> RawConfig {
    RawConfig::from_pairs(pairs).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> RawConfig {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    RawConfig::from_env(|name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

#[test]
fn defaults_are_the_embedded_setup_with_a_generated_token() {
    let config = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), None).unwrap();
    assert_eq!(config.listen().to_string(), "127.0.0.1:8080");
    assert_eq!(
        config.store(),
        &StoreLocation::Sqlite(PathBuf::from("./stockade-data/orders.db"))
    );
    assert_eq!(config.engine(), &Engine::Memory);
    assert!(config.engine().fallback().is_none());
    assert!(config.admin().generated);
    assert_eq!(config.admin().token.expose().len(), 48);
}

#[test]
fn flags_beat_environment_which_beats_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:9003\"\nbatch_max = 7\ncommit_deadline_ms = 30\n",
    )
    .unwrap();
    let flags = flags(&[("listen", "127.0.0.1:9001")]);
    let environment = env(&[
        ("STOCKADE_LISTEN", "127.0.0.1:9002"),
        ("STOCKADE_BATCH_MAX", "9"),
        ("STOCKADE_ADMIN_TOKEN", "0123456789abcdef"),
    ]);
    let config = ServerConfig::resolve(flags, environment, Some(&file)).unwrap();
    assert_eq!(config.listen().port(), 9001);
    assert_eq!(config.writer().max_batch, 9);
    assert_eq!(config.commit_deadline(), Duration::from_millis(30));
    assert!(!config.admin().generated);
}

#[test]
fn rejection_ttl_and_purchases_in_flight_are_bounded() {
    let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
    let defaults = resolve(RawConfig::default()).unwrap();
    assert_eq!(defaults.rejection_ttl(), Duration::from_millis(500));
    assert_eq!(defaults.max_purchases_in_flight(), 4_096);
    let err = resolve(flags(&[("max_purchases_in_flight", "0")])).unwrap_err();
    assert!(
        err.to_string().contains("--max-purchases-in-flight"),
        "{err}"
    );
    let err = resolve(flags(&[("rejection_ttl_ms", "1001")])).unwrap_err();
    assert!(err.to_string().contains("--rejection-ttl-ms"), "{err}");
    let config = resolve(env(&[
        ("STOCKADE_REJECTION_TTL_MS", "0"),
        ("STOCKADE_MAX_PURCHASES_IN_FLIGHT", "1"),
    ]))
    .unwrap();
    assert_eq!(config.rejection_ttl(), Duration::ZERO);
    assert_eq!(config.max_purchases_in_flight(), 1);
    let err =
        RawConfig::from_env(|n| (n == "STOCKADE_MAX_PURCHASES_IN_FLIGHT").then(|| "many".into()))
            .unwrap_err();
    assert!(
        err.to_string().contains("STOCKADE_MAX_PURCHASES_IN_FLIGHT"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(&file, "max_purchases_in_flight = 0\n").unwrap();
    let err =
        ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file)).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("max_purchases_in_flight in {}", file.display())),
        "{err}"
    );
}

/// A value each setting refuses, as a TOML literal.
const REFUSED: &[(&str, &str)] = &[
    ("listen", "\"nowhere\""),
    ("data_dir", "\"\""),
    ("engine", "\"oracle\""),
    ("fallback", "\"mysql\""),
    ("redis_url", "\"http://cache\""),
    ("redis_key_prefix", "\"shop:{a}\""),
    ("redis_scripts", "\"lua\""),
    ("database_url", "\"mysql://db\""),
    ("admin_token", "\"short\""),
    ("payments_token", "\"short\""),
    ("payments_token_file", "\"/nonexistent/payments-token\""),
    ("commit_deadline_ms", "0"),
    ("batch_max", "0"),
    ("batch_delay_ms", "5000"),
    ("outbox_grace_ms", "1"),
    ("rejection_ttl_ms", "5000"),
    ("max_purchases_in_flight", "0"),
    ("startup_wait_ms", "999999999"),
    ("header_read_timeout_ms", "0"),
    ("idle_timeout_ms", "0"),
    ("max_connections", "0"),
    ("max_connections_per_client", "0"),
    ("public_url", "\"shop.example\""),
    ("shutdown_timeout_ms", "1"),
    ("log_format", "\"xml\""),
    ("otlp_endpoint", "\"grpc://collector:4317\""),
    ("jwt_secret", "\"short\""),
    ("jwt_secret_file", "\"/nonexistent/jwt-secret\""),
    ("jwt_public_key", "\"/nonexistent/key.pem\""),
    ("jwt_issuer", "\"https://issuer.example\""),
    ("jwt_audience", "\"stockade\""),
    ("jwt_tier_claim", "\"sub\""),
    ("rate_limit_buyer", "\"fast\""),
    ("rate_limit_buyer_burst", "5"),
    ("rate_limit_ip", "\"5/fortnight\""),
    ("rate_limit_ip_burst", "5"),
    ("rate_limit_instances", "0"),
    ("trusted_proxies", "\"10.0.0.0/33\""),
    ("dashboard_session_ttl_s", "59"),
    ("metrics_retention_s", "0"),
    ("ended_sale_retention_s", "2592001"),
    ("admission_secret", "\"short\""),
    ("admin_token_file", "\"/nonexistent/admin-token\""),
    ("admission_secret_file", "\"/nonexistent/admission-secret\""),
    ("draw_key", "\"short\""),
    ("draw_key_file", "\"/nonexistent/draw-key\""),
    ("database_url_file", "\"/nonexistent/database-url\""),
    ("redis_url_file", "\"/nonexistent/redis-url\""),
];

#[test]
fn every_setting_is_named_by_where_its_value_came_from() {
    assert_eq!(
        REFUSED.len(),
        settings::SETTINGS.len(),
        "every setting needs a refused value here"
    );
    let dir = tempfile::tempdir().unwrap();
    for (key, literal) in REFUSED {
        let row = settings::setting_of(key);
        let plain = literal.trim_matches('"');
        // A variable.
        let err = ServerConfig::resolve(RawConfig::default(), env(&[(row.env, plain)]), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("invalid setting {}:", row.env)),
            "{key}: {err}"
        );
        // A flag (the admin token has none).
        let given: RawConfig = toml::from_str(&format!("{key} = {literal}")).unwrap();
        let err = ServerConfig::resolve(given, RawConfig::default(), None)
            .unwrap_err()
            .to_string();
        let flag = row.flag.unwrap_or(row.env);
        assert!(
            err.starts_with(&format!("invalid setting {flag}:")),
            "{key}: {err}"
        );
        // The file.
        let file = dir.path().join(format!("{key}.toml"));
        std::fs::write(&file, format!("{key} = {literal}\n")).unwrap();
        let err = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("invalid setting {key} in {}:", file.display())),
            "{key}: {err}"
        );
    }
}

#[test]
fn the_settings_table_covers_every_field_and_variable() {
    let fields: Vec<String> = RawConfig::keys().map(str::to_owned).collect();
    let keys: Vec<String> = settings::SETTINGS
        .iter()
        .map(|s| s.key.to_owned())
        .collect();
    let mut sorted_fields = fields.clone();
    sorted_fields.sort();
    let mut sorted_keys = keys.clone();
    sorted_keys.sort();
    assert_eq!(
        sorted_fields, sorted_keys,
        "RawConfig fields vs SETTINGS rows"
    );
    for row in settings::SETTINGS.iter() {
        assert_eq!(row.env, format!("STOCKADE_{}", row.key.to_uppercase()));
        if let Some(flag) = row.flag {
            assert_eq!(flag, format!("--{}", row.key.replace('_', "-")));
        }
        // from_env reads the row's variable into the row's field.
        let raw = RawConfig::from_env(|name| (name == row.env).then(|| "1".to_owned())).unwrap();
        assert!(
            raw.given().any(|key| key == row.key),
            "{} is not read from {}",
            row.key,
            row.env
        );
        // And the help table lists all three spellings.
        let help = settings::help_table();
        assert!(help.contains(row.env) && help.contains(row.key), "{help}");
    }
}

#[test]
fn http_limits_default_and_stay_inside_the_file_limit() {
    let config = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), None).unwrap();
    assert_eq!(config.http().header_read_timeout, Duration::from_secs(5));
    assert_eq!(config.http().idle_timeout, Duration::from_secs(75));
    assert_eq!(config.http().shutdown_timeout, Duration::from_secs(10));
    let limit = crate::listener::open_file_limit();
    assert_eq!(
        config.http().max_connections,
        HttpLimits::default_max_connections(limit)
    );
    let err = ServerConfig::resolve(
        flags(&[("max_connections", &limit.to_string())]),
        RawConfig::default(),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ulimit -n"), "{err}");
    // A default that another setting makes wrong is named as a default.
    let err = ServerConfig::resolve(
        RawConfig::default(),
        env(&[
            ("STOCKADE_COMMIT_DEADLINE_MS", "20000"),
            ("STOCKADE_OUTBOX_GRACE_MS", "60000"),
        ]),
        None,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "invalid setting --shutdown-timeout-ms / STOCKADE_SHUTDOWN_TIMEOUT_MS / shutdown_timeout_ms (default 10000): \
         must be longer than the commit deadline (STOCKADE_COMMIT_DEADLINE_MS = 20000 ms), \
         or purchases in flight at shutdown could go unanswered"
    );
}

#[test]
fn dashboard_session_ttl_and_metrics_retention_are_bounded() {
    let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
    let defaults = resolve(RawConfig::default()).unwrap();
    assert_eq!(
        defaults.dashboard_session_ttl(),
        Duration::from_secs(8 * 3600)
    );
    assert_eq!(defaults.metrics_retention(), Duration::from_secs(900));
    let err = resolve(flags(&[("dashboard_session_ttl_s", "59")])).unwrap_err();
    assert!(
        err.to_string().contains("--dashboard-session-ttl-s"),
        "{err}"
    );
    let err = resolve(flags(&[("metrics_retention_s", "0")])).unwrap_err();
    assert!(err.to_string().contains("--metrics-retention-s"), "{err}");
    let config = resolve(env(&[
        ("STOCKADE_DASHBOARD_SESSION_TTL_S", "600"),
        ("STOCKADE_METRICS_RETENTION_S", "30"),
    ]))
    .unwrap();
    assert_eq!(config.dashboard_session_ttl(), Duration::from_secs(600));
    assert_eq!(config.metrics_retention(), Duration::from_secs(30));
}

#[test]
fn admission_secret_is_generated_or_long_enough() {
    let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
    let generated = resolve(RawConfig::default())
        .unwrap()
        .admission_secret()
        .clone();
    assert!(generated.generated);
    assert_eq!(generated.key.expose().len(), 48);
    let err = resolve(env(&[("STOCKADE_ADMISSION_SECRET", "too-short")])).unwrap_err();
    assert!(
        err.to_string().contains("STOCKADE_ADMISSION_SECRET"),
        "{err}"
    );
    let secret = "0123456789abcdef0123456789abcdef";
    let config = resolve(env(&[("STOCKADE_ADMISSION_SECRET", secret)])).unwrap();
    assert_eq!(config.admission_secret().key.expose(), secret.as_bytes());
    assert!(!config.admission_secret().generated);
    assert!(!format!("{:?}", config.admission_secret()).contains(secret));
}

#[test]
fn a_redis_url_without_an_engine_selects_redis() {
    let resolve = |flags: RawConfig, env: RawConfig| ServerConfig::resolve(flags, env, None);
    let config = resolve(
        flags(&[("redis_url", "redis://127.0.0.1:6379")]),
        RawConfig::default(),
    )
    .unwrap();
    assert_eq!(config.engine().name(), "redis", "{:?}", config.engine());
    let config = resolve(
        RawConfig::default(),
        env(&[("STOCKADE_REDIS_URL", "redis://127.0.0.1:6379")]),
    )
    .unwrap();
    assert_eq!(config.engine().name(), "redis");
    let err = resolve(
        flags(&[("redis_url", "redis://127.0.0.1:6379")]),
        env(&[("STOCKADE_ENGINE", "memory")]),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("STOCKADE_REDIS_URL") || err.to_string().contains("--redis-url"),
        "{err}"
    );
}

#[test]
fn invalid_settings_name_the_setting() {
    let bad = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None).unwrap_err();
    let err = bad(flags(&[("listen", "nope")]));
    assert!(err.to_string().contains("--listen"), "{err}");
    let err = bad(flags(&[("engine", "redis"), ("redis_url", "http://x")]));
    assert!(err.to_string().contains("--redis-url"), "{err}");
    let err = bad(flags(&[("engine", "memory"), ("redis_url", "redis://x")]));
    assert!(err.to_string().contains("add --engine redis"), "{err}");
    let err = bad(flags(&[("engine", "redis")]));
    assert!(err.to_string().contains("--redis-url"), "{err}");
    let err = bad(flags(&[("engine", "postgres")]));
    assert!(err.to_string().contains("--database-url"), "{err}");
    let err = bad(flags(&[("engine", "mongodb")]));
    assert!(err.to_string().contains("--engine"), "{err}");
    let err = bad(flags(&[
        ("engine", "redis"),
        ("redis_url", "redis://x"),
        ("fallback", "postgres"),
    ]));
    assert!(err.to_string().contains("--fallback"), "{err}");
    // Only an embedder sharing one SQLite store asks for it there.
    let sqlite = ServerConfig::resolve(
        flags(&[("engine", "redis"), ("redis_url", "redis://x")]),
        RawConfig::default(),
        None,
    )
    .unwrap();
    assert!(sqlite.engine().fallback().is_none());
    let shared = sqlite.with_fallback_on_a_shared_store().unwrap();
    assert_eq!(shared.engine().fallback(), Some(Fallback::Postgres));
    assert_eq!(shared.store().kind_name(), "sqlite");
    let memory = ServerConfig::resolve(flags(&[]), RawConfig::default(), None).unwrap();
    assert!(memory.with_fallback_on_a_shared_store().is_none());
    let err = bad(flags(&[("fallback", "mysql")]));
    assert!(err.to_string().contains("--fallback"), "{err}");
    let ok = ServerConfig::resolve(
        flags(&[
            ("engine", "redis"),
            ("redis_url", "redis://127.0.0.1:6379"),
            ("database_url", "postgres://localhost/x"),
            ("fallback", "postgres"),
        ]),
        RawConfig::default(),
        None,
    )
    .unwrap();
    assert_eq!(
        ok.engine(),
        &Engine::Redis {
            url: "redis://127.0.0.1:6379".into(),
            prefix: RedisKeyPrefix::default(),
            scripts: stockade_engine::ScriptsMode::Auto,
            fallback: Some(Fallback::Postgres),
        }
    );
    assert!(ok.engine().fallback().is_some());
    let eval = ServerConfig::resolve(
        flags(&[
            ("engine", "redis"),
            ("redis_url", "redis://127.0.0.1:6379"),
            ("redis_scripts", "eval"),
        ]),
        RawConfig::default(),
        None,
    )
    .unwrap();
    assert!(
        matches!(
            eval.engine(),
            Engine::Redis {
                scripts: stockade_engine::ScriptsMode::Eval,
                ..
            }
        ),
        "{:?}",
        eval.engine()
    );
    let err = bad(flags(&[("redis_scripts", "lua")]));
    assert!(err.to_string().contains("--redis-scripts"), "{err}");
    assert!(err.to_string().contains("auto, eval or functions"), "{err}");
    let err = bad(flags(&[("database_url", "mysql://x")]));
    assert!(err.to_string().contains("--database-url"), "{err}");
    let err = bad(flags(&[("admin_token", "short")]));
    assert!(err.to_string().contains("STOCKADE_ADMIN_TOKEN"), "{err}");
    let err =
        RawConfig::from_env(|n| (n == "STOCKADE_BATCH_MAX").then(|| "lots".into())).unwrap_err();
    assert!(err.to_string().contains("STOCKADE_BATCH_MAX"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "lisen = \"typo\"").unwrap();
    let err =
        ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file)).unwrap_err();
    assert!(err.to_string().contains("lisen"), "{err}");
}
