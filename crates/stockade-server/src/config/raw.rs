//! Settings as given, every one optional: one layer of flags, variables,
//! file or defaults. Every layer has the same shape, [`RawConfig`], the
//! groups of settings side by side.

use std::ffi::OsStr;
use std::path::Path;

use clap::parser::ValueSource;
use serde::Deserialize;

use super::settings::{SETTINGS, file_keys};
use super::{
    AccessSettings, ConfigError, HttpSettings, IdentitySettings, OperationsSettings,
    PurchaseSettings, RateLimitSettings, RedisSettings, StorageSettings, invalid,
};

/// Every setting of `stockade serve`, as given. `stockade serve` flattens
/// it into its flags; the TOML file's keys are its fields' names, at the
/// top level (each group is flattened there too).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Listening and connections.
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpSettings,
    /// The engine and the order store.
    #[command(flatten)]
    #[serde(flatten)]
    pub storage: StorageSettings,
    /// Redis.
    #[command(flatten)]
    #[serde(flatten)]
    pub redis: RedisSettings,
    /// Purchases and commits.
    #[command(flatten)]
    #[serde(flatten)]
    pub purchases: PurchaseSettings,
    /// Tokens and secrets.
    #[command(flatten)]
    #[serde(flatten)]
    pub access: AccessSettings,
    /// Buyers' identity.
    #[command(flatten)]
    #[serde(flatten)]
    pub identity: IdentitySettings,
    /// Rate limits.
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: RateLimitSettings,
    /// Logs, dashboard and retention.
    #[command(flatten)]
    #[serde(flatten)]
    pub operations: OperationsSettings,
}

