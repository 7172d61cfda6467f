//! Open connections per client address, so one client cannot hold the
//! whole connection cap (`--max-connections-per-client`).
//!
//! A client is its address (an IPv6 client by its /64, as the rate
//! limiter counts it). Trusted proxies are not counted: every client
//! behind them shares their address. A connection over a client's cap is
//! not closed unread: it is put on *probation*, where a request carrying
//! the admin token is served (the operator is never locked out by a
//! client that shares an address) and any other request is answered 503
//! `too_many_connections` and the connection closed. At most
//! [`PROBATION_PER_CLIENT`] such connections of a client are open at once;
//! beyond that they are refused as soon as they are accepted, and every
//! one of them still counts against `--max-connections` and is timed out
//! like any other.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use parking_lot::Mutex;

use crate::rate_limit::TrustedProxies;
use crate::rate_limit::client_ip::limit_key;
use crate::secrets::{bearer, secrets_match};

/// The default of `--max-connections-per-client`.
pub const DEFAULT_PER_CLIENT: usize = 256;

/// Connections over its cap a client may hold open at once, waiting to
/// show the admin token.
pub const PROBATION_PER_CLIENT: usize = 4;

/// The answer to a request on a connection over its client's cap.
pub const OVER_CAP_BODY: &str = "{\"error\":{\"code\":\"too_many_connections\",\"message\":\"this client has too many open connections (--max-connections-per-client); reuse a keep-alive connection, close some, or retry shortly\"}}";

/// What a new connection is.
#[derive(Debug)]
pub enum Admission {
    /// Within its client's cap (or of a trusted proxy): served.
    Counted(Slot),
    /// Over the cap: only admin requests are served.
    Probation(Slot),
    /// Over the cap with every probation place taken: refuse at once.
    Refused,
}

/// The connections of each client. See the [module](self) docs.
#[derive(Debug)]
pub struct ClientCap {
    most: usize,
    trusted: TrustedProxies,
    admin_token: String,
    open: Mutex<HashMap<String, Counts>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    counted: usize,
    probation: usize,
}

impl ClientCap {
    /// At most `most` connections per client; `trusted` proxies are not
    /// capped; requests with `admin_token` are served over the cap.
    pub fn new(most: usize, trusted: TrustedProxies, admin_token: String) -> Arc<Self> {
        Arc::new(Self {
            most,
            trusted,
            admin_token,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A connection from `peer` was accepted.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        if self.trusted.contains(peer) {
            return Admission::Counted(Slot {
                cap: None,
                key: String::new(),
                probation: false,
            });
        }
        let key = limit_key(peer);
        let mut open = self.open.lock();
        let counts = open.entry(key.clone()).or_default();
        let probation = if counts.counted < self.most {
            counts.counted += 1;
            false
        } else if counts.probation < PROBATION_PER_CLIENT {
            counts.probation += 1;
            true
        } else {
            return Admission::Refused;
        };
        let slot = Slot {
            cap: Some(Arc::clone(self)),
            key,
            probation,
        };
        if probation {
            Admission::Probation(slot)
        } else {
            Admission::Counted(slot)
        }
    }

    /// Whether a request on a probation connection may be served.
    pub fn is_admin(&self, headers: &HeaderMap) -> bool {
        bearer(headers)
            .is_some_and(|token| secrets_match(token.as_bytes(), self.admin_token.as_bytes()))
    }

    /// The most connections of one client.
    pub fn most(&self) -> usize {
        self.most
    }

    fn release(&self, key: &str, probation: bool) {
        let mut open = self.open.lock();
        if let Some(counts) = open.get_mut(key) {
            if probation {
                counts.probation = counts.probation.saturating_sub(1);
            } else {
                counts.counted = counts.counted.saturating_sub(1);
            }
            if counts.counted == 0 && counts.probation == 0 {
                open.remove(key);
            }
        }
    }
}

/// A connection's place in its client's count, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    cap: Option<Arc<ClientCap>>,
    key: String,
    probation: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(cap) = &self.cap {
            cap.release(&self.key, self.probation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_client_over_its_cap_is_on_probation_then_refused_and_others_are_not_held_back() {
        let cap = ClientCap::new(2, TrustedProxies::parse("10.0.0.1").unwrap(), "t".into());
        let a1 = cap.admit(ip("192.0.2.1"));
        let a2 = cap.admit(ip("192.0.2.1"));
        assert!(matches!(a1, Admission::Counted(_)) && matches!(a2, Admission::Counted(_)));
        let over: Vec<Admission> = (0..PROBATION_PER_CLIENT)
            .map(|_| cap.admit(ip("192.0.2.1")))
            .collect();
        assert!(over.iter().all(|a| matches!(a, Admission::Probation(_))));
        assert!(matches!(cap.admit(ip("192.0.2.1")), Admission::Refused));
        assert!(matches!(cap.admit(ip("192.0.2.2")), Admission::Counted(_)));
        // One IPv6 client is its /64.
        let _v6 = cap.admit(ip("2001:db8::1"));
        let _v6b = cap.admit(ip("2001:db8::2"));
        assert!(matches!(
            cap.admit(ip("2001:db8::3")),
            Admission::Probation(_)
        ));
        // A trusted proxy is never capped.
        let proxied: Vec<Admission> = (0..10).map(|_| cap.admit(ip("10.0.0.1"))).collect();
        assert!(proxied.iter().all(|a| matches!(a, Admission::Counted(_))));
        // Closing one makes room.
        drop(a1);
        assert!(matches!(cap.admit(ip("192.0.2.1")), Admission::Counted(_)));
    }
}
