//! The Redis of `--engine redis`: its URL, the first part of every key, and
//! how Stockade's scripts run there.

use stockade_engine::ScriptsMode;

use super::access::secret_or_file;
use super::group::settings_group;
use super::{ConfigError, Sources, invalid};

settings_group! {
    /// Redis.
    #[command(next_help_heading = "Redis")]
    pub struct RedisSettings {
        /// The Redis of --engine redis: redis://host:6379 (rediss:// for
        /// TLS), redis+sentinel://host:26379,host2:26379/mymaster (the
        /// primary Sentinel names, followed across failovers) or
        /// redis+cluster://host:6379,host2:6379 (a Redis Cluster). Shown
        /// only as host:port in messages.
        #[arg(long, env = "STOCKADE_REDIS_URL", value_name = "URL")]
        pub redis_url: Option<String> as url,
        /// A file holding the Redis URL (instead of --redis-url): its
        /// password stays out of `ps` and the environment.
        #[arg(long, env = "STOCKADE_REDIS_URL_FILE", value_name = "FILE")]
        pub redis_url_file: Option<std::path::PathBuf>,
        /// The first part of every Redis key (the engine's P:{sale}:...,
        /// the waiting rooms' P:wr:..., the rate limits' P:limit:..., the
        /// locks' P-lock...): give each deployment sharing a Redis or
        /// Cluster its own. 1 to 64 letters, digits, '_', '.' or '-'.
        #[arg(long, env = "STOCKADE_REDIS_KEY_PREFIX", value_name = "P", default_value = RedisKeyPrefix::DEFAULT)]
        pub redis_key_prefix: Option<String>,
        /// How Stockade's Lua scripts run on Redis: auto (as Redis
        /// Functions, one versioned library per component loaded with
        /// FUNCTION LOAD and called with FCALL, on Redis 7 and later;
        /// EVALSHA on Redis 6), functions (refuse to start on a Redis
        /// without them) or eval (EVALSHA always).
        #[arg(long, env = "STOCKADE_REDIS_SCRIPTS", value_name = "MODE", default_value = "auto")]
        pub redis_scripts: Option<String>,
    }
}

impl RedisSettings {
    /// The Redis URL, if one is given (an empty one is none), checked for
    /// its topology.
    pub(super) fn resolve_url(&self, sources: &Sources) -> Result<Option<String>, ConfigError> {
        let given = secret_or_file(
            self.redis_url.as_deref(),
            self.redis_url_file.as_deref(),
            "redis_url",
            "redis_url_file",
            sources,
        )?;
        if let Some((url, key)) = &given
            && let Err(error) = stockade_engine::RedisTopology::from_url(url)
        {
            return Err(invalid(&sources.name(key), error.to_string()));
        }
        Ok(given.map(|(url, _)| url))
    }

    /// `redis_scripts`: auto, eval or functions; checked even when the
    /// engine is not Redis.
    pub(super) fn resolve_scripts(&self, sources: &Sources) -> Result<ScriptsMode, ConfigError> {
        self.redis_scripts
            .as_deref()
            .filter(|text| !text.trim().is_empty())
            .map_or(Ok(ScriptsMode::Auto), str::parse)
            .map_err(|reason: String| invalid(&sources.name("redis_scripts"), reason))
    }

    /// `redis_key_prefix`, checked even when the engine is not Redis.
    pub(super) fn resolve_prefix(&self, sources: &Sources) -> Result<RedisKeyPrefix, ConfigError> {
        RedisKeyPrefix::parse(self.redis_key_prefix.as_deref())
            .map_err(|reason| invalid(&sources.name("redis_key_prefix"), reason))
    }
}

/// The first part of every Redis key of a deployment, so that several
/// deployments can share one Redis or Cluster: the engine's keys are
/// `{prefix}:{sale}:...`, the waiting rooms' `{prefix}:wr:...`, the rate
/// limits' `{prefix}:limit:...`, the rebuild locks' `{prefix}-lock...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisKeyPrefix(String);

impl RedisKeyPrefix {
    /// The default, `stockade`.
    pub const DEFAULT: &'static str = "stockade";

    /// 1 to 64 characters of `A-Z a-z 0-9 _ . -` (no `:` or braces, which
    /// would change the keys' layout or their Cluster hash tags); None or
    /// empty: the default.
    pub fn parse(raw: Option<&str>) -> Result<Self, String> {
        let text = raw
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(Self::DEFAULT);
        if text.len() > 64 {
            return Err(format!(
                "must be at most 64 characters (it has {})",
                text.len()
            ));
        }
        if let Some(bad) = text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        {
            return Err(format!(
                "{text:?} contains {bad:?}; use letters, digits, '_', '.' and '-' only"
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// The prefix itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The prefix of the engine's keys: `{prefix}:`.
    pub fn engine(&self) -> String {
        format!("{}:", self.0)
    }

    /// The prefix of the waiting rooms' keys: `{prefix}:wr:`.
    pub fn waiting_rooms(&self) -> String {
        format!("{}:wr:", self.0)
    }

    /// The prefix of the rate limits' keys: `{prefix}:limit:`.
    pub fn rate_limits(&self) -> String {
        format!("{}:limit:", self.0)
    }

    /// The prefix of the rebuild locks' keys and channels: `{prefix}-lock`.
    pub fn locks(&self) -> String {
        format!("{}-lock", self.0)
    }
}

impl Default for RedisKeyPrefix {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}
