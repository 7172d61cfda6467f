//! One multiplexed connection shared by every request: standalone Redis
//! through a reconnecting [`ConnectionManager`], the primary Redis Sentinel
//! names through a [`SentinelConnection`] that follows failovers, or Redis
//! Cluster through a [`ClusterConnection`], or connections a caller makes
//! ([`Reconnecting`] over a [`Connector`](super::Connector)). None opens
//! a connection per request, so a stampede cannot exhaust a pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use stockade_core::EngineError;

use super::RedisEngineConfig;
use super::connector::Reconnecting;
use super::scripts::redis_error;
use super::scripts_mode::ScriptRunner;
use super::sentinel::SentinelConnection;
use stockade_core::redact::endpoint;

use super::topology::RedisTopology;

/// How many times the Cluster client follows MOVED/ASK or waits out
/// TRYAGAIN (a slot being migrated) before the request fails as
/// unavailable (503 and Retry-After). Four retries wait about 150 ms in
/// all: a purchase that meets a slot in migration, which can take seconds,
/// is answered at once rather than held until the response timeout.
const CLUSTER_RETRIES: u32 = 4;
/// Bounds of the Cluster client's wait before a retry, in ms (its default
/// minimum, 1.28 s, would hold a purchase that long per TRYAGAIN).
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 200);

/// A cheap-to-clone handle on the shared connection, and how it runs
/// Stockade's scripts ([`ScriptRunner`]: Functions or EVALSHA, chosen
/// when it was opened and shared by every clone).
#[derive(Clone)]
pub struct SharedConnection {
    link: Link,
    scripts: Arc<ScriptRunner>,
}

/// The deployment's own connection.
#[derive(Clone)]
enum Link {
    /// A single Redis server.
    Standalone(ConnectionManager),
    /// The primary Redis Sentinel names, followed across failovers.
    Sentinel(SentinelConnection),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
    /// Connections a caller's connector makes.
    Connected(Reconnecting),
}

impl SharedConnection {
    /// Connects to the deployment `config` names and chooses how scripts
    /// run there (`config.scripts`). Errors name hosts and ports, never a
    /// password.
    pub async fn open(config: &RedisEngineConfig) -> Result<Self, EngineError> {
        if let Some(connector) = &config.connector {
            let mut link = Link::Connected(
                Reconnecting::open(
                    Arc::clone(connector),
                    config.connection_timeout,
                    config.response_timeout,
                )
                .await
                .map_err(|error| {
                    let detail = format!("connecting to Redis through {connector:?}: {error}");
                    match redis_error(error) {
                        EngineError::Timeout(_) => EngineError::Timeout(detail),
                        _ => EngineError::Unavailable(detail.into()),
                    }
                })?,
            );
            let scripts = ScriptRunner::detect(&mut link, config.scripts)
                .await
                .map_err(|reason| EngineError::backend(format!("{connector:?}: {reason}")))?;
            return Ok(Self { link, scripts });
        }
        let topology = &config.topology;
        let failed = |error: redis::RedisError| {
            let hint = match error.kind() {
                redis::ErrorKind::MasterNameNotFoundBySentinel => {
                    " (the sentinels monitor no service by that name: check the name after the hosts in the URL)"
                }
                _ if error.is_connection_refusal() || error.is_timeout() => {
                    " (is it running, and reachable from here?)"
                }
                _ => "",
            };
            let detail = format!("connecting to {topology}: {error}{hint}");
            match redis_error(error) {
                EngineError::Timeout(_) => EngineError::Timeout(detail),
                EngineError::Unavailable(_) => EngineError::Unavailable(detail.into()),
                _ => EngineError::backend(detail),
            }
        };
        let manager_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connection_timeout))
            .set_number_of_retries(2);
        let mut link = match topology {
            RedisTopology::Standalone { url } => {
                let client = redis::Client::open(url.as_str()).map_err(|e| {
                    EngineError::backend(format!("invalid Redis URL for {}: {e}", endpoint(url)))
                })?;
                Link::Standalone(
                    ConnectionManager::new_with_config(client, manager_config)
                        .await
                        .map_err(failed)?,
                )
            }
            RedisTopology::Sentinel {
                sentinels,
                service,
                primary_settings,
            } => Link::Sentinel(
                SentinelConnection::connect(
                    sentinels,
                    service,
                    primary_settings,
                    manager_config,
                    config.connection_timeout + config.response_timeout,
                )
                .await
                .map_err(failed)?,
            ),
            RedisTopology::Cluster { nodes } => {
                let client = redis::cluster::ClusterClientBuilder::new(nodes.clone())
                    .response_timeout(config.response_timeout)
                    .connection_timeout(config.connection_timeout)
                    .retries(CLUSTER_RETRIES)
                    .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
                    .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1)
                    .build()
                    .map_err(failed)?;
                Link::Cluster(client.get_async_connection().await.map_err(failed)?)
            }
        };
        let scripts = ScriptRunner::detect(&mut link, config.scripts)
            .await
            .map_err(|reason| EngineError::backend(format!("{topology}: {reason}")))?;
        Ok(Self { link, scripts })
    }

    /// How this connection runs Stockade's scripts.
    pub fn scripts(&self) -> &ScriptRunner {
        &self.scripts
    }

    /// An identity of the data set that changes whenever a server holding
    /// it restarts or another takes over: the `run_id` of the server (of
    /// the current primary, asked of the sentinels first, under Sentinel;
    /// of every primary, by address, on a Cluster, where moving slots
    /// between primaries changes nothing).
    pub(super) async fn run_id(&self) -> Result<String, EngineError> {
        let mut command = redis::cmd("INFO");
        command.arg("server");
        match &self.link {
            Link::Cluster(cluster) => {
                let routing = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllMasters,
                    Some(ResponsePolicy::Special),
                ));
                let reply = cluster
                    .clone()
                    .route_command(command, routing)
                    .await
                    .map_err(redis_error)?;
                let by_node: BTreeMap<String, String> =
                    redis::from_redis_value(reply).map_err(|e| {
                        EngineError::backend(format!("INFO server of the Cluster's primaries: {e}"))
                    })?;
                let ids = by_node
                    .iter()
                    .map(|(node, info)| Ok(format!("{node}={}", run_id_of(info)?)))
                    .collect::<Result<Vec<_>, EngineError>>()?;
                Ok(ids.join(","))
            }
            Link::Sentinel(sentinel) => {
                if let Err(error) = sentinel.follow_primary().await {
                    return Err(redis_error(error));
                }
                let info: String = command
                    .query_async(&mut self.clone())
                    .await
                    .map_err(redis_error)?;
                run_id_of(&info)
            }
            Link::Standalone(_) | Link::Connected(_) => {
                let info: String = command
                    .query_async(&mut self.clone())
                    .await
                    .map_err(redis_error)?;
                run_id_of(&info)
            }
        }
    }
}

/// The `run_id` field of an `INFO server` reply.
fn run_id_of(info: &str) -> Result<String, EngineError> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("run_id:"))
        .map(str::to_owned)
        .ok_or_else(|| EngineError::backend("INFO server has no run_id"))
}

impl ConnectionLike for SharedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.link.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.link.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Standalone(c) => c.req_packed_command(cmd),
            Self::Sentinel(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Connected(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Connected(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Standalone(c) => c.get_db(),
            Self::Sentinel(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
            Self::Connected(c) => c.get_db(),
        }
    }
}
