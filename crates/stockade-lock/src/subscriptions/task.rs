//! The task that owns one node's pub/sub connection: it runs SUBSCRIBE and
//! UNSUBSCRIBE in order, routes messages, and reconnects with backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::grants::{Grant, Grants};
use super::{Channel, Command, Subscriptions};

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
