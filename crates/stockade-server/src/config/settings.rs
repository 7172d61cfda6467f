//! The one table of `stockade serve`'s settings: for each, its config-file
//! key, its flag, its environment variable and its default. `serve --help`
//! and the config-file key list are generated from it, and error messages
//! name a setting by where its value came from ([`Sources`]), so the three
//! spellings cannot drift apart (a test checks every flag and every
//! [`RawConfig`] field has a row).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::RawConfig;

/// One setting and its three spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The key in the TOML file, also the [`RawConfig`] field.
    pub key: &'static str,
    /// The command-line flag, if there is one (the admin token has none: it
    /// would show in `ps`).
    pub flag: Option<&'static str>,
    /// The environment variable.
    pub env: &'static str,
    /// The default, as a user would write it.
    pub default: &'static str,
}

const fn setting(
    key: &'static str,
    flag: Option<&'static str>,
    env: &'static str,
    default: &'static str,
) -> Setting {
    Setting {
        key,
        flag,
        env,
        default,
    }
}

/// Every setting of `stockade serve`, in `--help` order. Add a row here
/// with every new [`RawConfig`] field.
pub const SETTINGS: &[Setting] = &[
    setting(
        "listen",
        Some("--listen"),
        "STOCKADE_LISTEN",
        "127.0.0.1:8080",
    ),
    setting(
        "data_dir",
        Some("--data-dir"),
        "STOCKADE_DATA_DIR",
        "./stockade-data",
    ),
    setting("engine", Some("--engine"), "STOCKADE_ENGINE", "memory"),
    setting("fallback", Some("--fallback"), "STOCKADE_FALLBACK", "none"),
    setting(
        "redis_url",
        Some("--redis-url"),
        "STOCKADE_REDIS_URL",
        "none",
    ),
    setting(
        "redis_key_prefix",
        Some("--redis-key-prefix"),
        "STOCKADE_REDIS_KEY_PREFIX",
        "stockade",
    ),
    setting(
        "database_url",
        Some("--database-url"),
        "STOCKADE_DATABASE_URL",
        "SQLite in the data directory",
    ),
    setting(
        "admin_token",
        None,
        "STOCKADE_ADMIN_TOKEN",
        "generated and printed at start",
    ),
    setting(
        "payments_token",
        Some("--payments-token"),
        "STOCKADE_PAYMENTS_TOKEN",
        "none: only the admin confirms orders",
    ),
    setting(
        "payments_token_file",
        Some("--payments-token-file"),
        "STOCKADE_PAYMENTS_TOKEN_FILE",
        "none",
    ),
    setting(
        "commit_deadline_ms",
        Some("--commit-deadline-ms"),
        "STOCKADE_COMMIT_DEADLINE_MS",
        "2000",
    ),
    setting(
        "batch_max",
        Some("--batch-max"),
        "STOCKADE_BATCH_MAX",
        "512",
    ),
    setting(
        "batch_delay_ms",
        Some("--batch-delay-ms"),
        "STOCKADE_BATCH_DELAY_MS",
        "2",
    ),
    setting(
        "outbox_grace_ms",
        Some("--outbox-grace-ms"),
        "STOCKADE_OUTBOX_GRACE_MS",
        "10000",
    ),
    setting(
        "rejection_ttl_ms",
        Some("--rejection-ttl-ms"),
        "STOCKADE_REJECTION_TTL_MS",
        "500",
    ),
    setting(
        "max_purchases_in_flight",
        Some("--max-purchases-in-flight"),
        "STOCKADE_MAX_PURCHASES_IN_FLIGHT",
        "4096",
    ),
    setting(
        "startup_wait_ms",
        Some("--startup-wait-ms"),
        "STOCKADE_STARTUP_WAIT_MS",
        "10000",
    ),
    setting(
        "header_read_timeout_ms",
        Some("--header-read-timeout-ms"),
        "STOCKADE_HEADER_READ_TIMEOUT_MS",
        "5000",
    ),
    setting(
        "idle_timeout_ms",
        Some("--idle-timeout-ms"),
        "STOCKADE_IDLE_TIMEOUT_MS",
        "75000",
    ),
    setting(
        "max_connections",
        Some("--max-connections"),
        "STOCKADE_MAX_CONNECTIONS",
        "the open-file limit less 128, at most 10000",
    ),
    setting(
        "max_connections_per_client",
        Some("--max-connections-per-client"),
        "STOCKADE_MAX_CONNECTIONS_PER_CLIENT",
        "256",
    ),
    setting(
        "shutdown_timeout_ms",
        Some("--shutdown-timeout-ms"),
        "STOCKADE_SHUTDOWN_TIMEOUT_MS",
        "10000",
    ),
    setting(
        "log_format",
        Some("--log-format"),
        "STOCKADE_LOG_FORMAT",
        "text",
    ),
    setting(
        "dashboard_session_ttl_s",
        Some("--dashboard-session-ttl-s"),
        "STOCKADE_DASHBOARD_SESSION_TTL_S",
        "28800",
    ),
    setting(
        "public_url",
        Some("--public-url"),
        "STOCKADE_PUBLIC_URL",
        "none: the session cookie is not Secure",
    ),
    setting(
        "metrics_retention_s",
        Some("--metrics-retention-s"),
        "STOCKADE_METRICS_RETENTION_S",
        "900",
    ),
    setting(
        "ended_sale_retention_s",
        Some("--ended-sale-retention-s"),
        "STOCKADE_ENDED_SALE_RETENTION_S",
        "86400",
    ),
    setting(
        "admission_secret",
        None,
        "STOCKADE_ADMISSION_SECRET",
        "generated at start (one instance only)",
    ),
    setting(
        "jwt_secret",
        Some("--jwt-secret"),
        "STOCKADE_JWT_SECRET",
        "none: buyers are trusted as named",
    ),
    setting(
        "jwt_secret_file",
        Some("--jwt-secret-file"),
        "STOCKADE_JWT_SECRET_FILE",
        "none",
    ),
    setting(
        "jwt_public_key",
        Some("--jwt-public-key"),
        "STOCKADE_JWT_PUBLIC_KEY",
        "none",
    ),
    setting(
        "jwt_issuer",
        Some("--jwt-issuer"),
        "STOCKADE_JWT_ISSUER",
        "any",
    ),
    setting(
        "jwt_audience",
        Some("--jwt-audience"),
        "STOCKADE_JWT_AUDIENCE",
        "any",
    ),
    setting(
        "rate_limit_buyer",
        Some("--rate-limit-buyer"),
        "STOCKADE_RATE_LIMIT_BUYER",
        "none",
    ),
    setting(
        "rate_limit_buyer_burst",
        Some("--rate-limit-buyer-burst"),
        "STOCKADE_RATE_LIMIT_BUYER_BURST",
        "the rate's count",
    ),
    setting(
        "rate_limit_ip",
        Some("--rate-limit-ip"),
        "STOCKADE_RATE_LIMIT_IP",
        "none",
    ),
    setting(
        "rate_limit_ip_burst",
        Some("--rate-limit-ip-burst"),
        "STOCKADE_RATE_LIMIT_IP_BURST",
        "the rate's count",
    ),
    setting(
        "rate_limit_instances",
        Some("--rate-limit-instances"),
        "STOCKADE_RATE_LIMIT_INSTANCES",
        "1",
    ),
    setting(
        "trusted_proxies",
        Some("--trusted-proxies"),
        "STOCKADE_TRUSTED_PROXIES",
        "none",
    ),
];

