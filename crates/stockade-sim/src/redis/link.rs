//! How the engine reaches a simulated server: SimRedis is a [`Connector`]
//! (every connection to that one server), [`Primary`] follows
//! whichever server is promoted, as clients of a failed-over deployment
//! end up on the new primary, and a [`Link`] is one client's network path
//! to the primary, which a partition cuts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use redis::AsyncConnectionConfig;
use redis::RedisResult;
use redis::aio::MultiplexedConnection;
use stockade_engine::Connector;
use tokio::sync::watch;

use super::SimRedis;

#[async_trait]
impl Connector for SimRedis {
    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        SimRedis::connect(self).await
    }
}

/// The current primary of a simulated deployment: new connections go to
/// whichever server was last promoted.
#[derive(Debug, Clone)]
pub struct Primary {
    current: Arc<std::sync::Mutex<SimRedis>>,
    /// The servers failovers replaced, each with the writes it had logged
    /// then: its open connections still reach it.
    deposed: Arc<std::sync::Mutex<Vec<(SimRedis, usize)>>>,
}

impl Primary {
    /// A deployment whose primary is `server`.
    pub fn new(server: SimRedis) -> Self {
        Self {
            current: Arc::new(std::sync::Mutex::new(server)),
            deposed: Arc::default(),
        }
    }

    /// The server new connections go to.
    pub fn server(&self) -> SimRedis {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Makes `server` the primary; connections open to the old one stay
    /// until they break or it is demoted ([`SimRedis::drop_connections`],
    /// which a failover does after [`crate::faults::DEMOTED_AFTER`]).
    pub fn promote(&self, server: SimRedis) {
        let old = std::mem::replace(
            &mut *self
                .current
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            server,
        );
        let writes = old.writes();
        self.deposed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((old, writes));
    }

    /// Whether a server a failover replaced was written after it was
    /// replaced: two primaries served at once, each with its own keys.
    pub fn two_primaries_served(&self) -> bool {
        self.deposed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(server, from)| server.writes() > *from)
    }

    /// The epochs a server a failover replaced wrote after it was replaced
    /// (an outbox entry's, a rebuild's): a connection opened before the
    /// failover still sold or rebuilt through it.
    pub fn deposed_epochs(&self) -> std::collections::BTreeSet<u64> {
        self.deposed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .flat_map(|(server, from)| server.numbers_written_since(*from, &[b"epoch", b"newest"]))
            .collect()
    }
}

#[async_trait]
impl Connector for Primary {
    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        self.server().connect().await
    }
}

/// One client's (an instance's) path to a deployment: while cut, its
/// connections read requests and answer none, new ones included; healed,
/// they answer what they read, in order. Other links are not affected.
#[derive(Debug, Clone)]
pub struct Link {
    primary: Primary,
    cut: Arc<watch::Sender<bool>>,
    /// How long (ms) each script call it carries takes the server.
    script_ms: Arc<AtomicU64>,
}

impl Link {
    /// A link, not cut, to `primary`.
    pub fn new(primary: Primary) -> Self {
        Self {
            primary,
            cut: Arc::new(watch::Sender::new(false)),
            script_ms: Arc::default(),
        }
    }

    /// Makes each script call of the connections opened from now on take
    /// `ms` of simulated time before its answer, as a loaded server does
    /// (their other commands are answered at once).
    pub fn slow_scripts(&self, ms: u64) {
        self.script_ms.store(ms, Ordering::Relaxed);
    }

    /// Cuts the link (`true`) or heals it (`false`).
    pub fn cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

#[async_trait]
impl Connector for Link {
    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        let server = self.primary.server();
        let script_ms = self.script_ms.load(Ordering::Relaxed);
        let link = super::conn::Delivery {
            cut: self.cut.subscribe(),
            script_ms,
        };
        super::conn::connect(&server, AsyncConnectionConfig::new(), link).await
    }
}
