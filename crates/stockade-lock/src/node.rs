//! One Redis node: a multiplexed, self-reconnecting connection for the
//! scripts, and the node's pub/sub [`Subscriptions`] (a connection of their
//! own, RESP3).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::keys::{LockKeys, grants_prefix};
use crate::scripts;
use crate::subscriptions::{Subscriptions, resp3};
use crate::{LockError, config::Config};

/// What the acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// We hold it now, with this fencing token.
    Acquired { fence: u64 },
    /// Someone else holds it for this much longer (None: no expiry set).
    Held { remaining: Option<Duration> },
}

/// What a queued waiter's check (`lua/wait.lua`) answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitReply {
    /// The lock was granted to the waiter before this check (the grant
    /// message went missing).
    AlreadyGranted { fence: u64 },
    /// The lock was free and the waiter was first in line: granted now.
    Granted { fence: u64 },
    /// Still waiting. `remaining`: the holder's remaining lease, if someone
    /// holds it with an expiry.
    Waiting {
        remaining: Option<Duration>,
        requeued: bool,
    },
}

/// The node's clock as this process last saw it: the offset between the
/// server's `TIME` and this machine's wall clock, learned from every script
/// reply and grant message that carries the server time. Queue entries carry
/// a deadline in the server's clock (the scripts compare it with `TIME`);
/// with this offset a waiter dates its entry without asking the server for
/// the time, so queuing is a single RPUSH. The estimate is off by the
/// latency of the reply it came from (microseconds to milliseconds), which
/// only shifts a deadline that is seconds away.
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    offset_us: AtomicI64,
    known: AtomicBool,
}

impl ServerClock {
    /// Records that the server's clock read `server_us` (µs since the epoch)
    /// just now. Zero means the reply carried no time.
    pub fn observe(&self, server_us: u64) {
        if server_us == 0 {
            return;
        }
        let offset = i128::from(server_us) - i128::from(wall_clock_us());
        let offset = i64::try_from(offset).unwrap_or(0);
        self.offset_us.store(offset, Ordering::Relaxed);
        self.known.store(true, Ordering::Release);
    }

    /// The server's clock now, estimated, in µs; this machine's wall clock
    /// before any reply (clocks kept by NTP agree to milliseconds).
    pub fn estimate_us(&self) -> u64 {
        self.now_us().unwrap_or_else(wall_clock_us)
    }

    /// The server's clock now, estimated, in µs; None before any reply.
    pub fn now_us(&self) -> Option<u64> {
        if !self.known.load(Ordering::Acquire) {
            return None;
        }
        let offset = self.offset_us.load(Ordering::Relaxed);
        u64::try_from(i128::from(wall_clock_us()) + i128::from(offset)).ok()
    }
}

fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// Why a call to a node failed.
#[derive(Debug)]
pub(crate) enum NodeError {
    Redis(redis::RedisError),
    Timeout(Duration),
    Reply(String),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Redis(error) => error.fmt(f),
            Self::Timeout(timeout) => write!(f, "no reply within {timeout:?}"),
            Self::Reply(detail) => write!(f, "unexpected reply: {detail}"),
        }
    }
}