/// The row of `key`.
///
/// # Panics
/// If `key` has no row: a programming error the table test catches.
pub fn setting_of(key: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.key == key)
        .unwrap_or_else(|| panic!("setting {key:?} is missing from config::settings::SETTINGS"))
}

/// The table for `stockade serve --help`: every setting's flag, variable,
/// file key and default.
pub fn help_table() -> String {
    let mut text = String::from(
        "Settings: flag, environment variable, config-file key (--config FILE) and default.\n\
         Flags win over variables, variables over the file.\n\n",
    );
    for s in SETTINGS {
        text.push_str(&format!(
            "  {:<26} {:<33} {:<24} {}\n",
            s.flag.unwrap_or("(no flag)"),
            s.env,
            s.key,
            s.default
        ));
    }
    text
}

/// The config-file keys, comma-separated.
pub fn file_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The keys a layer of settings sets.
fn present(raw: &RawConfig) -> HashSet<String> {
    match serde_json::to_value(raw) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k)
            .collect(),
        _ => HashSet::new(),
    }
}

/// Where each setting's value came from, to name it in errors the way the
/// user wrote it: `STOCKADE_COMMIT_DEADLINE_MS` for a variable,
/// `--commit-deadline-ms` for a flag, `commit_deadline_ms in FILE` for the
/// file.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    flags: HashSet<String>,
    env: HashSet<String>,
    file: Option<(PathBuf, HashSet<String>)>,
}

impl Sources {
    /// The sources of the three layers.
    pub fn new(flags: &RawConfig, env: &RawConfig, file: Option<(&Path, &RawConfig)>) -> Self {
        Self {
            flags: present(flags),
            env: present(env),
            file: file.map(|(path, raw)| (path.to_path_buf(), present(raw))),
        }
    }

    /// Whether any layer set `key`.
    pub fn is_set(&self, key: &str) -> bool {
        self.flags.contains(key)
            || self.env.contains(key)
            || self
                .file
                .as_ref()
                .is_some_and(|(_, keys)| keys.contains(key))
    }

    /// The setting `key` as its value was given.
    pub fn name(&self, key: &str) -> String {
        let row = setting_of(key);
        if self.flags.contains(key) {
            return row.flag.unwrap_or(row.env).to_owned();
        }
        if self.env.contains(key) {
            return row.env.to_owned();
        }
        if let Some((path, keys)) = &self.file
            && keys.contains(key)
        {
            return format!("{key} in {}", path.display());
        }
        let mut names: Vec<&str> = row.flag.into_iter().collect();
        names.extend([row.env, row.key]);
        format!("{} (default {})", names.join(" / "), row.default)
    }
}
