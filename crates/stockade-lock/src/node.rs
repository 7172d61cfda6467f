//! One Redis node: a multiplexed, self-reconnecting connection for the
//! scripts, and the node's pub/sub [`Subscriptions`].

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::keys::LockKeys;
use crate::scripts;
use crate::subscriptions::Subscriptions;
use crate::{LockError, config::Config};

/// What the acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// We hold it now; the node's fencing counter after INCR.
    Acquired { fence: u64 },
    /// Someone else holds it for this much longer (None: no expiry set).
    Held { remaining: Option<Duration> },
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
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.command_timeout))
            .set_response_timeout(Some(config.command_timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
            .map_err(|e| LockError::InvalidConfig(format!("connection setup: {e}")))?;
        Ok(Self {
            address,
            connection,
            subscriptions: Subscriptions::start(client, config.command_timeout),
            timeout: config.command_timeout,
        })
    }

    async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        timeout: Duration,
    ) -> Result<T, NodeError> {
        let mut connection = self.connection.clone();
        match tokio::time::timeout(timeout, invocation.invoke_async(&mut connection)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(NodeError::Redis(error)),
            Err(_) => Err(NodeError::Timeout(timeout)),
        }
    }

    /// Checks that the node answers.
    pub async fn ping(&self) -> Result<(), NodeError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut connection);
        match tokio::time::timeout(self.timeout, ping).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(NodeError::Redis(error)),
            Err(_) => Err(NodeError::Timeout(self.timeout)),
        }
    }

    /// Runs `lua/acquire.lua`.
    pub async fn acquire(
        &self,
        keys: &LockKeys,
        token: &str,
        lease: Duration,
    ) -> Result<AcquireReply, NodeError> {
        let mut invocation = scripts::ACQUIRE.prepare_invoke();
        invocation
            .key(&keys.lock)
            .key(&keys.fence)
            .arg(token)
            .arg(millis(lease));
        let (acquired, value): (i64, i64) = self.call(&invocation, self.timeout).await?;
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

    /// Runs `lua/release.lua`: whether the lock was ours (and is now gone).
    pub async fn release(&self, keys: &LockKeys, token: &str) -> Result<bool, NodeError> {
        let mut invocation = scripts::RELEASE.prepare_invoke();
        invocation.key(&keys.lock).arg(token).arg(&keys.channel);
        let released: i64 = self.call(&invocation, self.timeout).await?;
        Ok(released == 1)
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
