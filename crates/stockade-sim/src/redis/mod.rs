//! An in-process Redis for the simulator: one thread, no sockets, no
//! wall clock, every answer a function of the commands sent and the
//! injected clock.
//!
//! [`SimRedis`] is a handle on one simulated server. The real `redis`
//! client talks to it over an in-memory pipe ([`SimRedis::connect`]), in
//! RESP2; tests may also call [`SimRedis::execute`] directly.
//!
//! The engine reaches one through its `Connector` seam:
//! `RedisEngine::connect(&RedisEngineConfig::connected(Arc::new(server.clone())), clock)`,
//! or `Arc::new(Primary::new(server))` to fail over later with
//! [`Primary::promote`] and a [`SimRedis::replica_lagging`]. Connections
//! (and so the server's tasks) live on the tokio runtime that opens them.
//!
//! # Implemented
//! - Data: strings (GET, SET with NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL,
//!   INCR/DECR/INCRBY/DECRBY, MGET), hashes (HGET, HSET, HMSET, HSETNX,
//!   HMGET, HGETALL, HDEL, HINCRBY, HEXISTS, HLEN, HKEYS, HVALS), lists
//!   (RPUSH, LPUSH, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LREM, LPOS),
//!   sets (SADD, SREM, SISMEMBER, SMEMBERS, SCARD), sorted sets (ZADD with
//!   NX/XX/GT/LT/CH/INCR, ZREM, ZSCORE, ZRANK, ZCARD, ZRANGE by rank,
//!   ZREMRANGEBYSCORE, ZPOPMIN), streams (XADD with NOMKSTREAM and exact
//!   MAXLEN, XRANGE, XLEN, XDEL); keys (DEL, UNLINK, EXISTS, TYPE, KEYS,
//!   SCAN in one step, DBSIZE, EXPIRE, PEXPIRE, PEXPIREAT, PERSIST, TTL,
//!   PTTL, FLUSHALL); PING, ECHO, TIME, PUBLISH (to nobody), INFO (server
//!   section with `run_id`), CLIENT SETINFO/SETNAME/GETNAME/ID, SELECT 0.
//! - Deadlines are absolute unix ms read from the injected clock; expired
//!   keys vanish when touched, and on [`SimRedis::sweep`].
//! - Scripts in real Lua 5.1 (`lua`): EVAL, EVALSHA, SCRIPT
//!   LOAD/EXISTS/FLUSH; Functions (`functions`): FUNCTION
//!   LOAD (and REPLACE)/LIST/DELETE/FLUSH, FCALL, FCALL_RO; the `redis` Lua
//!   library and Redis 7's conversions and error texts; `math.random`
//!   draws what a freshly started Redis draws.
//! - Faults (`faults`): restart empty, freeze and thaw, dropped replies,
//!   flushed scripts, and a lagging replica built from the write log
//!   (write effects as Redis 7 replicates them: a script's writes, relative
//!   deadlines made absolute, the ids XADD chose, expired keys as DEL).
//! - The engine's seam (`link`): SimRedis is a
//!   [`Connector`](stockade_engine::Connector), [`Primary`] follows a
//!   promoted replica, and a [`Link`] is one client's network path to it,
//!   which a partition cuts. [`SimRedis::record`] keeps a client's traffic to
//!   replay it elsewhere.
//!
//! # Not implemented
//! RESP3 (HELLO answers NOPROTO, so stockade-lock's subscriptions cannot
//! run here; `redis.setresp(3)` raises an error in scripts), pub/sub delivery (SUBSCRIBE is refused; PUBLISH reaches
//! nobody), MULTI/EXEC, blocking commands, consumer groups, databases
//! other than 0, ACL and AUTH, ZRANGE BYSCORE/BYLEX, XADD MINID and `~`,
//! script time limits (a script that never ends hangs the simulation),
//! the Lua libraries cjson, cmsgpack, struct and bit. Commands Redis has
//! and this server lacks answer an error saying so. Orders Redis leaves
//! unspecified (KEYS, SMEMBERS, FUNCTION LIST) are sorted here; SCAN
//! answers everything at once.

mod commands;
mod conn;
mod faults;
mod functions;
pub mod keyspace;
mod link;
mod lua;
pub mod resp;
mod scripts;
mod server;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};
use stockade_core::Clock;
use tokio::sync::watch;

pub use keyspace::{Entry, Value};
pub use link::{Link, Primary};
pub use resp::Reply;
use server::State;

/// A cheap-to-clone handle on one simulated Redis server.
#[derive(Clone)]
pub struct SimRedis {
    inner: Arc<Inner>,
}

struct Inner {
    /// Names the server's run ids (`{name}:{start}`), so runs repeat.
    name: String,
    clock: Arc<dyn Clock>,
    state: Mutex<Shared>,
    status: watch::Sender<Status>,
    /// How many replicas were made of it (each gets its own run id).
    replicas: std::sync::atomic::AtomicU64,
}

