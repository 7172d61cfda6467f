//! Redis reached through connections a caller makes ([`Connector`]),
//! rather than by URL: an embedding that owns the transport (the
//! simulator's in-process Redis, a tunnel) hands the engine a way to open
//! a connection, and [`Reconnecting`] opens one when first needed and a
//! new one whenever it breaks, as the URL deployments' connection
//! manager does.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

/// Opens a fresh connection to the Redis the engine uses, each time it is
/// asked (after the previous one broke, or timed out).
#[async_trait]
pub trait Connector: Send + Sync + fmt::Debug + 'static {
    /// A new connection.
    async fn connect(&self) -> RedisResult<MultiplexedConnection>;
}

/// One connection at a time from a [`Connector`], replaced when it breaks.
#[derive(Clone)]
pub(crate) struct Reconnecting {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Arc<dyn Connector>,
    connection_timeout: Duration,
    response_timeout: Duration,
    /// The connection in use and its number (so that only the failure of
    /// the current one drops it).
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// Held while connecting, so a crowd of requests opens one connection.
    connecting: tokio::sync::Mutex<u64>,
}

impl fmt::Debug for Reconnecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconnecting")
            .field("connector", &self.inner.connector)
            .finish_non_exhaustive()
    }
}

impl Reconnecting {
    /// Connects through `connector` now, so that a Redis that cannot be
    /// reached fails the engine's start rather than its first request.
    pub(crate) async fn open(
        connector: Arc<dyn Connector>,
        connection_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        let this = Self {
            inner: Arc::new(Inner {
                connector,
                connection_timeout,
                response_timeout,
                current: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(0),
            }),
        };
        this.connection().await?;
        Ok(this)
    }

    /// The current connection, opened if there is none.
    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(current) = self.inner.current.lock().clone() {
            return Ok(current);
        }
        let mut opened = self.inner.connecting.lock().await;
        if let Some(current) = self.inner.current.lock().clone() {
            return Ok(current);
        }
        let mut connection = tokio::time::timeout(
            self.inner.connection_timeout,
            self.inner.connector.connect(),
        )
        .await
        .map_err(|_| {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting to Redis timed out",
            ))
        })??;
        connection.set_response_timeout(self.inner.response_timeout);
        *opened += 1;
        let current = (*opened, connection);
        *self.inner.current.lock() = Some(current.clone());
        Ok(current)
    }

    /// Drops connection `number` after `error`, if the error means it can
    /// no longer be trusted: broken, or silent past the response timeout
    /// (a multiplexed connection whose reply went missing stays out of
    /// step, so it is replaced rather than reused).
    fn judge<T>(&self, number: u64, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result {
            let broken = error.is_unrecoverable_error()
                || error.is_connection_dropped()
                || error.is_io_error()
                || error.is_timeout();
            if broken {
                let mut current = self.inner.current.lock();
                if current.as_ref().is_some_and(|(n, _)| *n == number) {
                    *current = None;
                }
            }
        }
        result
    }
}

impl ConnectionLike for Reconnecting {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (number, mut connection) = self.connection().await?;
            let result = connection.req_packed_command(cmd).await;
            self.judge(number, result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (number, mut connection) = self.connection().await?;
            let result = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            self.judge(number, result)
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
