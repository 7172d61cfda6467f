//! Rebuilding a sale from the store's orders: begin, bounded chunks,
//! finish, each fenced by the epoch, on every shard.
//!
//! A sharded sale's orders go to their buyers' shards (with their holdings
//! and keys), and the stock left is split evenly over the shards.

use stockade_core::{EngineError, UserId};
use stockade_core::{Epoch, Item, RebuildPlan, SaleSnapshot, SaleSpec, rule};

use super::keys::SaleKeys;
use super::scripts::{REBUILD_BEGIN, REBUILD_CHUNK, REBUILD_FINISH, redis_error};
use super::{REBUILD_CHUNK_ENTRIES, RedisEngine, codec, codes, shards};

/// What one shard is rebuilt with.
#[derive(Default)]
struct ShardState {
    /// Holdings fields (user, or user `\n` SKU) and items held.
    holdings: Vec<(String, u32)>,
    /// Keys fields and their orders.
    keys: Vec<(String, String)>,
    /// Order ids and their records.
    orders: Vec<(String, String)>,
}

impl RedisEngine {
    /// Replaces the sale's state in Redis with `plan`, under `epoch`.
    pub(super) async fn rebuild_from(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        plan: &RebuildPlan,
    ) -> Result<SaleSnapshot, EngineError> {
        let layout = self.layouts.of_spec(spec);
        let mut states: Vec<ShardState> =
            (0..layout.len()).map(|_| ShardState::default()).collect();
        let shard_of = |user: &UserId| usize::from(layout.shard_of(user));
        for (user, held) in &plan.holdings {
            states[shard_of(user)]
                .holdings
                .push((user.to_string(), *held));
        }
        for ((user, sku), held) in &plan.sku_holdings {
            states[shard_of(user)]
                .holdings
                .push((format!("{user}\n{}", spec.skus()[*sku].id), *held));
        }
        for (user, key, order_id) in &plan.keys {
            states[shard_of(user)]
                .keys
                .push((codec::key_field(user, key), order_id.to_string()));
        }
        for order in &plan.orders {
            let state = if order.live { 'l' } else { 'r' };
            let items = rule::order_items(spec, &order.items);
            states[shard_of(&order.user_id)].orders.push((
                order.id.to_string(),
                format!(
                    "{}:{state}:{}\n{}\n{}",
                    order.quantity,
                    order.user_id,
                    Item::encode_list(&items),
                    order.tier.map_or_else(String::new, |t| t.to_string())
                ),
            ));
        }
        let sold = codec::sold_fields(spec, &plan.sold);
        let parts = shards::shares(plan.remaining, layout.len());
        for ((shard, keys), state) in layout.all().zip(&states) {
            self.rebuild_shard(keys, spec, epoch, state, parts[usize::from(shard)], &sold)
                .await?;
            // The outbox was replaced with an empty one.
            let stream = (spec.id().clone(), shard);
            self.outbox_index.forget(&stream);
            self.read_entries.forget(&stream);
        }
        Ok(SaleSnapshot::at(
            spec.clone(),
            &plan.sku_remaining,
            self.clock.now(),
        ))
    }

    /// Rebuilds one shard's keys: begin, chunks, finish.
    async fn rebuild_shard(
        &self,
        keys: &SaleKeys,
        spec: &SaleSpec,
        epoch: Epoch,
        state: &ShardState,
        remaining: u32,
        sold: &[(String, u32)],
    ) -> Result<(), EngineError> {
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
        // The state goes in bounded chunks: holdings, then keys, then orders.
        let (mut next_holding, mut next_key, mut next_order) = (0, 0, 0);
        while next_holding < state.holdings.len()
            || next_key < state.keys.len()
            || next_order < state.orders.len()
        {
            let mut budget = REBUILD_CHUNK_ENTRIES;
            let holding_end = (next_holding + budget).min(state.holdings.len());
            budget -= holding_end - next_holding;
            let key_end = (next_key + budget).min(state.keys.len());
            budget -= key_end - next_key;
            let order_end = (next_order + budget).min(state.orders.len());
            let mut chunk = REBUILD_CHUNK.prepare_invoke();
            chunk
                .key(&keys.sale)
                .key(&keys.holdings)
                .key(&keys.keys)
                .key(&keys.orders)
                .arg(epoch.get())
                .arg(holding_end - next_holding)
                .arg(key_end - next_key);
            for (field, held) in &state.holdings[next_holding..holding_end] {
                chunk.arg(field).arg(*held);
            }
            for (field, order_id) in &state.keys[next_key..key_end] {
                chunk.arg(field).arg(order_id);
            }
            for (id, record) in &state.orders[next_order..order_end] {
                chunk.arg(id).arg(record);
            }
            self.rebuild_step(chunk, spec, epoch, "rebuild_chunk.lua")
                .await?;
            (next_holding, next_key, next_order) = (holding_end, key_end, order_end);
        }
        let mut finish = REBUILD_FINISH.prepare_invoke();
        finish.key(&keys.sale).arg(epoch.get()).arg(remaining);
        for (field, left) in sold {
            finish.arg(field).arg(left);
        }
        self.rebuild_step(finish, spec, epoch, "rebuild_finish.lua")
            .await?;
        Ok(())
    }

    /// Runs one fenced rebuild script: `{1, value}` goes on, `{0, newer}`
    /// means another rebuild under a newer epoch took over.
    async fn rebuild_step(
        &self,
        invocation: super::ScriptInvocation<'_>,
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
