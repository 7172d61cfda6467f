//! How the Redis engine is set up: where Redis is, its key prefix, the
//! batch bounds, and how its scripts run.

use std::sync::Arc;
use std::time::Duration;

use super::{Connector, RedisTopology, RedisUrlError, ScriptsMode};

/// At most this many entries (holdings, keys, orders) per rebuild script
/// call, so rebuilding a sale with millions of orders never blocks Redis
/// for long.
pub const REBUILD_CHUNK_ENTRIES: usize = 2_000;

/// The default bound on purchases per script call: large enough that a
/// crowd's per-call cost is spread thin, small enough that one call stays
/// well under a millisecond of Redis time.
pub const DEFAULT_MAX_BATCH: usize = 256;

/// The most purchases one purchase.lua call takes (it refuses more before
/// writing anything): a batch's outbox entry is one XADD, and Lua 5.1
/// unpacks at most about 8,000 values into one call. A larger `max_batch`
/// is cut down to it.
pub const MAX_BATCH: usize = 2_000;

/// How to reach Redis.
#[derive(Debug, Clone)]
pub struct RedisEngineConfig {
    /// The deployment: a standalone server, Sentinel or Cluster.
    pub topology: RedisTopology,
    /// Prefix of every key (default `stockade:`), to share a server safely.
    pub key_prefix: String,
    /// How long to wait for a reply before reporting a timeout.
    pub response_timeout: Duration,
    /// How long to wait for a connection to be established.
    pub connection_timeout: Duration,
    /// At most this many purchases of one sale per script call
    /// ([`DEFAULT_MAX_BATCH`], at most [`MAX_BATCH`]); 1 turns batching
    /// off.
    pub max_batch: usize,
    /// How the scripts run: Functions where the server has them, or
    /// EVALSHA ([`ScriptsMode::Auto`] by default).
    pub scripts: ScriptsMode,
    /// Connections made by the caller instead of from `topology` (an
    /// embedding that owns the transport, such as the simulator's
    /// in-process Redis); None: connect to `topology`.
    pub connector: Option<Arc<dyn Connector>>,
}

impl RedisEngineConfig {
    /// A standalone server at `url`, with default prefix and timeouts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            topology: RedisTopology::Standalone { url: url.into() },
            key_prefix: "stockade:".to_owned(),
            response_timeout: Duration::from_secs(2),
            connection_timeout: Duration::from_secs(2),
            max_batch: DEFAULT_MAX_BATCH,
            scripts: ScriptsMode::Auto,
            connector: None,
        }
    }

    /// A Redis reached through connections `connector` opens (a new one
    /// whenever the last broke), with default prefix and timeouts.
    pub fn connected(connector: Arc<dyn Connector>) -> Self {
        Self {
            connector: Some(connector),
            ..Self::new("")
        }
    }

    /// A Redis Cluster reachable through any of `urls`.
    pub fn cluster(urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            topology: RedisTopology::Cluster {
                nodes: urls.into_iter().map(Into::into).collect(),
            },
            ..Self::new("")
        }
    }

    /// The deployment a `redis://`, `redis+sentinel://` or `redis+cluster://`
    /// URL names ([`RedisTopology::from_url`]), with default prefix and
    /// timeouts.
    pub fn from_url(url: &str) -> Result<Self, RedisUrlError> {
        Ok(Self {
            topology: RedisTopology::from_url(url)?,
            ..Self::new("")
        })
    }

    /// Sets the key prefix.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets how the scripts run (Functions, EVALSHA, or whichever the
    /// server has).
    pub fn scripts(mut self, scripts: ScriptsMode) -> Self {
        self.scripts = scripts;
        self
    }

    /// Sets the bound on purchases per script call (1 turns batching off).
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }
}
