//! The settings of `stockade serve`: given as flags, `STOCKADE_*`
//! variables and an optional TOML file, resolved (in that order of
//! precedence, then defaults) into a validated [`ServerConfig`]. Invalid
//! settings fail at start with a message naming the setting the way the
//! user gave it (flag, variable or file key; see [`Sources`]).
//!
//! Each setting is declared once, as a field of one group struct
//! ([`settings_group!`](group)): its name is its file key, its doc comment
//! its `--help` text, its `#[arg]` its flag, variable and default. clap
//! reads flags and variables from those declarations, serde reads the
//! file, and [`settings::SETTINGS`] (the `--help` summary, the README's
//! table, error names) is read from clap's view of them.
//!
//! # Adding a setting
//! 1. A field in the group it belongs to (`http`, `storage`, `redis`,
//!    `purchases`, `access`, `identity`, `limits`, `operations`):
//!    `Option<T>`, a doc comment saying what it does and its bounds,
//!    `#[arg(long, env = "STOCKADE_...", value_name = "...")]` and a
//!    `default_value` if it has one. A secret that must never be a flag
//!    (it would show in `ps`) is `hide = true`.
//! 2. Its check in that group's `resolve`, naming it with
//!    `sources.name("key")`, and its value in [`ServerConfig`] (a field
//!    and an accessor) if the service reads it; a value it refuses in the
//!    tests' `REFUSED` (every setting must be named as it was given).
//! 3. `UPDATE_README=1 cargo nextest run -p stockade-server --lib readme`
//!    regenerates the README's table; a test fails until it matches.
//!
//! A new group is a file with its `settings_group!`, flattened into
//! [`RawConfig`] (and listed in its methods, which go group by group).
//!
//! # Layout
//! - [`group`]: the `settings_group!` declaration; [`values`]: how a
//!   flag's or variable's text becomes a value.
//! - The groups, each with its checks: [`http`], [`storage`], [`redis`],
//!   [`purchases`], [`access`], [`identity`], [`limits`], [`operations`].
//! - [`raw`]: [`RawConfig`], one layer of settings, from the environment,
//!   a file, pairs or a command line ([`CommandLineSettings`]).
//! - [`settings`]: the table of settings; [`sources`]: naming a setting as
//!   it was given.
//! - [`resolve`]: layers into a [`ServerConfig`] ([`server_config`]).

pub mod access;
pub mod group;
pub mod http;
pub mod identity;
pub mod limits;
pub mod operations;
pub mod purchases;
pub mod raw;
pub mod redis;
pub mod resolve;
pub mod server_config;
pub mod settings;
pub mod sources;
pub mod storage;
pub mod values;

pub use access::{AccessSettings, AdminToken, AdmissionSecret, PaymentsToken};
pub use http::{HttpSettings, PublicUrl};
pub use identity::IdentitySettings;
pub use limits::RateLimitSettings;
pub use operations::{LogFormat, OperationsSettings};
pub use purchases::PurchaseSettings;
pub use raw::{CommandLineSettings, RawConfig};
pub use redis::{RedisKeyPrefix, RedisSettings};
pub use server_config::ServerConfig;
pub use sources::Sources;
pub use storage::{Engine, Fallback, StorageSettings, StoreLocation};

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct ConfigError {
    /// The flag / variable / key.
    pub setting: String,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(setting: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting: setting.to_owned(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests;
