//! The Redis engine: every operation is one server-side Lua script (kept in
//! `lua/*.lua`), run as a function of a versioned Redis Functions library
//! (Redis 7 and later) or with EVALSHA (Redis 6, or forced), and reloaded
//! transparently after `FUNCTION FLUSH`, `SCRIPT FLUSH` or a restart.
//!
//! Purchases are micro-batched (`crate::batching`): the purchases of one
//! sale that arrive while its script call is in flight go together in the
//! next call, which decides each in arrival order and writes one outbox
//! entry for the batch. An idle sale's purchase is sent at once.
//!
//! All requests share one multiplexed connection. Time comes from the
//! engine's clock and is passed to the scripts, so every instance of the
//! service judges windows by its own clock (keep clocks in sync with NTP).
//!
//! A sale created with `shards: N` spreads its stock over N sets of keys on
//! different Cluster slots (see `shards`); every operation here goes to
//! the shard it concerns, or to all of them.
//!
//! # Layout
//! - `config`: [`RedisEngineConfig`]; [`topology`]: standalone, Sentinel or
//!   Cluster, from a URL; `connection`, `sentinel`: reaching it;
//!   `connector`: reaching it through connections the caller makes
//!   ([`Connector`]).
//! - [`keys`]: the key layout; `scripts`: the Lua scripts; `codec`: their
//!   replies.
//! - `shards`: a sale's shards, and stock moving between them.
//! - [`library`]: scripts as one versioned Functions library per owner
//!   (FCALL) or one by one (EVALSHA), as the connection chose; the
//!   waiting room and the rate limiter run theirs through it too.
//!   `scripts_mode`: [`ScriptsMode`] (`--redis-scripts`) and the
//!   per-connection [`ScriptRunner`] it chooses when connecting.
//! - `purchase_batch`: one `purchase.lua` call per micro-batch.
//! - `release`: releases, on every shard of a sharded sale.
//! - `outbox`: this process's and others' outbox entries; `stream`:
//!   reading and trimming the outbox streams.
//! - `rebuild`: a sale's state from the store's orders.
//! - `snapshot`: a sale's snapshot from its sale hash.

mod codec;
mod config;
mod connection;
mod connector;
pub mod keys;
pub mod library;
mod outbox;
mod purchase_batch;
mod rebuild;
mod release;
mod scripts;
mod scripts_mode;
mod sentinel;
mod shards;
mod snapshot;
mod stream;
pub mod topology;

use std::sync::Arc;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use stockade_core::{
    Clock, CreateOutcome, Engine, EngineError, Epoch, Judged, Order, OrderId, Purchase,
    PurchaseOutcome, RebuildPlan, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, SoldCounts,
    UserId,
};

use crate::batching::{BatchedPurchase, Batcher};
use crate::codes;
pub use config::{DEFAULT_MAX_BATCH, MAX_BATCH, REBUILD_CHUNK_ENTRIES, RedisEngineConfig};
pub use connection::SharedConnection;
pub use connector::Connector;
pub use keys::SaleKeys;
pub use library::{Library, LibraryScript, ScriptInvocation};
use outbox::OutboxIndex;
use purchase_batch::{BatchKey, PurchaseScript};
use scripts::{CLOSE, CREATE_SALE, RETIRE, redis_error};
pub use scripts_mode::{ScriptRunner, ScriptsMode};
use shards::{Layouts, Transfers};
pub use topology::{RedisTopology, RedisUrlError};

/// How many times a purchase of a sharded sale is tried on its shard, with
/// stock pulled from the siblings between tries, before its shard's answer
/// stands. Tries go on only while pulls bring stock, and each pull takes at
/// least half of what a sibling has, so the siblings run dry in a few dozen
/// pulls whatever the stock: this bound is a safety net, not a limit met.
const SHARD_TRIES: usize = 64;

