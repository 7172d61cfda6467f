//! Dashboard logins: a signed, expiring cookie every instance can check.
//!
//! The admin token is typed into a login form once; the browser then holds
//! only `EXPIRY.SIGNATURE` (in an HttpOnly, SameSite=Strict cookie): the
//! expiry in milliseconds since the Unix epoch and an HMAC-SHA256 over it
//! with a key derived from the admin token, never the token itself. Any
//! instance given the same admin token checks it without asking another,
//! so a dashboard behind a load balancer stays signed in whichever
//! instance answers, and a restart keeps it signed in.
//!
//! What ends a session: its expiry; logout, which clears the cookie in
//! that browser (a copy taken before stays good until its expiry, as
//! nothing is kept server-side to revoke); and a new admin token, which
//! changes the key and so ends every session at once (the way to revoke).
//! Time comes from the service's [`Clock`](stockade_core::Clock), so
//! expiry is tested without sleeping.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// What the signing key is derived for: a key of its own, not the admin
/// token itself, so a signature never serves as anything else.
const PURPOSE: &[u8] = b"stockade dashboard session v1";

/// Issues and checks the dashboard's session cookies.
pub struct Sessions {
    ttl: Duration,
    key: HmacSha256,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions that last `ttl`, signed with a key derived from
    /// `admin_token` (every instance of a deployment shares it).
    pub fn new(admin_token: &str, ttl: Duration) -> Self {
        let mut derive = HmacSha256::new_from_slice(admin_token.as_bytes())
            .expect("HMAC takes keys of any length");
        derive.update(PURPOSE);
        let key = derive.finalize().into_bytes();
        Self {
            ttl,
            key: HmacSha256::new_from_slice(&key).expect("HMAC takes keys of any length"),
        }
    }

    /// How long a session lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn sign(&self, expiry_ms: i64) -> HmacSha256 {
        let mut mac = self.key.clone();
        mac.update(expiry_ms.to_string().as_bytes());
        mac
    }

    /// Starts a session at `now`; returns the cookie's value.
    pub fn open(&self, now: DateTime<Utc>) -> String {
        let ttl = TimeDelta::from_std(self.ttl).unwrap_or(TimeDelta::hours(8));
        let expiry = (now + ttl).timestamp_millis();
        let signature = hex::encode(self.sign(expiry).finalize().into_bytes());
        format!("{expiry}.{signature}")
    }

    /// Whether `cookie` is a session this deployment signed that has not
    /// expired at `now` (the signature is compared in constant time).
    pub fn is_valid(&self, cookie: &str, now: DateTime<Utc>) -> bool {
        let Some((expiry, signature)) = cookie.split_once('.') else {
            return false;
        };
        let (Ok(expiry_ms), Ok(signature)) = (expiry.parse::<i64>(), hex::decode(signature)) else {
            return false;
        };
        // The canonical form only: the signature covers these digits.
        if expiry_ms.to_string() != expiry || expiry_ms <= now.timestamp_millis() {
            return false;
        }
        self.sign(expiry_ms).verify_slice(&signature).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lasts_its_ttl_and_only_its_signer_accepts_it() {
        let sessions = Sessions::new("admin-token", Duration::from_secs(60));
        let t0 = Utc::now();
        let cookie = sessions.open(t0);
        assert!(sessions.is_valid(&cookie, t0 + TimeDelta::seconds(59)));
        assert!(!sessions.is_valid(&cookie, t0 + TimeDelta::seconds(60)));
        // Another instance with the same token accepts it; a new token
        // ends it.
        let same = Sessions::new("admin-token", Duration::from_secs(60));
        assert!(same.is_valid(&cookie, t0));
        let rotated = Sessions::new("new-admin-token", Duration::from_secs(60));
        assert!(!rotated.is_valid(&cookie, t0));
        // Tampered or malformed cookies are refused.
        let (expiry, signature) = cookie.split_once('.').unwrap();
        let later = expiry.parse::<i64>().unwrap() + 60_000;
        assert!(!sessions.is_valid(&format!("{later}.{signature}"), t0));
        assert!(!sessions.is_valid(&format!("0{expiry}.{signature}"), t0));
        assert!(!sessions.is_valid(&format!("{expiry}.{}", &signature[2..]), t0));
        assert!(!sessions.is_valid(&format!("{expiry}.zz"), t0));
        assert!(!sessions.is_valid("guess", t0));
        assert!(!sessions.is_valid("", t0));
    }

    #[test]
    fn the_admin_token_is_not_in_the_cookie_or_debug_output() {
        let sessions = Sessions::new("admin-token", Duration::from_secs(60));
        assert!(!sessions.open(Utc::now()).contains("admin-token"));
        assert!(!format!("{sessions:?}").contains("admin-token"));
    }
}
