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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

/// The subscription manager of one node.
#[derive(Clone)]
pub(crate) struct Subscriptions {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    grants: Grants,
    commands: mpsc::UnboundedSender<Command>,
}

/// Queued waiters of this client by owner token, each waiting for its grant.
type Grants = Arc<Mutex<HashMap<String, oneshot::Sender<Grant>>>>;

/// A grant message: the lock is the waiter's now, with this fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub fence: u64,
    /// The server's clock when it granted the lock, µs.
    pub server_us: u64,
}

impl Grant {
    /// Parses `token fence server_us`; None for anything else.
    fn parse(payload: &str) -> Option<(&str, Self)> {
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
    /// Starts the connection task of one node. It connects on the first
    /// subscription and ends when every handle is dropped.
    pub fn start(client: redis::Client, timeout: Duration) -> Self {
        let channels = Arc::new(Mutex::new(HashMap::new()));
        let grants = Grants::default();
        let (commands, receiver) = mpsc::unbounded_channel();
        let task = Task {
            client,
            timeout,
            channels: Arc::clone(&channels),
            grants: Arc::clone(&grants),
            sink: None,
            stream: None,
            retry_at: None,
            backoff: MIN_BACKOFF,
        };
        tokio::spawn(task.run(receiver));
        Self {
            channels,
            grants,
            commands,
        }
    }

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

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The task that owns one node's pub/sub connection.
struct Task {
    client: redis::Client,
    timeout: Duration,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    grants: Grants,
    sink: Option<PubSubSink>,
    stream: Option<PubSubStream>,
    /// When to try reconnecting, while disconnected with waiters registered.
    retry_at: Option<Instant>,
    backoff: Duration,
}

impl Task {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            let stream = &mut self.stream;
            let next_message = async {
                match stream.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            let retry_at = self.retry_at;
            let reconnect_due = async {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Subscribe { channel, done }) => {
                        let subscribed = self.subscribe(&channel).await;
                        let _ = done.send(subscribed);
                    }
                    Some(Command::Unsubscribe(channel)) => self.unsubscribe(&channel).await,
                    None => return,
                },
                message = next_message => match message {
                    Some(message) => {
                        let payload: String = message.get_payload().unwrap_or_default();
                        self.route(message.get_channel_name(), &payload);
                    }
                    None => {
                        tracing::debug!("pub/sub connection closed; reconnecting");
                        self.disconnect();
                        self.retry_at = Some(Instant::now());
                    }
                },
                () = reconnect_due => {
                    self.retry_at = None;
                    if self.wanted().is_empty() {
                        continue;
                    }
                    self.connect().await;
                }
            }
        }
    }

    fn route(&self, channel: &str, payload: &str) {
        if let Some((token, grant)) = Grant::parse(payload) {
            // Another client's waiter, or one that gave up (its departure
            // passes the lock on): nobody here to wake.
            let waiter = self
                .grants
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(token);
            if let Some(waiter) = waiter {
                let _ = waiter.send(grant);
            }
            return;
        }
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(channel) = channels.get(channel) {
            channel.notify.notify_one();
        }
    }

    fn wake_all(&self) {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        for channel in channels.values() {
            channel.notify.notify_waiters();
        }
    }

    /// Channels that have waiters.
    fn wanted(&self) -> Vec<String> {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels
            .iter()
            .filter(|(_, c)| c.waiters > 0)
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn set_subscribed(&self, names: &[String], subscribed: bool) {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        for name in names {
            if let Some(channel) = channels.get_mut(name) {
                channel.subscribed = subscribed;
            }
        }
    }

    fn disconnect(&mut self) {
        self.sink = None;
        self.stream = None;
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        for channel in channels.values_mut() {
            channel.subscribed = false;
        }
    }

    fn schedule_reconnect(&mut self) {
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Opens the connection and subscribes to every wanted channel. Returns
    /// whether that worked; if not, a retry is scheduled.
    async fn connect(&mut self) -> bool {
        let connected = tokio::time::timeout(self.timeout, self.client.get_async_pubsub()).await;
        let (mut sink, stream) = match connected {
            Ok(Ok(pubsub)) => pubsub.split(),
            Ok(Err(error)) => {
                tracing::debug!(%error, "pub/sub connection failed");
                self.schedule_reconnect();
                return false;
            }
            Err(_) => {
                tracing::debug!("pub/sub connection timed out");
                self.schedule_reconnect();
                return false;
            }
        };
        let wanted = self.wanted();
        if !wanted.is_empty() {
            match tokio::time::timeout(self.timeout, sink.subscribe(&wanted)).await {
                Ok(Ok(())) => {}
                _ => {
                    self.schedule_reconnect();
                    return false;
                }
            }
        }
        self.sink = Some(sink);
        self.stream = Some(stream);
        self.backoff = MIN_BACKOFF;
        self.set_subscribed(&wanted, true);
        // Messages sent while we were away (if we were) are lost: let every
        // waiter try again.
        self.wake_all();
        true
    }

    async fn subscribe(&mut self, name: &str) -> bool {
        let state = {
            let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            channels.get(name).map(|c| (c.waiters, c.subscribed))
        };
        match state {
            // The waiter gave up before we got here.
            None | Some((0, _)) => return false,
            Some((_, true)) => return true,
            Some((_, false)) => {}
        }
        if self.sink.is_none() {
            // `connect` subscribes to every wanted channel, this one included.
            return self.connect().await;
        }
        let Some(sink) = self.sink.as_mut() else {
            return false;
        };
        match tokio::time::timeout(self.timeout, sink.subscribe(name)).await {
            Ok(Ok(())) => {
                self.set_subscribed(&[name.to_owned()], true);
                true
            }
            _ => {
                self.disconnect();
                self.schedule_reconnect();
                false
            }
        }
    }

    async fn unsubscribe(&mut self, name: &str) {
        let was_subscribed = {
            let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            match channels.get(name) {
                Some(channel) if channel.waiters == 0 => {
                    let subscribed = channel.subscribed;
                    channels.remove(name);
                    subscribed
                }
                // Someone registered again meanwhile: keep it.
                _ => return,
            }
        };
        if !was_subscribed {
            return;
        }
        if let Some(sink) = self.sink.as_mut()
            && !matches!(
                tokio::time::timeout(self.timeout, sink.unsubscribe(name)).await,
                Ok(Ok(()))
            )
        {
            self.disconnect();
            if !self.wanted().is_empty() {
                self.schedule_reconnect();
            }
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
