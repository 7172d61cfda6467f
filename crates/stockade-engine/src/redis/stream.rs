//! Reading and trimming the outbox streams (one per shard): the orders
//! still to be committed, and the entries whose orders are all decided.

use stockade_core::{EngineError, Order, OrderId, SaleId};

use super::keys::SaleKeys;
use super::outbox::Stream;
use super::scripts::redis_error;
use super::{RedisEngine, codec};

impl RedisEngine {
    /// The undecided orders of one shard's outbox.
    pub(super) async fn outbox_of(
        &self,
        sale: &SaleId,
        shard: u16,
        keys: &SaleKeys,
    ) -> Result<Vec<Order>, EngineError> {
        let stream: Stream = (sale.clone(), shard);
        let entries: redis::streams::StreamRangeReply =
            redis::AsyncCommands::xrange_all(&mut self.connection.clone(), &keys.outbox)
                .await
                .map_err(redis_error)?;
        let mut orders = Vec::new();
        // Others' entries are known as they are in the stream now.
        let present = entries.ids.iter().map(|e| e.id.as_str()).collect();
        self.read_entries.keep_only(&stream, &present);
        for entry in &entries.ids {
            let carried = codec::orders_from_entry(sale, entry)?;
            let index = if self.outbox_index.knows(&stream, &entry.id) {
                &*self.outbox_index
            } else {
                let ids: Vec<OrderId> = carried.iter().map(|order| order.id).collect();
                self.read_entries.record(&stream, &entry.id, &ids);
                &self.read_entries
            };
            // Orders of the entry this process acknowledged already are
            // decided: leave them out.
            orders.extend(
                carried
                    .into_iter()
                    .filter(|order| index.is_undecided(&stream, &entry.id, &order.id)),
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
            self.acknowledge_on(sale, shard, keys, &released).await?;
            orders.retain(|order| !released.contains(&order.id));
        }
        Ok(orders)
    }

    /// Marks `orders` decided in one shard's outbox, deleting the entries
    /// left with no undecided order. Orders of other shards are ignored.
    pub(super) async fn acknowledge_on(
        &self,
        sale: &SaleId,
        shard: u16,
        keys: &SaleKeys,
        orders: &[OrderId],
    ) -> Result<(), EngineError> {
        let stream: Stream = (sale.clone(), shard);
        let mut finished = self.outbox_index.settle(&stream, orders);
        finished.extend(self.read_entries.settle(&stream, orders));
        if finished.is_empty() {
            return Ok(());
        }
        let _removed: i64 =
            redis::AsyncCommands::xdel(&mut self.connection.clone(), &keys.outbox, &finished)
                .await
                .map_err(redis_error)?;
        Ok(())
    }
}

/// Whether an orders-hash record (`quantity:state:user\nitems`) is released.
fn is_released(record: &str) -> bool {
    record.split(':').nth(1) == Some("r")
}