/// What the connections watch: restarts and freezes.
#[derive(Debug, Clone, Copy, Default)]
struct Status {
    generation: u64,
    frozen: bool,
}

struct Shared {
    state: State,
    /// How many more commands are applied without their reply.
    drop_replies: usize,
    /// Commands from connections, in the order run, while recording.
    recorded: Option<Vec<Vec<Vec<u8>>>>,
}

impl std::fmt::Debug for SimRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimRedis")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl SimRedis {
    /// A server just started, empty, named `name` (its run ids derive
    /// from it), its time read from `clock`.
    pub fn new(name: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        let name = name.into();
        let state = State::new(run_id(&name, 0));
        Self {
            inner: Arc::new(Inner {
                name,
                clock,
                state: Mutex::new(Shared {
                    state,
                    drop_replies: 0,
                    recorded: None,
                }),
                status: watch::Sender::new(Status::default()),
                replicas: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// A connection of the real client, with the client's default
    /// settings.
    pub async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        conn::connect(self, AsyncConnectionConfig::new(), at_once()).await
    }

    /// A connection of the real client with `config` (response timeout...).
    pub async fn connect_with_config(
        &self,
        config: AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        conn::connect(self, config, at_once()).await
    }

    /// Runs one command directly (no connection, no fault but a restart's
    /// loss of data applies).
    pub fn execute(&self, args: &[&[u8]]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        self.shared().state.execute(&self.inner.clock, &args)
    }

    /// The server's current run id (what `INFO server` says).
    pub fn run_id(&self) -> String {
        self.shared().state.run_id.clone()
    }

    /// Deletes every expired key now (Redis's active expiry).
    pub fn sweep(&self) {
        let mut shared = self.shared();
        let now = self.inner.clock.now().timestamp_millis();
        let state = &mut shared.state;
        state.db.now_ms = now;
        state.db.sweep();
        let expired: Vec<_> = state.db.expired.drain(..).collect();
        state
            .log
            .extend(expired.into_iter().map(|key| vec![b"DEL".to_vec(), key]));
    }

    /// Every live key and its entry, for comparisons.
    pub fn dump(&self) -> BTreeMap<Vec<u8>, Entry> {
        let mut shared = self.shared();
        shared.state.db.now_ms = self.inner.clock.now().timestamp_millis();
        shared.state.db.dump()
    }

    /// The numbers that follow any of `fields` in the write effects after
    /// the first `from` (a hash's field and its value, a stream entry's).
    pub fn numbers_written_since(&self, from: usize, fields: &[&[u8]]) -> Vec<u64> {
        let shared = self.shared();
        let log = &shared.state.log;
        log.get(from..)
            .unwrap_or_default()
            .iter()
            .flat_map(|effect| effect.windows(2))
            .filter(|pair| fields.contains(&pair[0].as_slice()))
            .filter_map(|pair| std::str::from_utf8(&pair[1]).ok()?.parse().ok())
            .collect()
    }

    /// How many write effects the server logged since it started.
    pub fn writes(&self) -> usize {
        self.shared().state.log.len()
    }

    /// Starts keeping every command connections send, in the order run
    /// (to replay a client's traffic elsewhere), or stops and forgets.
    pub fn record(&self, on: bool) {
        self.shared().recorded = on.then(Vec::new);
    }

    /// The commands kept since [`SimRedis::record`] was turned on.
    pub fn recorded(&self) -> Vec<Vec<Vec<u8>>> {
        self.shared().recorded.clone().unwrap_or_default()
    }

    /// A command from a connection: its reply, or None if it is one whose
    /// reply is dropped.
    fn answer(&self, args: &[Vec<u8>]) -> Option<Reply> {
        let mut shared = self.shared();
        if let Some(recorded) = &mut shared.recorded {
            recorded.push(args.to_vec());
        }
        let reply = shared.state.execute(&self.inner.clock, args);
        let handshake = [&b"CLIENT"[..], b"HELLO", b"SELECT", b"AUTH"]
            .iter()
            .any(|name| args[0].eq_ignore_ascii_case(name));
        if shared.drop_replies > 0 && !handshake {
            shared.drop_replies -= 1;
            return None;
        }
        Some(reply)
    }

    fn status(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves the state as it was at
        // the panic: go on with it rather than poison every caller.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a direct connection delivers: never cut, scripts answered at once.
fn at_once() -> conn::Delivery {
    conn::Delivery {
        cut: watch::channel(false).1,
        script_ms: 0,
    }
}

/// The run id of start `start` of server `name`: 40 hex digits, as Redis's.
fn run_id(name: &str, start: u64) -> String {
    sha1_smol::Sha1::from(format!("{name}:{start}"))
        .digest()
        .to_string()
}
