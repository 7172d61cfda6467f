//! A connection to the primary that Redis Sentinel names, that follows it
//! across failovers.
//!
//! The connection itself is a reconnecting [`ConnectionManager`] to the
//! current primary. The primary is asked of the sentinels again
//!
//! - whenever a request fails in a way a failover explains (the connection
//!   dropped or was refused, or the server answers `READONLY`: it became a
//!   replica), in the background, at most one lookup at a time; the failed
//!   request itself is not retried (a purchase script may have run) and
//!   reports its error, which the service turns into 503 and Retry-After;
//! - on every [`SentinelConnection::follow_primary`], which the engine calls
//!   before it reads the server's run id (once a second, by the service's
//!   reconciler), so a failover is noticed even while no request fails.
//!
//! A new primary has a new run id, which makes the service rebuild the open
//! sales from the store (replication is asynchronous: the promoted replica
//! may lack the last writes), the same path as a Redis restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, TlsMode, Value,
};

/// The pause after a background lookup before the next one may start, so a
/// crowd of failing requests asks the sentinels a few times a second, not
/// once per request.
const LOOKUP_PAUSE: Duration = Duration::from_millis(200);

/// A cheap-to-clone handle on the connection to the current primary.
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    /// Asks the sentinels; one lookup at a time.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    primary: RwLock<Primary>,
    manager_config: ConnectionManagerConfig,
    /// Bound on one lookup (sentinels, then the new primary's connection).
    lookup_timeout: Duration,
    /// A background lookup is under way.
    looking_up: AtomicBool,
    db: i64,
    service: String,
}

struct Primary {
    /// `host:port`, for logs.
    address: String,
    connection: ConnectionManager,
}

impl SentinelConnection {
    /// Asks `sentinels` for the primary of `service` and connects to it with
    /// the credentials, database and TLS mode of `primary_settings`.
    pub(super) async fn connect(
        sentinels: &[String],
        service: &str,
        primary_settings: &str,
        manager_config: ConnectionManagerConfig,
        lookup_timeout: Duration,
    ) -> RedisResult<Self> {
        let settings = primary_settings.into_connection_info()?;
        let tls = matches!(settings.addr(), ConnectionAddr::TcpTls { .. });
        let mut node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(settings.redis_settings().clone());
        if tls {
            node = node.set_tls_mode(TlsMode::Secure);
        }
        let mut client = SentinelClient::build(
            sentinels.to_vec(),
            service,
            Some(node),
            SentinelServerType::Master,
        )?;
        let (address, connection) =
            connect_to_primary(&mut client, &manager_config, lookup_timeout).await?;
        Ok(Self {
            shared: Arc::new(Shared {
                sentinels: tokio::sync::Mutex::new(client),
                primary: RwLock::new(Primary {
                    address,
                    connection,
                }),
                manager_config,
                lookup_timeout,
                looking_up: AtomicBool::new(false),
                db: settings.redis_settings().db(),
                service: service.to_owned(),
            }),
        })
    }

    /// Asks the sentinels which server is the primary now and, if it moved,
    /// connects to the new one. Returns whether it moved.
    pub(super) async fn follow_primary(&self) -> RedisResult<bool> {
        let timeout = self.shared.lookup_timeout;
        let mut sentinels = self.shared.sentinels.lock().await;
        let client = within(timeout, sentinels.async_get_client()).await?;
        let address = client.get_connection_info().addr().to_string();
        if self.shared.primary.read().address == address {
            return Ok(false);
        }
        let connection = within(
            timeout,
            ConnectionManager::new_with_config(client, self.shared.manager_config.clone()),
        )
        .await?;
        let mut primary = self.shared.primary.write();
        tracing::warn!(service = %self.shared.service, from = %primary.address, to = %address,
            "Redis Sentinel names a new primary: switching to it");
        *primary = Primary {
            address,
            connection,
        };
        Ok(true)
    }

    /// Starts a background [`follow_primary`](Self::follow_primary) unless
    /// one is under way.
    fn look_up_in_background(&self) {
        if self.shared.looking_up.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(error) = this.follow_primary().await {
                tracing::warn!(service = %this.shared.service, %error,
                    "cannot ask Redis Sentinel for the primary; retrying on the next failure");
            }
            tokio::time::sleep(LOOKUP_PAUSE).await;
            this.shared.looking_up.store(false, Ordering::Release);
        });
    }

    fn current(&self) -> ConnectionManager {
        self.shared.primary.read().connection.clone()
    }

    /// Looks the primary up again if `result` failed in a way a failover
    /// explains.
    fn check<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result
            && primary_may_have_moved(error)
        {
            self.look_up_in_background();
        }
        result
    }
}

/// Whether `error` may mean the server is no longer the primary: it is
/// gone, or it answers as a replica.
fn primary_may_have_moved(error: &RedisError) -> bool {
    error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_io_error()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

/// Asks the sentinels for the primary (the client checks that the server
/// it names answers ROLE as a primary) and connects to it.
async fn connect_to_primary(
    sentinels: &mut SentinelClient,
    manager_config: &ConnectionManagerConfig,
    timeout: Duration,
) -> RedisResult<(String, ConnectionManager)> {
    let client = within(timeout, sentinels.async_get_client()).await?;
    let address = client.get_connection_info().addr().to_string();
    let connection = within(
        timeout,
        ConnectionManager::new_with_config(client, manager_config.clone()),
    )
    .await?;
    Ok((address, connection))
}

/// `step`, or an I/O error (transient: the service answers 503) if it takes
/// longer than `timeout` (a paused sentinel must not hang the engine).
async fn within<T>(
    timeout: Duration,
    step: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(timeout, step).await.map_err(|_| {
        RedisError::from((
            ErrorKind::Io,
            "Redis Sentinel did not answer in time",
            format!("no primary named and connected within {timeout:?}"),
        ))
    })?
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut connection = self.current();
        Box::pin(async move { self.check(connection.req_packed_command(cmd).await) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut connection = self.current();
        Box::pin(async move {
            self.check(
                connection
                    .req_packed_commands(pipeline, offset, count)
                    .await,
            )
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.db
    }
}
