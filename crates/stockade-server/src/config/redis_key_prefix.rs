//! The first part of every Redis key (`--redis-key-prefix`).

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
