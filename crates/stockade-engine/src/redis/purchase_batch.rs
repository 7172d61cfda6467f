//! One purchase.lua call per micro-batch of one shard of a sale (the sale
//! itself when it is not sharded) under one epoch.

use std::sync::Arc;

use chrono::DateTime;
use stockade_core::{Clock, EngineError, Epoch, Judged, OrderId, PurchaseOutcome, SaleId};
use tracing::Instrument as _;

use super::SharedConnection;
use super::outbox::OutboxIndex;
use super::scripts::{PURCHASE, redis_error};
use super::shards::Layouts;
use crate::batching::{BatchRunner, BatchedPurchase, batch_span};
use crate::codes;

/// What purchases are batched by: the sale, its shard, the epoch.
pub(super) type BatchKey = (SaleId, u16, Epoch);

/// Runs purchase.lua for a batch of one shard under one epoch.
pub(super) struct PurchaseScript {
    pub(super) connection: SharedConnection,
    pub(super) layouts: Arc<Layouts>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) outbox_index: Arc<OutboxIndex>,
}

impl BatchRunner<BatchKey, BatchedPurchase, Judged> for PurchaseScript {
    async fn run(
        &self,
        key: &BatchKey,
        purchases: Vec<BatchedPurchase>,
    ) -> Result<Vec<Judged>, EngineError> {
        let span = batch_span("redis", "purchase.lua", &key.0, key.2, &purchases);
        self.call(key, purchases).instrument(span).await
    }
}

impl PurchaseScript {
    /// One purchase.lua call for the batch, judged at one reading of the
    /// clock, which each answer reports.
    async fn call(
        &self,
        (sale, shard, epoch): &BatchKey,
        purchases: Vec<BatchedPurchase>,
    ) -> Result<Vec<Judged>, EngineError> {
        let layout = self.layouts.known_or_own(sale);
        if *shard >= layout.len() {
            return Err(EngineError::Unavailable(
                format!("shard {shard} of sale {sale} is not known here").into(),
            ));
        }
        let keys = layout.keys(*shard);
        let mut invocation = PURCHASE.prepare_invoke();
        for key in keys.all() {
            invocation.key(key);
        }
        let now = self.clock.now().timestamp_millis();
        let at = DateTime::from_timestamp_millis(now)
            .ok_or_else(|| EngineError::backend(format!("the clock reads {now} ms")))?;
        invocation.arg(now).arg(purchases.len()).arg(epoch.get());
        // Items and tiers travel only in a batch that has some: most
        // batches buy the only SKU of a sale without tiers.
        let plain = purchases
            .iter()
            .all(|p| p.items.is_empty() && p.tier.is_empty());
        for purchase in &purchases {
            invocation
                .arg(purchase.user.as_str())
                .arg(purchase.quantity)
                .arg(purchase.key.as_ref().map_or("", |k| k.as_str()))
                .arg(purchase.order_id.to_string());
            if !plain {
                invocation.arg(&purchase.items).arg(&purchase.tier);
            }
        }
        let reply: Vec<redis::Value> = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        let malformed =
            || EngineError::backend(format!("purchase.lua gave a malformed reply: {reply:?}"));
        let (entry, answers) = reply.split_first().ok_or_else(malformed)?;
        if answers.len() != 2 * purchases.len() {
            return Err(malformed());
        }
        let outcomes = purchases
            .iter()
            .zip(answers.chunks_exact(2))
            .map(|(purchase, answer)| {
                let code = reply_int(&answer[0]).ok_or_else(malformed)?;
                let value = match reply_int(&answer[1]) {
                    Some(number) => codes::Value::Number(number),
                    None => codes::Value::Text(reply_text(&answer[1]).ok_or_else(malformed)?),
                };
                codes::purchase(code, value, purchase.order_id, "purchase.lua")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let accepted: Vec<OrderId> = outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                PurchaseOutcome::Purchased { order_id, .. } => Some(*order_id),
                _ => None,
            })
            .collect();
        if !accepted.is_empty() {
            let entry = reply_text(entry).ok_or_else(malformed)?;
            self.outbox_index
                .record(&(sale.clone(), *shard), &entry, &accepted);
        }
        Ok(outcomes
            .into_iter()
            .map(|outcome| Judged { outcome, at })
            .collect())
    }
}

fn reply_int(value: &redis::Value) -> Option<i64> {
    match value {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn reply_text(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        redis::Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}