impl RawConfig {
    /// Every file key, group by group in `--help` order.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        [
            HttpSettings::KEYS,
            StorageSettings::KEYS,
            RedisSettings::KEYS,
            PurchaseSettings::KEYS,
            AccessSettings::KEYS,
            IdentitySettings::KEYS,
            RateLimitSettings::KEYS,
            OperationsSettings::KEYS,
        ]
        .into_iter()
        .flatten()
        .copied()
    }

    /// These settings, those missing taken from `lower`.
    pub fn or(self, lower: RawConfig) -> RawConfig {
        RawConfig {
            http: self.http.or(lower.http),
            storage: self.storage.or(lower.storage),
            redis: self.redis.or(lower.redis),
            purchases: self.purchases.or(lower.purchases),
            access: self.access.or(lower.access),
            identity: self.identity.or(lower.identity),
            limits: self.limits.or(lower.limits),
            operations: self.operations.or(lower.operations),
        }
    }

    /// The keys of the settings given.
    pub fn given(&self) -> impl Iterator<Item = &'static str> {
        self.http
            .given()
            .chain(self.storage.given())
            .chain(self.redis.given())
            .chain(self.purchases.given())
            .chain(self.access.given())
            .chain(self.identity.given())
            .chain(self.limits.given())
            .chain(self.operations.given())
    }

    /// Forgets the settings whose key `keep` refuses.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.http.retain(&keep);
        self.storage.retain(&keep);
        self.redis.retain(&keep);
        self.purchases.retain(&keep);
        self.access.retain(&keep);
        self.identity.retain(&keep);
        self.limits.retain(&keep);
        self.operations.retain(&keep);
    }

    /// Sets the setting of file key `key` from its text, as a flag or a
    /// variable gives it; the error says why the text is no value.
    ///
    /// # Panics
    /// If `key` is no setting: a programming error.
    fn set(&mut self, key: &str, text: &OsStr) -> Result<(), String> {
        self.http
            .set(key, text)
            .or_else(|| self.storage.set(key, text))
            .or_else(|| self.redis.set(key, text))
            .or_else(|| self.purchases.set(key, text))
            .or_else(|| self.access.set(key, text))
            .or_else(|| self.identity.set(key, text))
            .or_else(|| self.limits.set(key, text))
            .or_else(|| self.operations.set(key, text))
            .unwrap_or_else(|| panic!("{key:?} is no setting of config::RawConfig"))
    }

    /// Reads the `STOCKADE_*` variables from `lookup` (the process
    /// environment in production); a bad value is named by its variable.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut raw = Self::default();
        for setting in SETTINGS.iter() {
            if let Some(text) = lookup(setting.env) {
                raw.set(setting.key, text.as_ref())
                    .map_err(|reason| invalid(setting.env, reason))?;
            }
        }
        Ok(raw)
    }

    /// Settings from `(file key, text)` pairs, as flags would give them:
    /// the short way to write a layer in a test.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Self, ConfigError> {
        let mut raw = Self::default();
        for (key, text) in pairs {
            if !Self::keys().any(|k| k == *key) {
                return Err(invalid(
                    key,
                    format!("is no setting; the settings are: {}", file_keys()),
                ));
            }
            raw.set(key, text.as_ref())
                .map_err(|reason| invalid(key, reason))?;
        }
        Ok(raw)
    }

    /// The defaults: each setting's `default_value`, parsed as a flag's
    /// would be. Once layered under the others, every setting that has a
    /// default is set.
    pub fn defaults() -> Self {
        let mut raw = Self::default();
        for setting in SETTINGS.iter() {
            if let Some(default) = setting.default {
                raw.set(setting.key, default.as_ref())
                    .unwrap_or_else(|reason| panic!("the default of {}: {reason}", setting.key));
            }
        }
        raw
    }

    /// Reads a TOML file with the same keys (unknown keys are errors). A
    /// bad file is named with the line of what is wrong in it.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(&format!("--config {file}"), e.to_string()))?;
        let failed = |at: Option<usize>, reason: &str| {
            let line = at.map_or(String::new(), |at| {
                format!(" (line {})", text[..at].matches('\n').count() + 1)
            });
            invalid(&format!("--config {file}{line}"), reason.trim_end())
        };
        // The keys first: serde reads the flattened groups in one piece, and
        // would not say where an unknown key is.
        let table = toml::de::DeTable::parse(&text)
            .map_err(|e| failed(e.span().map(|s| s.start), e.message()))?;
        if let Some(key) = table
            .get_ref()
            .keys()
            .find(|key| !Self::keys().any(|known| known == key.get_ref().as_ref()))
        {
            return Err(failed(
                Some(key.span().start),
                &format!(
                    "unknown field `{}`; the keys are: {}",
                    key.get_ref(),
                    file_keys()
                ),
            ));
        }
        toml::from_str(&text).map_err(|error| {
            // Its place is lost in the flattening too: each group read alone
            // says where the value it refuses is.
            let error = Self::each_group_from_str(&text).err().unwrap_or(error);
            failed(error.span().map(|s| s.start), error.message())
        })
    }

    /// Reads each group from the whole file, for its errors' places.
    fn each_group_from_str(text: &str) -> Result<(), toml::de::Error> {
        toml::from_str::<HttpSettings>(text)?;
        toml::from_str::<StorageSettings>(text)?;
        toml::from_str::<RedisSettings>(text)?;
        toml::from_str::<PurchaseSettings>(text)?;
        toml::from_str::<AccessSettings>(text)?;
        toml::from_str::<IdentitySettings>(text)?;
        toml::from_str::<RateLimitSettings>(text)?;
        toml::from_str::<OperationsSettings>(text)?;
        Ok(())
    }
}

/// The settings of a command line, its flags and its variables apart (so
/// that errors name each the way it was given): what `stockade serve`
/// flattens. clap reads both; a setting's value source says which it was.
#[derive(Debug, Clone, Default)]
pub struct CommandLineSettings {
    /// The settings given as flags.
    pub flags: RawConfig,
    /// The settings given as `STOCKADE_*` variables.
    pub env: RawConfig,
}

impl clap::FromArgMatches for CommandLineSettings {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let all = RawConfig::from_arg_matches(matches)?;
        let from = |source: ValueSource| {
            let mut layer = all.clone();
            layer.retain(|key| matches.value_source(key) == Some(source));
            layer
        };
        Ok(Self {
            flags: from(ValueSource::CommandLine),
            env: from(ValueSource::EnvVariable),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for CommandLineSettings {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        RawConfig::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        RawConfig::augment_args_for_update(cmd)
    }
}
