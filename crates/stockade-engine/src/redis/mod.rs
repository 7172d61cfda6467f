//! The Redis engine: every operation is one server-side Lua script (kept in
//! `lua/*.lua`), run as a function of a versioned Redis Functions library
//! (Redis 7 and later) or with EVALSHA (Redis 6, or forced), and reloaded
//! transparently after `FUNCTION FLUSH`, `SCRIPT FLUSH` or a restart.
//!
//! Purchases are micro-batched ([`crate::batching`]): the purchases of one
//! sale that arrive while its script call is in flight go together in the
//! next call, which decides each in arrival order and writes one outbox
//! entry for the batch. An idle sale's purchase is sent at once.
//!
//! All requests share one multiplexed connection. Time comes from the
//! engine's clock and is passed to the scripts, so every instance of the
//! service judges windows by its own clock (keep clocks in sync with NTP).
//!
//! # Layout
//! - `config`: [`RedisEngineConfig`]; [`topology`]: standalone, Sentinel or
//!   Cluster, from a URL; `connection`, `sentinel`: reaching it.
//! - [`keys`]: the key layout; `scripts`: the Lua scripts; `codec`: their
//!   replies.
//! - [`library`]: scripts as one versioned Functions library per owner
//!   (FCALL) or one by one (EVALSHA), as the connection chose; the
//!   waiting room and the rate limiter run theirs through it too.
//!   `scripts_mode`: [`ScriptsMode`] (`--redis-scripts`) and the
//!   per-connection [`ScriptRunner`] it chooses when connecting.
//! - `purchase_batch`: one `purchase.lua` call per micro-batch.
//! - `outbox`: this process's and others' outbox entries.
//! - `snapshot`: a sale's snapshot from its sale hash.

mod codec;
mod config;
mod connection;
pub mod keys;
pub mod library;
mod outbox;
mod purchase_batch;
mod scripts;
mod scripts_mode;
mod sentinel;
mod snapshot;
pub mod topology;

use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;
use stockade_core::rule;
use stockade_core::{
    Clock, CreateOutcome, Engine, EngineError, Epoch, Item, Order, OrderId, Purchase,
    PurchaseOutcome, RebuildPlan, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, SoldCounts,
    UserId,
};

use crate::batching::{BatchedPurchase, Batcher};
use crate::codes;
pub use config::{DEFAULT_MAX_BATCH, REBUILD_CHUNK_ENTRIES, RedisEngineConfig};
pub use connection::SharedConnection;
pub use keys::SaleKeys;
pub use library::{Library, LibraryScript, ScriptInvocation};
use outbox::OutboxIndex;
use purchase_batch::PurchaseScript;
use scripts::{
    CLOSE, CREATE_SALE, REBUILD_BEGIN, REBUILD_CHUNK, REBUILD_FINISH, RELEASE_MANY, RETIRE,
    redis_error,
};
pub use scripts_mode::{ScriptRunner, ScriptsMode};
pub use topology::{RedisTopology, RedisUrlError};

