//! Grant and release notifications: one pub/sub connection per node per
//! [`Locks`] client, shared by every waiter of every lock.
//!
//! Each client has a grant channel of its own, `prefix:grants:<client id>`:
//! the release script publishes a grant (`token fence server_us`) on the
//! channel of the client whose waiter it hands the lock to, so a hand-off
//! wakes that client alone, not every client with waiters queued. Redlock
//! waiters, who do not queue, hear `released` on the lock's channel instead.
//!
//! Waiters register an [`Interest`] in a channel (queued waiters: their
//! client's grant channel; Redlock waiters: the lock's). The first interest in
//! a channel subscribes to it, the last one to leave unsubscribes. A single
//! task per node owns the connection (RESP3, so that messages arrive as push
//! messages on an ordinary connection): it runs SUBSCRIBE and UNSUBSCRIBE in
//! the order they were asked for. Messages are routed where the connection
//! reads them, with no hop through another task:
//!
//! - a grant goes to the one waiter of this client that queued with that
//!   owner token, if any ([`Subscriptions::expect_grant`]);
//! - `released` (Redlock) wakes one waiter of this client through the
//!   channel's [`Notify`] (the others would only find the lock taken again).
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
pub(crate) use task::resp3;

/// The subscription manager of one node.
#[derive(Clone)]
pub(crate) struct Subscriptions {
    channels: Channels,
    grants: Grants,
    commands: mpsc::UnboundedSender<Command>,
    /// This client's id on this node (16 hex digits): queue entries carry it,
    /// and the release script publishes their grants on `grant_channel`.
    client_id: Arc<str>,
    /// `prefix:grants:<client_id>`.
    grant_channel: Arc<str>,
}

/// Channels with registered interest, by name.
type Channels = Arc<Mutex<HashMap<String, Channel>>>;

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

struct Channel {
    notify: Arc<Notify>,
    waiters: usize,
    /// Some waiter asked for messages ([`Interest::subscribe`]); registered
    /// only, a channel just counts waiters and is never subscribed.
    listen: bool,
    subscribed: bool,
}

enum Command {
    Subscribe {
        channel: String,
        done: oneshot::Sender<bool>,
    },
    Unsubscribe(String),
    /// The connection of this generation was lost (reported from where it
    /// reads, which is not the task).
    Disconnected {
        generation: u64,
    },
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
                // Never listened to: nothing to unsubscribe, forget it here.
                Some(channel) if channel.waiters == 1 && !channel.listen => {
                    channels.remove(&self.channel);
                    false
                }
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
    /// This client's id on this node, for its queue entries.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Registers interest in this client's grant channel, subscribing if this
    /// is the first: a queued waiter's grant is published there. Returns
    /// once the subscription is confirmed (or found impossible right now).
    pub async fn grant_interest(&self) -> Interest {
        self.interest(&self.grant_channel).await
    }

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
                    listen: false,
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
