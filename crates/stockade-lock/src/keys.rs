//! The Redis names a lock uses: its key, its fencing counter, its queue of
//! waiters, its channel, and the prefix of the clients' grant channels.

use crate::LockError;

/// The names one lock uses in Redis. The key, the counter and the queue share
/// a hash tag (`{name}`), so every script touches one Redis Cluster slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock's name, as the caller gave it.
    pub name: String,
    /// `prefix:{name}`: holds the owner token, with the lease as its expiry.
    pub lock: String,
    /// `prefix:{name}:fence`: the fencing counter, never expires.
    pub fence: String,
    /// `prefix:{name}:queue`: the waiters, in arrival order (a list of
    /// `deadline_us:lease_ms:client:token` entries, see `lua/queue.lua`).
    pub queue: String,
    /// `prefix:{name}:released`: where releases are announced (Redlock).
    pub channel: String,
    /// `prefix:grants:`: the prefix of the clients' grant channels; a grant
    /// goes to `prefix:grants:<client id>`, heard by the waiter's client only.
    pub grants: String,
}

impl LockKeys {
    /// Builds the names for `name`, which must be non-empty and free of `{`
    /// and `}` (they would break the hash tag).
    pub fn new(prefix: &str, name: &str) -> Result<Self, LockError> {
        let invalid = |reason| LockError::InvalidName {
            name: name.to_owned(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.contains(['{', '}']) {
            return Err(invalid(
                "it contains `{` or `}`, which would break the hash tag",
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            lock: format!("{prefix}:{{{name}}}"),
            fence: format!("{prefix}:{{{name}}}:fence"),
            queue: format!("{prefix}:{{{name}}}:queue"),
            channel: format!("{prefix}:{{{name}}}:released"),
            grants: grants_prefix(prefix),
        })
    }
}

/// `prefix:grants:`, the prefix of the clients' grant channels.
pub(crate) fn grants_prefix(prefix: &str) -> String {
    format!("{prefix}:grants:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_counter_and_queue_share_a_hash_tag() {
        let keys = LockKeys::new("stockade-lock", "orders").unwrap();
        assert_eq!(keys.lock, "stockade-lock:{orders}");
        assert_eq!(keys.fence, "stockade-lock:{orders}:fence");
        assert_eq!(keys.queue, "stockade-lock:{orders}:queue");
        assert_eq!(keys.channel, "stockade-lock:{orders}:released");
        assert_eq!(keys.grants, "stockade-lock:grants:");
    }

    #[test]
    fn names_that_would_break_the_hash_tag_are_refused() {
        assert!(LockKeys::new("p", "").is_err());
        assert!(LockKeys::new("p", "a{b").is_err());
        assert!(LockKeys::new("p", "a}b").is_err());
    }
}
