//! Grant messages (`token fence server_us`): parsing them, and routing each
//! to the one queued waiter of this client that expects it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::Subscriptions;

/// Queued waiters of this client by owner token, each waiting for its grant.
pub(super) type Grants = Arc<Mutex<HashMap<String, oneshot::Sender<Grant>>>>;

/// A grant message: the lock is the waiter's now, with this fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub fence: u64,
    /// The server's clock when it granted the lock, µs.
    pub server_us: u64,
}

impl Grant {
    /// Parses `token fence server_us`; None for anything else.
    pub(super) fn parse(payload: &str) -> Option<(&str, Self)> {
        let mut fields = payload.split(' ');
        let token = fields.next()?;
        let fence = fields.next()?.parse().ok()?;
        let server_us = fields.next()?.parse().ok()?;
        if fields.next().is_some() {
            return None;
        }
        Some((token, Self { fence, server_us }))
    }
}

/// A queued waiter's registration for its grant message. Dropping it
/// unregisters.
pub(crate) struct GrantReceiver {
    token: String,
    receiver: oneshot::Receiver<Grant>,
    grants: Grants,
}

impl GrantReceiver {
    /// Completes when the grant for this waiter's token arrives. Pending
    /// forever once it has been received (or the task is gone).
    pub async fn granted(&mut self) -> Grant {
        match (&mut self.receiver).await {
            Ok(grant) => grant,
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for GrantReceiver {
    fn drop(&mut self) {
        self.grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.token);
    }
}

impl Subscriptions {
    /// Registers a waiter about to queue with owner `token` for its grant
    /// message. Register before queuing: the grant can come at once.
    pub fn expect_grant(&self, token: &str) -> GrantReceiver {
        let (sender, receiver) = oneshot::channel();
        self.grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.to_owned(), sender);
        GrantReceiver {
            token: token.to_owned(),
            receiver,
            grants: Arc::clone(&self.grants),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_messages_parse_and_anything_else_does_not() {
        assert_eq!(
            Grant::parse("00ff 1712345678901234 1712345678901299"),
            Some((
                "00ff",
                Grant {
                    fence: 1_712_345_678_901_234,
                    server_us: 1_712_345_678_901_299
                }
            ))
        );
        for payload in ["released", "", "a b", "a 1 x", "a 1 2 3", "a -1 2"] {
            assert_eq!(Grant::parse(payload), None, "{payload:?}");
        }
    }
}
