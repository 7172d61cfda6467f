//! Dashboard logins: random session ids kept server-side with an expiry.
//!
//! The admin token is typed into a login form once; the browser then holds
//! only a session id (256 random bits, in an HttpOnly, SameSite=Strict
//! cookie), never the token. Sessions end at their expiry or on logout, and
//! a restart ends them all. Time comes from the service's [`Clock`](stockade_core::Clock), so
//! expiry is tested without sleeping.
//!
//! Sessions are kept under the SHA-256 digest of their id, never the id:
//! a lookup's timing can reveal at most a prefix of a digest, which says
//! nothing about any id (the map-lookup form of a constant-time compare),
//! and a memory dump holds no usable session.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use dashmap::DashMap;
use sha2::{Digest, Sha256};

/// The most sessions kept at once; the oldest goes when a login needs room.
pub const MAX_SESSIONS: usize = 1_000;

/// The live sessions of this instance.
#[derive(Debug)]
pub struct Sessions {
    ttl: Duration,
    /// Expiry by the SHA-256 digest of the session id.
    live: DashMap<[u8; 32], DateTime<Utc>>,
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// An empty store whose sessions last `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            live: DashMap::new(),
        }
    }

    /// How long a session lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Starts a session at `now`; returns its id.
    pub fn open(&self, now: DateTime<Utc>) -> String {
        self.live.retain(|_, expires| *expires > now);
        while self.live.len() >= MAX_SESSIONS {
            let oldest = self
                .live
                .iter()
                .min_by_key(|entry| *entry.value())
                .map(|entry| *entry.key());
            match oldest {
                Some(id) => self.live.remove(&id),
                None => break,
            };
        }
        let id = new_id();
        let expires = now + TimeDelta::from_std(self.ttl).unwrap_or(TimeDelta::hours(8));
        self.live.insert(digest(&id), expires);
        id
    }

    /// Whether `id` names a session that has not expired at `now`; an
    /// expired one is forgotten.
    pub fn is_valid(&self, id: &str, now: DateTime<Utc>) -> bool {
        let key = digest(id);
        match self.live.get(&key).map(|e| *e) {
            Some(expires) if expires > now => true,
            Some(_) => {
                self.live.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Ends a session (logout).
    pub fn close(&self, id: &str) {
        self.live.remove(&digest(id));
    }

    /// How many sessions are kept.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

/// 32 random bytes from the operating system's generator, hex-encoded.
fn new_id() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lasts_its_ttl_and_ends_on_logout() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let t0 = Utc::now();
        let id = sessions.open(t0);
        assert_eq!(id.len(), 64);
        assert!(sessions.is_valid(&id, t0 + TimeDelta::seconds(59)));
        assert!(!sessions.is_valid(&id, t0 + TimeDelta::seconds(60)));
        assert!(sessions.is_empty(), "an expired session is forgotten");
        let id = sessions.open(t0);
        assert_ne!(sessions.open(t0), id, "ids are random");
        sessions.close(&id);
        assert!(!sessions.is_valid(&id, t0));
        assert!(!sessions.is_valid("guess", t0));
    }

    #[test]
    fn the_store_is_bounded_and_the_oldest_goes_first() {
        let sessions = Sessions::new(Duration::from_secs(3600));
        let t0 = Utc::now();
        let first = sessions.open(t0);
        for i in 1..=MAX_SESSIONS {
            sessions.open(t0 + TimeDelta::milliseconds(i as i64));
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(!sessions.is_valid(&first, t0));
    }
}
