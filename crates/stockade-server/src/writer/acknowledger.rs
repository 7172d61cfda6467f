//! The acknowledger: removes decided orders from the engine's outbox, off
//! the commit path.

use std::collections::HashMap;
use std::sync::Arc;
use stockade_core::{Engine, Order, OrderId, SaleId};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How many committed batches may wait for the acknowledger.
const ACK_QUEUE: usize = 64;
/// At most this many order ids per acknowledge call: keeps one engine call
/// (one Redis script with an argument per id) bounded.
const ACK_CHUNK: usize = 2_000;

/// Decided orders of one batch, per sale.
type Decided = Vec<(SaleId, Vec<OrderId>)>;

/// The handle commits use to have decided orders removed from the engine's
/// outbox by the one acknowledger task. Cheap to clone.
#[derive(Clone)]
pub(super) struct Acknowledger {
    sender: mpsc::Sender<Decided>,
}

impl Acknowledger {
    /// Starts the acknowledger task; it ends once every handle is dropped
    /// and what was queued is acknowledged.
    pub(super) fn start(engine: Arc<dyn Engine>) -> (Self, JoinHandle<()>) {
        let (sender, receiver) = mpsc::channel(ACK_QUEUE);
        let task = crate::tasks::spawn(acknowledge_forever(engine, receiver));
        (Self { sender }, task)
    }

    /// Queues decided (committed or void) orders for acknowledgement,
    /// without waiting. When the acknowledger is that far behind (the
    /// engine slow or unreachable), the orders are dropped and counted in
    /// `stockade_writer_acks_dropped_total`: that is safe, because they
    /// stay in the engine's outbox, where the reconciler's outbox sweep
    /// finds them, commits them again (the store answers with each one's
    /// recorded verdict, changing nothing) and acknowledges them then.
    pub(super) fn acknowledge(&self, orders: &[Order]) {
        let mut by_sale: HashMap<&SaleId, Vec<OrderId>> = HashMap::new();
        for order in orders {
            by_sale.entry(&order.sale_id).or_default().push(order.id);
        }
        let decided: Decided = by_sale
            .into_iter()
            .map(|(sale, ids)| (sale.clone(), ids))
            .collect();
        if let Err(error) = self.sender.try_send(decided) {
            let dropped = match &error {
                mpsc::error::TrySendError::Full(decided)
                | mpsc::error::TrySendError::Closed(decided) => {
                    decided.iter().map(|(_, ids)| ids.len()).sum::<usize>()
                }
            };
            metrics::counter!("stockade_writer_acks_dropped_total").increment(dropped as u64);
            tracing::debug!(
                orders = dropped,
                "acknowledger behind; the reconciler will acknowledge these orders"
            );
        }
    }
}

/// Takes whatever batches are queued, merges their orders per sale, and
/// acknowledges each sale's orders in as few engine calls as it can.
async fn acknowledge_forever(engine: Arc<dyn Engine>, mut receiver: mpsc::Receiver<Decided>) {
    let mut queued = Vec::with_capacity(ACK_QUEUE);
    while receiver.recv_many(&mut queued, ACK_QUEUE).await > 0 {
        let mut by_sale: HashMap<SaleId, Vec<OrderId>> = HashMap::new();
        for (sale, ids) in queued.drain(..).flatten() {
            by_sale.entry(sale).or_default().extend(ids);
        }
        for (sale, ids) in by_sale {
            for chunk in ids.chunks(ACK_CHUNK) {
                // A failure only leaves entries the reconciler will find
                // decided.
                if let Err(error) = engine.acknowledge(&sale, chunk).await {
                    tracing::warn!(%sale, %error, "could not acknowledge decided orders");
                }
            }
        }
    }
}