/// A connection to one Redis node.
#[derive(Clone)]
pub(crate) struct Node {
    /// `host:port`, for error messages (never the password).
    pub address: String,
    connection: ConnectionManager,
    pub subscriptions: Subscriptions,
    pub clock: Arc<ServerClock>,
    timeout: Duration,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Sets up the node without waiting for it: the connection is made on
    /// first use and remade after failures.
    pub fn new(url: &str, config: &Config) -> Result<Self, LockError> {
        let client = redis::Client::open(url)
            .map_err(|e| LockError::InvalidConfig(format!("bad Redis URL: {e}")))?;
        let address = client.get_connection_info().addr().to_string();
        // A hand-off is a chain of small writes, each waited for: none may sit
        // in Nagle's buffer until an earlier one is acknowledged.
        let info = client.get_connection_info().clone();
        let tcp = info.tcp_settings().clone().set_nodelay(true);
        let client = redis::Client::open(info.set_tcp_settings(tcp))
            .map_err(|e| LockError::InvalidConfig(format!("bad Redis URL: {e}")))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.command_timeout))
            .set_response_timeout(Some(config.command_timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500));
        let pubsub = resp3(&client)
            .map_err(|e| LockError::InvalidConfig(format!("pub/sub connection setup: {e}")))?;
        let connection = ConnectionManager::new_lazy_with_config(client, manager_config)
            .map_err(|e| LockError::InvalidConfig(format!("connection setup: {e}")))?;
        Ok(Self {
            address,
            connection,
            subscriptions: Subscriptions::start(
                pubsub,
                config.command_timeout,
                &grants_prefix(&config.key_prefix),
            ),
            clock: Arc::new(ServerClock::default()),
            timeout: config.command_timeout,
        })
    }

    async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        timeout: Duration,
    ) -> Result<T, NodeError> {
        let mut connection = self.connection.clone();
        within(timeout, invocation.invoke_async(&mut connection)).await
    }

    /// Checks that the node answers, and loads every script into its script
    /// cache: one round trip.
    pub async fn ping(&self) -> Result<(), NodeError> {
        let mut connection = self.connection.clone();
        let mut pipeline = redis::pipe();
        pipeline.cmd("PING").ignore();
        for code in scripts::ALL {
            pipeline.cmd("SCRIPT").arg("LOAD").arg(code).ignore();
        }
        within(self.timeout, pipeline.query_async::<()>(&mut connection)).await
    }

    /// Runs `lua/acquire.lua`. `clock_floor`: draw the fencing token with the
    /// clock floor (single node) rather than by INCR (Redlock).
    pub async fn acquire(
        &self,
        keys: &LockKeys,
        token: &str,
        lease: Duration,
        clock_floor: bool,
    ) -> Result<AcquireReply, NodeError> {
        let mut invocation = scripts::ACQUIRE.prepare_invoke();
        invocation
            .key(&keys.lock)
            .key(&keys.fence)
            .arg(token)
            .arg(millis(lease))
            .arg(if clock_floor { "1" } else { "0" });
        let (acquired, value, server_us): (i64, i64, u64) =
            self.call(&invocation, self.timeout).await?;
        self.clock.observe(server_us);
        match acquired {
            1 => Ok(AcquireReply::Acquired {
                fence: u64::try_from(value)
                    .map_err(|_| NodeError::Reply(format!("negative fencing token {value}")))?,
            }),
            0 => Ok(AcquireReply::Held {
                remaining: u64::try_from(value).ok().map(Duration::from_millis),
            }),
            other => Err(NodeError::Reply(format!("acquire returned {other}"))),
        }
    }

    /// Runs `lua/release.lua`: whether the lock was ours (and is now gone or
    /// handed to the next waiter). `announce` (Redlock): publish the release
    /// instead of handing the lock on.
    pub async fn release(
        &self,
        keys: &LockKeys,
        token: &str,
        announce: bool,
    ) -> Result<bool, NodeError> {
        let mut invocation = scripts::RELEASE.prepare_invoke();
        invocation
            .key(&keys.lock)
            .key(&keys.fence)
            .key(&keys.queue)
            .arg(token)
            .arg(if announce {
                &keys.channel
            } else {
                &keys.grants
            })
            .arg(if announce { "announce" } else { "queue" });
        let released: i64 = self.call(&invocation, self.timeout).await?;
        Ok(released == 1)
    }

    /// Queues a waiter: `RPUSH` of its entry, one command. Returns the
    /// queue's length after it (1: nobody was ahead).
    pub async fn enqueue(&self, keys: &LockKeys, entry: &str) -> Result<u64, NodeError> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("RPUSH");
        command.arg(&keys.queue).arg(entry);
        within(self.timeout, command.query_async::<u64>(&mut connection)).await
    }

    /// Runs `lua/wait.lua`: a queued waiter's check on its place, renewing
    /// its entry from `entry` to `renewed`.
    pub async fn wait(
        &self,
        keys: &LockKeys,
        token: &str,
        entry: &str,
        renewed: &str,
    ) -> Result<WaitReply, NodeError> {
        let invocation = queue_invocation(&scripts::WAIT, keys, token, entry, renewed);
        let reply: Vec<i64> = self.call(&invocation, self.timeout).await?;
        let field = |index: usize| reply.get(index).copied();
        let server_us = field(2).and_then(|us| u64::try_from(us).ok()).unwrap_or(0);
        self.clock.observe(server_us);
        let fence = || {
            field(1)
                .and_then(|fence| u64::try_from(fence).ok())
                .ok_or_else(|| NodeError::Reply(format!("wait returned {reply:?}")))
        };
        match field(0) {
            Some(2) => Ok(WaitReply::AlreadyGranted { fence: fence()? }),
            Some(1) => Ok(WaitReply::Granted { fence: fence()? }),
            Some(0) => Ok(WaitReply::Waiting {
                remaining: field(1)
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis),
                requeued: field(3) == Some(1),
            }),
            _ => Err(NodeError::Reply(format!("wait returned {reply:?}"))),
        }
    }

    /// Runs `lua/leave.lua`: takes a waiter out of the queue (both forms of
    /// its entry) and passes on the lock if it had been granted to it.
    /// Whether it had been.
    pub async fn leave(
        &self,
        keys: &LockKeys,
        token: &str,
        entry: &str,
        renewed: &str,
    ) -> Result<bool, NodeError> {
        let invocation = queue_invocation(&scripts::LEAVE, keys, token, entry, renewed);
        let granted: i64 = self.call(&invocation, self.timeout).await?;
        Ok(granted == 1)
    }

    /// Runs `lua/extend.lua`: whether the lock was ours (and is extended).
    pub async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        lease: Duration,
        timeout: Duration,
    ) -> Result<bool, NodeError> {
        let mut invocation = scripts::EXTEND.prepare_invoke();
        invocation.key(&keys.lock).arg(token).arg(millis(lease));
        let extended: i64 = self.call(&invocation, timeout.min(self.timeout)).await?;
        Ok(extended == 1)
    }

    /// Runs `lua/raise_fence.lua`: whether the lock is still ours here.
    pub async fn raise_fence(
        &self,
        keys: &LockKeys,
        token: &str,
        fence: u64,
    ) -> Result<bool, NodeError> {
        let mut invocation = scripts::RAISE_FENCE.prepare_invoke();
        invocation
            .key(&keys.lock)
            .key(&keys.fence)
            .arg(token)
            .arg(fence);
        let raised: i64 = self.call(&invocation, self.timeout).await?;
        Ok(raised == 1)
    }
}

/// A lease in whole milliseconds, at least 1 (PX 0 is an error).
pub(crate) fn millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Awaits one request to the node for at most `timeout`.
async fn within<T>(
    timeout: Duration,
    request: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, NodeError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(NodeError::Redis(error)),
        Err(_) => Err(NodeError::Timeout(timeout)),
    }
}

/// The invocation of a script on a queued waiter's entry (`wait.lua`,
/// `leave.lua`): the lock, fence and queue keys, then the waiter's token,
/// the lock's channel and both forms of its entry.
fn queue_invocation<'a>(
    script: &'a redis::Script,
    keys: &LockKeys,
    token: &str,
    entry: &str,
    renewed: &str,
) -> redis::ScriptInvocation<'a> {
    let mut invocation = script.prepare_invoke();
    invocation
        .key(&keys.lock)
        .key(&keys.fence)
        .key(&keys.queue)
        .arg(token)
        .arg(&keys.grants)
        .arg(entry)
        .arg(renewed);
    invocation
}
