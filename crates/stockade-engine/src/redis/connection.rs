//! One multiplexed connection shared by every request: standalone Redis
//! through a reconnecting [`ConnectionManager`], or Redis Cluster through a
//! [`ClusterConnection`]. Neither opens a connection per request, so a
//! stampede cannot exhaust a pool.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A cheap-to-clone handle on the shared connection.
#[derive(Clone)]
pub(super) enum SharedConnection {
    /// A single Redis server (or a Sentinel-resolved primary).
    Standalone(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for SharedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Standalone(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
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
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Standalone(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
