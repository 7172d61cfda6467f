//! The task that owns one node's pub/sub connection: it runs SUBSCRIBE and
//! UNSUBSCRIBE in order and reconnects with backoff. Messages are routed by
//! the connection's push sender, where the connection reads them
//! ([`Routes::deliver`]), not by this task: a grant reaches its waiter in one
//! wake-up.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::grants::{Grant, Grants};
use super::{Channels, Command, Subscriptions};

impl Subscriptions {
    /// Starts the connection task of one node. It connects on the first
    /// subscription and ends when every handle is dropped. `client` must
    /// speak RESP3 ([`resp3`]). `grants_prefix`: the prefix of the clients'
    /// grant channels.
    pub fn start(client: redis::Client, timeout: Duration, grants_prefix: &str) -> Self {
        let channels: Channels = Arc::new(Mutex::new(HashMap::new()));
        let grants = Grants::default();
        let (commands, receiver) = mpsc::unbounded_channel();
        let client_id: Arc<str> = format!("{:016x}", rand::random::<u64>()).into();
        let grant_channel: Arc<str> = format!("{grants_prefix}{client_id}").into();
        let task = Task {
            client,
            timeout,
            routes: Routes {
                channels: Arc::clone(&channels),
                grants: Arc::clone(&grants),
                notices: commands.downgrade(),
            },
            connection: None,
            generation: 0,
            retry_at: None,
            backoff: MIN_BACKOFF,
        };
        tokio::spawn(task.run(receiver));
        Self {
            channels,
            grants,
            commands,
            client_id,
            grant_channel,
        }
    }
}

/// `client` with RESP3 whatever its URL says: push messages on an ordinary
/// connection need it (Redis 6 and later have it).
pub(crate) fn resp3(client: &redis::Client) -> redis::RedisResult<redis::Client> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings))
}

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Where messages go: shared by the task and the connection's push sender.
#[derive(Clone)]
struct Routes {
    channels: Channels,
    grants: Grants,
    /// Tells the task that a connection was lost. Weak: the connection's
    /// push sender must not keep the task alive.
    notices: mpsc::WeakUnboundedSender<Command>,
}

impl Routes {
    /// Handles one push message of the connection of `generation`, on the
    /// connection's own task.
    fn deliver(&self, generation: u64, info: PushInfo) {
        match info.kind {
            PushKind::Message => {
                if let [Value::BulkString(channel), Value::BulkString(payload)] =
                    info.data.as_slice()
                {
                    let channel = String::from_utf8_lossy(channel);
                    let payload = String::from_utf8_lossy(payload);
                    self.route(&channel, &payload);
                }
            }
            PushKind::Disconnection => {
                if let Some(notices) = self.notices.upgrade() {
                    let _ = notices.send(Command::Disconnected { generation });
                }
            }
            _ => {}
        }
    }

    fn route(&self, channel: &str, payload: &str) {
        if let Some((token, grant)) = Grant::parse(payload) {
            // A waiter that gave up meanwhile (its departure passes the lock
            // on): nobody here to wake.
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
}

/// The task that owns one node's pub/sub connection.
struct Task {
    client: redis::Client,
    timeout: Duration,
    routes: Routes,
    connection: Option<MultiplexedConnection>,
    /// Counts connections, so that the loss of an old one is not taken for
    /// the loss of the current one.
    generation: u64,
    /// When to try reconnecting, while disconnected with waiters registered.
    retry_at: Option<Instant>,
    backoff: Duration,
}

impl Task {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
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
                    Some(Command::Disconnected { generation }) => {
                        if generation == self.generation && self.connection.is_some() {
                            tracing::debug!("pub/sub connection closed; reconnecting");
                            self.disconnect();
                            self.retry_at = Some(Instant::now());
                        }
                    }
                    None => return,
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

    fn wake_all(&self) {
        let channels = self
            .routes
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for channel in channels.values() {
            channel.notify.notify_waiters();
        }
    }

    /// Channels that have waiters who listen.
    fn wanted(&self) -> Vec<String> {
        let channels = self
            .routes
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        channels
            .iter()
            .filter(|(_, c)| c.waiters > 0 && c.listen)
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn set_subscribed(&self, names: &[String], subscribed: bool) {
        let mut channels = self
            .routes
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for name in names {
            if let Some(channel) = channels.get_mut(name) {
                channel.subscribed = subscribed;
            }
        }
    }

    fn disconnect(&mut self) {
        self.connection = None;
        let mut channels = self
            .routes
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
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
        self.generation += 1;
        let (routes, generation) = (self.routes.clone(), self.generation);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_push_sender(move |info: PushInfo| -> Result<(), Infallible> {
                routes.deliver(generation, info);
                Ok(())
            });
        let connected = tokio::time::timeout(
            self.timeout,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await;
        let mut connection = match connected {
            Ok(Ok(connection)) => connection,
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
            match tokio::time::timeout(self.timeout, connection.subscribe(&wanted)).await {
                Ok(Ok(())) => {}
                _ => {
                    self.schedule_reconnect();
                    return false;
                }
            }
        }
        self.connection = Some(connection);
        self.backoff = MIN_BACKOFF;
        self.set_subscribed(&wanted, true);
        // Messages sent while we were away (if we were) are lost: let every
        // waiter try again.
        self.wake_all();
        true
    }

    async fn subscribe(&mut self, name: &str) -> bool {
        let state = {
            let mut channels = self
                .routes
                .channels
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            channels.get_mut(name).map(|c| {
                c.listen = true;
                (c.waiters, c.subscribed)
            })
        };
        match state {
            // The waiter gave up before we got here.
            None | Some((0, _)) => return false,
            Some((_, true)) => return true,
            Some((_, false)) => {}
        }
        let Some(connection) = self.connection.as_mut() else {
            // `connect` subscribes to every wanted channel, this one included.
            return self.connect().await;
        };
        match tokio::time::timeout(self.timeout, connection.subscribe(name)).await {
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
            let mut channels = self
                .routes
                .channels
                .lock()
                .unwrap_or_else(|e| e.into_inner());
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
        if let Some(connection) = self.connection.as_mut()
            && !matches!(
                tokio::time::timeout(self.timeout, connection.unsubscribe(name)).await,
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