/// Sales held in Redis.
pub struct RedisEngine {
    connection: SharedConnection,
    key_prefix: String,
    clock: Arc<dyn Clock>,
    purchases: Batcher<BatchKey, BatchedPurchase, Judged>,
    purchase_script: Arc<PurchaseScript>,
    /// Each sale's shards (one for most sales).
    layouts: Arc<Layouts>,
    /// Stock moving between a sharded sale's shards.
    transfers: Arc<Transfers>,
    /// This process's own outbox entries.
    outbox_index: Arc<OutboxIndex>,
    /// Other processes' entries, as of the last read of each outbox.
    read_entries: OutboxIndex,
}

impl std::fmt::Debug for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEngine")
            .field("key_prefix", &self.key_prefix)
            .finish_non_exhaustive()
    }
}

impl RedisEngine {
    /// The engine's one shared connection (it follows Sentinel failovers
    /// and Cluster redirections), for other users of the same Redis, such
    /// as the service's shared rate limits.
    pub fn connection(&self) -> SharedConnection {
        self.connection.clone()
    }

    /// The engine's scripts as a Functions library: its name is what
    /// `FUNCTION LIST` shows for this version of Stockade.
    pub fn library() -> &'static Library {
        &scripts::ENGINE_LIBRARY
    }

    /// Connects to Redis. Fails with [`EngineError::Unavailable`] if it
    /// cannot be reached.
    pub async fn connect(
        config: &RedisEngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let connection = SharedConnection::open(config).await?;
        let outbox_index = Arc::new(OutboxIndex::default());
        let layouts = Arc::new(Layouts::new(&config.key_prefix));
        let transfers = Arc::new(Transfers::new(connection.clone()));
        shards::spawn_rebalancer(Arc::downgrade(&transfers), Arc::downgrade(&layouts));
        Ok(Self {
            purchase_script: Arc::new(PurchaseScript {
                connection: connection.clone(),
                layouts: Arc::clone(&layouts),
                clock: Arc::clone(&clock),
                outbox_index: Arc::clone(&outbox_index),
            }),
            purchases: Batcher::new(config.max_batch.min(MAX_BATCH)),
            layouts,
            transfers,
            outbox_index,
            read_entries: OutboxIndex::default(),
            connection,
            key_prefix: config.key_prefix.clone(),
            clock,
        })
    }

    /// The keys of a sale (of its shard 0, when it is sharded), for tools
    /// that inspect or consume them (the outbox reader, fault-injection
    /// tests).
    pub fn keys(&self, sale: &SaleId) -> SaleKeys {
        SaleKeys::new(&self.key_prefix, sale)
    }

    /// How many outbox entries this engine keeps track of (its own
    /// undecided entries, and others' as of its last read of each outbox):
    /// bounded by what the streams hold, never by what they once held.
    pub fn outbox_entries_known(&self) -> usize {
        self.outbox_index.len() + self.read_entries.len()
    }

    /// An identity of the Redis data set that changes whenever the server
    /// restarts or another node takes over: the `run_id` of `INFO server`
    /// (under Sentinel, of the primary the sentinels name now, switching
    /// to it if it moved; on a Cluster, of every primary). The service
    /// compares it over time to know when to rebuild from the store.
    pub async fn server_run_id(&self) -> Result<String, EngineError> {
        self.connection.run_id().await
    }
}

#[async_trait]
impl Engine for RedisEngine {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn can_lag_the_store(&self) -> bool {
        true
    }