/// Sales held in Redis.
pub struct RedisEngine {
    connection: SharedConnection,
    key_prefix: String,
    clock: Arc<dyn Clock>,
    purchases: Batcher<(SaleId, Epoch), BatchedPurchase, PurchaseOutcome>,
    purchase_script: Arc<PurchaseScript>,
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
        Ok(Self {
            purchase_script: Arc::new(PurchaseScript {
                connection: connection.clone(),
                key_prefix: config.key_prefix.clone(),
                clock: Arc::clone(&clock),
                outbox_index: Arc::clone(&outbox_index),
            }),
            purchases: Batcher::new(config.max_batch),
            outbox_index,
            read_entries: OutboxIndex::default(),
            connection,
            key_prefix: config.key_prefix.clone(),
            clock,
        })
    }

    /// The keys of a sale, for tools that inspect or consume them (the
    /// outbox reader, fault-injection tests).
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

    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        let keys = self.keys(spec.id());
        let mut invocation = CREATE_SALE.prepare_invoke();
        invocation.key(&keys.sale);
        for field in codec::spec_fields(spec) {
            invocation.arg(field);
        }
        for (field, left) in codec::sold_fields(spec, &SoldCounts::new(spec)) {
            invocation.arg(field).arg(left);
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

    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        self.purchases
            .submit(
                (purchase.sale_id().clone(), purchase.epoch()),
                BatchedPurchase::new(purchase),
                &self.purchase_script,
            )
            .await
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
        let keys = self.keys(sale);
        let mut invocation = RELEASE_MANY.prepare_invoke();
        invocation
            .key(&keys.sale)
            .key(&keys.holdings)
            .key(&keys.orders)
            .arg(releases.len());
        for (order, epoch) in releases {
            invocation.arg(order.to_string()).arg(epoch.get());
        }
        let reply: Vec<i64> = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        if reply.len() != 3 * releases.len() {
            return Err(EngineError::backend(format!(
                "release_many.lua gave {} values for {} releases",
                reply.len(),
                releases.len()
            )));
        }
        reply
            .chunks_exact(3)
            .map(|answer| codes::release(answer[0], answer[1], answer[2], "release_many.lua"))
            .collect()
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
        let mut invocation = CLOSE.prepare_invoke();
        invocation.key(self.keys(sale).sale);
        let held: i64 = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        if held < 0 {
            return Ok(None);
        }
        codes::epoch(held, "close.lua").map(Some)
    }

    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        let keys = self.keys(sale);
        // One HGETALL is atomic: the spec and the stock are read together.
        let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys.sale)
            .query_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        snapshot::from_hash(sale, &fields, self.clock.now())
    }

    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        let held: Option<u32> = self
            .connection
            .clone()
            .hget(self.keys(sale).holdings, user.as_str())
            .await
            .map_err(redis_error)?;
        Ok(held.unwrap_or(0))
    }

    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        let keys = self.keys(sale);
        let entries: redis::streams::StreamRangeReply = self
            .connection
            .clone()
            .xrange_all(&keys.outbox)
            .await
            .map_err(redis_error)?;
        let mut orders = Vec::new();
        // Others' entries are known as they are in the stream now.
        let present = entries.ids.iter().map(|e| e.id.as_str()).collect();
        self.read_entries.keep_only(sale, &present);
        for entry in &entries.ids {
            let carried = codec::orders_from_entry(sale, entry)?;
            let index = if self.outbox_index.knows(sale, &entry.id) {
                &*self.outbox_index
            } else {
                let ids: Vec<OrderId> = carried.iter().map(|order| order.id).collect();
                self.read_entries.record(sale, &entry.id, &ids);
                &self.read_entries
            };
            // Orders of the entry this process acknowledged already are
            // decided: leave them out.
            orders.extend(
                carried
                    .into_iter()
                    .filter(|order| index.is_undecided(sale, &entry.id, &order.id)),
            );
        }
        if orders.is_empty() {
            return Ok(orders);
        }
        // Released orders are never to be committed: leave them out, and
        // count them decided so their entries can go.
        let records: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(&keys.orders)
            .arg(orders.iter().map(|o| o.id.to_string()).collect::<Vec<_>>())
            .query_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        let released: Vec<OrderId> = orders
            .iter()
            .zip(&records)
            .filter(|(_, record)| record.as_deref().is_some_and(is_released))
            .map(|(order, _)| order.id)
            .collect();
        if !released.is_empty() {
            self.acknowledge(sale, &released).await?;
            orders.retain(|order| !released.contains(&order.id));
        }
        Ok(orders)
    }

    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError> {
        let mut finished = self.outbox_index.settle(sale, orders);
        finished.extend(self.read_entries.settle(sale, orders));
        if finished.is_empty() {
            return Ok(());
        }
        let _removed: i64 = self
            .connection
            .clone()
            .xdel(self.keys(sale).outbox, &finished)
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    async fn retire(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), EngineError> {
        let keys = self.keys(sale);
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
            self.outbox_index.forget(sale);
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
        let keys = self.keys(spec.id());
        let mut begin = REBUILD_BEGIN.prepare_invoke();
        for key in keys.all() {
            begin.key(key);
        }
        begin.arg(epoch.get());
        for field in codec::spec_fields(spec) {
            begin.arg(field);
        }
        self.rebuild_step(begin, spec, epoch, "rebuild_begin.lua")
            .await?;
        // The outbox was replaced with an empty one.
        self.outbox_index.forget(spec.id());
        self.read_entries.forget(spec.id());
        // The state goes in bounded chunks: holdings, then keys, then orders.
        let holdings: Vec<(String, u32)> =
            plan.holdings
                .iter()
                .map(|(user, held)| (user.to_string(), *held))
                .chain(plan.sku_holdings.iter().map(|((user, sku), held)| {
                    (format!("{user}\n{}", spec.skus()[*sku].id), *held)
                }))
                .collect();
        let order_records: Vec<(String, String)> = plan
            .orders
            .iter()
            .map(|order| {
                let state = if order.live { 'l' } else { 'r' };
                let items = rule::order_items(spec, &order.items);
                (
                    order.id.to_string(),
                    format!(
                        "{}:{state}:{}\n{}\n{}",
                        order.quantity,
                        order.user_id,
                        Item::encode_list(&items),
                        order.tier.map_or_else(String::new, |t| t.to_string())
                    ),
                )
            })
            .collect();
        let mut next_holding = 0;
        let mut next_key = 0;
        let mut next_order = 0;
        while next_holding < holdings.len()
            || next_key < plan.keys.len()
            || next_order < order_records.len()
        {
            let mut budget = REBUILD_CHUNK_ENTRIES;
            let holding_end = (next_holding + budget).min(holdings.len());
            budget -= holding_end - next_holding;
            let key_end = (next_key + budget).min(plan.keys.len());
            budget -= key_end - next_key;
            let order_end = (next_order + budget).min(order_records.len());
            let mut chunk = REBUILD_CHUNK.prepare_invoke();
            chunk
                .key(&keys.sale)
                .key(&keys.holdings)
                .key(&keys.keys)
                .key(&keys.orders)
                .arg(epoch.get())
                .arg(holding_end - next_holding)
                .arg(key_end - next_key);
            for (field, held) in &holdings[next_holding..holding_end] {
                chunk.arg(field).arg(*held);
            }
            for (user, key, order_id) in &plan.keys[next_key..key_end] {
                chunk
                    .arg(codec::key_field(user, key))
                    .arg(order_id.to_string());
            }
            for (id, record) in &order_records[next_order..order_end] {
                chunk.arg(id).arg(record);
            }
            self.rebuild_step(chunk, spec, epoch, "rebuild_chunk.lua")
                .await?;
            (next_holding, next_key, next_order) = (holding_end, key_end, order_end);
        }
        let mut finish = REBUILD_FINISH.prepare_invoke();
        finish.key(&keys.sale).arg(epoch.get()).arg(plan.remaining);
        for (field, left) in codec::sold_fields(spec, &plan.sold) {
            finish.arg(field).arg(left);
        }
        self.rebuild_step(finish, spec, epoch, "rebuild_finish.lua")
            .await?;
        Ok(SaleSnapshot::at(
            spec.clone(),
            &plan.sku_remaining,
            self.clock.now(),
        ))
    }
}

/// Whether an orders-hash record (`quantity:state:user\nitems`) is released.
fn is_released(record: &str) -> bool {
    record.split(':').nth(1) == Some("r")
}

impl RedisEngine {
    /// Runs one fenced rebuild script: `{1, value}` goes on, `{0, newer}`
    /// means another rebuild under a newer epoch took over.
    async fn rebuild_step(
        &self,
        invocation: ScriptInvocation<'_>,
        spec: &SaleSpec,
        epoch: Epoch,
        script: &str,
    ) -> Result<i64, EngineError> {
        let (applied, value): (i64, i64) = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        if applied == 1 {
            return Ok(value);
        }
        let newer = codes::epoch(value, script)?;
        if newer <= epoch {
            // Not a newer rebuild: the state being built is gone.
            return Err(EngineError::Unavailable(
                format!(
                    "the state of sale {} vanished during its rebuild (Redis restarted?)",
                    spec.id()
                )
                .into(),
            ));
        }
        Err(EngineError::Superseded {
            sale_id: spec.id().clone(),
            epoch,
            newer,
        })
    }
}
