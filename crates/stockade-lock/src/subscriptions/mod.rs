//! Grant and release notifications: one pub/sub connection per node per
//! [`Locks`] client, shared by every waiter of every lock.
//!
//! Waiters register an [`Interest`] in a lock's channel. The first interest in
//! a channel subscribes to it, the last one to leave unsubscribes. A single
//! task per node owns the pub/sub connection: it runs SUBSCRIBE and
//! UNSUBSCRIBE in the order they were asked for, and routes each message:
//!
//! - a grant (`token fence server_us`, published by the script that handed
//!   the lock to a queued waiter) goes to the one waiter of this client that
//!   queued with that owner token, if any ([`Subscriptions::expect_grant`]);
//!   every other client on the channel finds no such waiter and wakes nobody;
//! - `released` (Redlock, whose waiters do not queue) wakes one waiter of
//!   this client through the channel's [`Notify`] (the others would only find
//!   the lock taken again).
//!
//! It reconnects with backoff when the connection drops, resubscribes, and
//! then wakes every waiter, since messages sent while it was away are lost.
//! Waiters never depend on a message alone: they also check again after a
//! bounded time (see [`crate::Locks`]).
//!
//! [`Locks`]: crate::Locks

mod grants;
mod task;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, mpsc, oneshot};

pub(crate) use grants::GrantReceiver;
use grants::Grants;

/// The subscription manager of one node.
#[derive(Clone)]
pub(crate) struct Subscriptions {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    grants: Grants,
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

struct Channel {
    notify: Arc<Notify>,
    waiters: usize,
    subscribed: bool,
}

enum Command {
    Subscribe {
        channel: String,
        done: oneshot::Sender<bool>,
    },
    Unsubscribe(String),
}

/// A waiter's registration on one channel. Dropping it gives the
/// registration back; the last one out unsubscribes.
pub(crate) struct Interest {
    channel: String,
    notify: Arc<Notify>,
    owner: Subscriptions,
}

impl Interest {
    /// A future that completes on the next release message (or reconnection)
    /// for this channel. Enable it before trying to acquire, so that a message
    /// arriving during the attempt is not missed.
    pub fn notified(&self) -> tokio::sync::futures::OwnedNotified {
        Arc::clone(&self.notify).notified_owned()
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        let last = {
            let mut channels = self
                .owner
                .channels
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match channels.get_mut(&self.channel) {
                Some(channel) => {
                    channel.waiters -= 1;
                    channel.waiters == 0
                }
                None => false,
            }
        };
        if last {
            let _ = self
                .owner
                .commands
                .send(Command::Unsubscribe(self.channel.clone()));
        }
    }
}

impl Subscriptions {
    /// Registers interest in `channel` only if it is subscribed already
    /// (other waiters of this client): no Redis command, no waiting.
    pub fn join_active(&self, channel: &str) -> Option<Interest> {
        let notify = {
            let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            let entry = channels.get_mut(channel)?;
            if !entry.subscribed || entry.waiters == 0 {
                return None;
            }
            entry.waiters += 1;
            Arc::clone(&entry.notify)
        };
        Some(Interest {
            channel: channel.to_owned(),
            notify,
            owner: self.clone(),
        })
    }

    /// Whether waiters of this client have registered on `channel` (subscribed
    /// already, or subscribing right now).
    pub fn has_waiters(&self, channel: &str) -> bool {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels.get(channel).is_some_and(|entry| entry.waiters > 0)
    }

    /// Registers interest in `channel`, subscribing if this is the first, and
    /// returns once the subscription is confirmed (or found impossible right
    /// now).
    pub async fn interest(&self, channel: &str) -> Interest {
        let interest = self.register(channel);
        interest.subscribe().await;
        interest
    }

    /// Registers interest in `channel` without subscribing yet: other
    /// waiters of this client see it ([`Self::has_waiters`]) at once. Call
    /// [`Interest::subscribe`] before relying on messages.
    pub fn register(&self, channel: &str) -> Interest {
        let notify = {
            let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    notify: Arc::new(Notify::new()),
                    waiters: 0,
                    subscribed: false,
                });
            entry.waiters += 1;
            Arc::clone(&entry.notify)
        };
        Interest {
            channel: channel.to_owned(),
            notify,
            owner: self.clone(),
        }
    }
}

impl Interest {
    /// Subscribes to the channel if it is not yet, and returns once that is
    /// confirmed (or found impossible right now). No Redis command if it is
    /// subscribed already.
    pub async fn subscribe(&self) {
        let (done, confirmed) = oneshot::channel();
        let command = Command::Subscribe {
            channel: self.channel.clone(),
            done,
        };
        // Whether it worked or not (the pub/sub connection may be down: the
        // waiter then relies on its fallback retry), go on once it is decided.
        if self.owner.commands.send(command).is_ok() {
            let _ = confirmed.await;
        }
    }
}