    async fn run_id(&self) -> Result<Option<String>, EngineError> {
        self.server_run_id().await.map(Some)
    }

    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        let layout = self.layouts.of_spec(spec);
        let parts = shards::shares(spec.total_stock(), layout.len());
        let part = |shard: u16| layout.is_sharded().then(|| parts[usize::from(shard)]);
        // The sale's own keys first: they judge a conflict before any other
        // shard is written. A creation that stopped half way is completed
        // by the next (each shard's part is fixed).
        let answer = self.create_shard(spec, layout.keys(0), part(0)).await?;
        for (shard, keys) in layout.all().skip(1) {
            self.create_shard(spec, keys, part(shard)).await?;
        }
        Ok(answer)
    }

    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        Ok(self.purchase_at(purchase, self.clock.now()).await?.outcome)
    }

    /// Judged at the batch's reading of the engine's clock (not `now`):
    /// that reading is what it reports, and what its outbox entry says.
    async fn purchase_at(
        &self,
        purchase: &Purchase,
        _now: DateTime<Utc>,
    ) -> Result<Judged, EngineError> {
        let sale = purchase.sale_id();
        let layout = self.layouts.of(&self.connection, sale).await?;
        if !layout.is_sharded() {
            return self.submit(purchase, 0).await;
        }
        let shard = layout.shard_of(purchase.user_id());
        layout.touch(self.clock.now().timestamp_millis());
        let mut tries = 0;
        loop {
            let tried_at = Instant::now();
            let judged = self.submit(purchase, shard).await?;
            tries += 1;
            match judged.outcome {
                // The shard ran empty: fill it before saying so, so that
                // "nothing left" means every shard (a buyer's shard is a
                // lower bound of the sale's stock).
                PurchaseOutcome::Purchased {
                    order_id,
                    remaining: 0,
                } => {
                    let remaining = if self
                        .transfers
                        .refill(sale, &layout, shard, purchase.epoch(), 1, Instant::now())
                        .await
                        .unwrap_or(false)
                    {
                        self.shard_remaining(&layout, shard).await.unwrap_or(0)
                    } else {
                        0
                    };
                    return Ok(Judged {
                        outcome: PurchaseOutcome::Purchased {
                            order_id,
                            remaining,
                        },
                        at: judged.at,
                    });
                }
                PurchaseOutcome::SoldOut | PurchaseOutcome::InsufficientStock { .. }
                    if tries < SHARD_TRIES =>
                {
                    let refilled = self
                        .transfers
                        .refill(
                            sale,
                            &layout,
                            shard,
                            purchase.epoch(),
                            purchase.quantity(),
                            tried_at,
                        )
                        .await?;
                    if !refilled {
                        return Ok(judged);
                    }
                }
                _ => return Ok(judged),
            }
        }
    }

    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError> {
        let mut answers = self.release_many(sale, &[(order, epoch)]).await?;
        answers
            .pop()
            .ok_or_else(|| EngineError::backend("release_many.lua gave no answer"))
    }

    async fn release_many(
        &self,
        sale: &SaleId,
        releases: &[(OrderId, Epoch)],
    ) -> Result<Vec<ReleaseOutcome>, EngineError> {
        if releases.is_empty() {
            return Ok(Vec::new());
        }
        let layout = self.layouts.of(&self.connection, sale).await?;
        self.release_in(&layout, releases).await
    }

    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        let keys = self.keys(sale);
        let (total, epoch): (Option<String>, Option<i64>) = redis::cmd("HMGET")
            .arg(&keys.sale)
            .arg(&["total", "epoch"])
            .query_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        match total {
            None => Ok(None),
            Some(_) => codes::epoch(epoch.unwrap_or(0), "the sale hash").map(Some),
        }
    }

    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        // Every shard closes; the sale's own keys answer.
        let mut held = -1;
        for (shard, keys) in layout.all() {
            let mut invocation = CLOSE.prepare_invoke();
            invocation.key(&keys.sale);
            let answer: i64 = invocation
                .invoke_async(&mut self.connection.clone())
                .await
                .map_err(redis_error)?;
            if shard == 0 {
                held = answer;
            }
        }
        if held < 0 {
            return Ok(None);
        }
        codes::epoch(held, "close.lua").map(Some)
    }

    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        let hashes = shards::hashes(&self.connection, &layout).await?;
        let now = self.clock.now();
        let Some(snapshot) = snapshot::from_hash(sale, &hashes[0], now)? else {
            return Ok(None);
        };
        if !layout.is_sharded() {
            return Ok(Some(snapshot));
        }
        let remaining = shards::remaining_of(&hashes)?;
        Ok(Some(SaleSnapshot::at(snapshot.spec, &[remaining], now)))
    }

    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        let held: Option<u32> = self
            .connection
            .clone()
            .hget(&layout.keys(layout.shard_of(user)).holdings, user.as_str())
            .await
            .map_err(redis_error)?;
        Ok(held.unwrap_or(0))
    }

    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        let mut orders = Vec::new();
        for (shard, keys) in layout.all() {
            orders.extend(self.outbox_of(sale, shard, keys).await?);
        }
        if layout.is_sharded() {
            // Oldest first: each shard's in its order, the shards merged by
            // the millisecond (the shards share no finer clock).
            orders.sort_by_key(|order| order.created_at);
        }
        Ok(orders)
    }

    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        for (shard, keys) in layout.all() {
            self.acknowledge_on(sale, shard, keys, orders).await?;
        }
        Ok(())
    }

    async fn retire(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), EngineError> {
        let layout = self.layouts.of(&self.connection, sale).await?;
        for (shard, keys) in layout.all() {
            let mut invocation = RETIRE.prepare_invoke();
            for key in keys.all() {
                invocation.key(key);
            }
            invocation.arg(u64::try_from(after.as_millis()).unwrap_or(u64::MAX));
            let _found: i64 = invocation
                .invoke_async(&mut self.connection.clone())
                .await
                .map_err(redis_error)?;
            if after.is_zero() {
                self.outbox_index.forget(&(sale.clone(), shard));
            }
        }
        if after.is_zero() {
            self.layouts.forget(sale);
        }
        Ok(())
    }

    async fn rebuild(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError> {
        let plan = RebuildPlan::new(spec, orders)?;
        self.rebuild_from(spec, epoch, &plan).await
    }
}

