//! The group-commit writer: handlers hand it accepted orders, it commits them
//! to the store in batches (bounded by size and by time), one transaction
//! per batch, then acknowledges them in the engine's outbox and tells each
//! waiting handler its order's own verdict: committed, or void (the store
//! refused that one order; the rest of the batch commits).
//!
//! Under a stampede this turns thousands of commits into a few dozen, which
//! is what lets a durable store keep up with an in-memory or Redis engine.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use stockade_core::{Engine, Order, OrderId, SaleId};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::store::arbiter::Verdict;
use crate::store::{OrderStore, StoreError};

/// How batches are formed.
#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    /// At most this many orders per transaction.
    pub max_batch: usize,
    /// After the first order of a batch arrives, wait at most this long for
    /// more before committing.
    pub max_delay: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_batch: 512,
            max_delay: Duration::from_millis(2),
        }
    }
}

/// The result a handler waits for: its order's verdict, or the error that
/// failed its whole batch (the store unavailable: nothing committed).
pub type CommitResult = Result<Verdict, Arc<StoreError>>;

struct Job {
    order: Order,
    done: oneshot::Sender<CommitResult>,
}

/// The handle handlers use to submit orders. Cheap to clone.
#[derive(Clone)]
pub struct CommitQueue {
    sender: mpsc::Sender<Job>,
    in_flight: Arc<DashMap<OrderId, Order>>,
}

impl std::fmt::Debug for CommitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitQueue")
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl CommitQueue {
    /// Starts the writer task. It stops, after committing everything queued,
    /// once every `CommitQueue` clone is dropped.
    pub fn start(
        store: OrderStore,
        engine: Option<Arc<dyn Engine>>,
        config: WriterConfig,
    ) -> (Self, JoinHandle<()>) {
        let (sender, receiver) = mpsc::channel(config.max_batch.max(1) * 16);
        let in_flight = Arc::new(DashMap::new());
        let task = tokio::spawn(write_batches(
            receiver,
            store,
            engine,
            config,
            Arc::clone(&in_flight),
        ));
        (Self { sender, in_flight }, task)
    }

    /// Queues an order for commit; the receiver completes when its batch is
    /// committed (or failed).
    pub async fn submit(&self, order: Order) -> oneshot::Receiver<CommitResult> {
        let (done, result) = oneshot::channel();
        self.in_flight.insert(order.id, order.clone());
        metrics::gauge!("stockade_writer_queue_depth").increment(1.0);
        if let Err(mpsc::error::SendError(job)) = self.sender.send(Job { order, done }).await {
            // The writer has stopped (shutting down): say so to the waiter.
            self.in_flight.remove(&job.order.id);
            metrics::gauge!("stockade_writer_queue_depth").decrement(1.0);
            let _ = job.done.send(Err(Arc::new(StoreError::Failed(
                "the order writer has stopped".into(),
            ))));
        }
        result
    }

    /// How many orders are waiting for their commit.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// An order accepted by the engine whose commit is still under way.
    pub fn in_flight(&self, id: OrderId) -> Option<Order> {
        self.in_flight.get(&id).map(|o| o.clone())
    }
}

async fn write_batches(
    mut receiver: mpsc::Receiver<Job>,
    store: OrderStore,
    engine: Option<Arc<dyn Engine>>,
    config: WriterConfig,
    in_flight: Arc<DashMap<OrderId, Order>>,
) {
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + config.max_delay;
        while batch.len() < config.max_batch {
            match receiver.try_recv() {
                Ok(job) => batch.push(job),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, receiver.recv()).await {
                        Ok(Some(job)) => batch.push(job),
                        _ => break,
                    }
                }
            }
        }
        commit_batch(batch, &store, engine.as_ref(), &in_flight).await;
    }
}

async fn commit_batch(
    batch: Vec<Job>,
    store: &OrderStore,
    engine: Option<&Arc<dyn Engine>>,
    in_flight: &DashMap<OrderId, Order>,
) {
    let (orders, waiters): (Vec<Order>, Vec<_>) =
        batch.into_iter().map(|job| (job.order, job.done)).unzip();
    metrics::histogram!("stockade_writer_batch_size").record(orders.len() as f64);
    let started = Instant::now();
    let result = store.commit(&orders).await.map_err(Arc::new);
    metrics::histogram!("stockade_store_commit_seconds").record(started.elapsed().as_secs_f64());
    match &result {
        Ok(verdicts) => {
            log_voids(&orders, verdicts);
            // Off the commit path: an engine that is slow to answer (Redis
            // frozen) must not hold up the next batch's commit.
            if let Some(engine) = engine {
                let engine = Arc::clone(engine);
                let decided = orders.clone();
                tokio::spawn(async move { acknowledge(engine.as_ref(), &decided).await });
            }
        }
        Err(error) => tracing::warn!(
            orders = orders.len(),
            %error,
            "batch commit failed; the orders stay in the engine's outbox for the reconciler"
        ),
    }
    metrics::gauge!("stockade_writer_queue_depth").decrement(orders.len() as f64);
    for (index, (order, done)) in orders.iter().zip(waiters).enumerate() {
        in_flight.remove(&order.id);
        let answer = match &result {
            Ok(verdicts) => Ok(verdicts[index]),
            Err(error) => Err(Arc::clone(error)),
        };
        // The handler may have given up waiting (deadline): that is fine.
        let _ = done.send(answer);
    }
}

/// Counts and logs the orders the store refused: each is a sign that an
/// engine was out of line (or superseded), so they are logged at warn.
pub(crate) fn log_voids(orders: &[Order], verdicts: &[Verdict]) {
    for (order, verdict) in orders.iter().zip(verdicts) {
        if let Verdict::Void(reason) = verdict {
            metrics::counter!("stockade_orders_voided_total", "reason" => reason.label())
                .increment(1);
            tracing::warn!(
                sale = %order.sale_id,
                order = %order.id,
                epoch = %order.epoch,
                reason = reason.label(),
                "the store refused an order the engine had accepted; nothing was sold"
            );
        }
    }
}

/// Removes decided orders (committed or void) from the engine's outbox. A
/// failure here only leaves entries the reconciler will find decided.
async fn acknowledge(engine: &dyn Engine, orders: &[Order]) {
    let mut by_sale: HashMap<&SaleId, Vec<OrderId>> = HashMap::new();
    for order in orders {
        by_sale.entry(&order.sale_id).or_default().push(order.id);
    }
    for (sale, ids) in by_sale {
        if let Err(error) = engine.acknowledge(sale, &ids).await {
            tracing::warn!(%sale, %error, "could not acknowledge committed orders");
        }
    }
}