impl RedisEngine {
    /// The stock left in one shard.
    async fn shard_remaining(
        &self,
        layout: &shards::Layout,
        shard: u16,
    ) -> Result<u32, EngineError> {
        let remaining: Option<u32> = self
            .connection
            .clone()
            .hget(&layout.keys(shard).sale, "remaining")
            .await
            .map_err(redis_error)?;
        Ok(remaining.unwrap_or(0))
    }

    /// Queues `purchase` for its shard's next purchase.lua batch.
    async fn submit(&self, purchase: &Purchase, shard: u16) -> Result<Judged, EngineError> {
        self.purchases
            .submit(
                (purchase.sale_id().clone(), shard, purchase.epoch()),
                BatchedPurchase::new(purchase),
                &self.purchase_script,
            )
            .await
    }

    /// create_sale.lua on one shard's keys; `part` is the shard's part of
    /// the stock (None: the sale is not sharded).
    async fn create_shard(
        &self,
        spec: &SaleSpec,
        keys: &SaleKeys,
        part: Option<u32>,
    ) -> Result<CreateOutcome, EngineError> {
        let mut invocation = CREATE_SALE.prepare_invoke();
        invocation.key(&keys.sale);
        for field in codec::spec_fields(spec) {
            invocation.arg(field);
        }
        for (field, left) in codec::sold_fields(spec, &SoldCounts::new(spec)) {
            invocation.arg(field).arg(left);
        }
        if let Some(part) = part {
            invocation.arg("remaining").arg(part);
        }
        let reply: Vec<String> = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        match reply.first().map(String::as_str) {
            Some("created") => Ok(CreateOutcome::Created),
            Some("exists") => Ok(CreateOutcome::AlreadyExists),
            Some("conflict") => {
                CreateOutcome::for_existing(spec, codec::spec_from_fields(spec.id(), &reply[1..])?)
            }
            _ => Err(EngineError::backend(format!(
                "unexpected reply from create_sale.lua: {reply:?}"
            ))),
        }
    }
}
