//! The group-commit writer: handlers hand it accepted orders, it commits them
//! to the store in batches (bounded by size and by time), one transaction
//! per batch, then tells each waiting handler its order's own verdict:
//! committed, or void (the store refused that one order; the rest of the
//! batch commits), and has the orders acknowledged in the engine's outbox.
//!
//! Under a stampede this turns thousands of commits into a few dozen, which
//! is what lets a durable store keep up with an in-memory or Redis engine.
//!
//! # A pipeline
//! The writer never waits for a commit before it forms the next batch:
//! - the batcher forms a batch and starts its commit as soon as a commit
//!   slot is free ([`commits_in_flight`]: several on PostgreSQL, where
//!   transactions of different sales run side by side; one on SQLite, which
//!   has one writer, so there the next batch fills and waits, ready, while
//!   the previous commit syncs);
//! - each commit answers its own waiters when its transaction has
//!   committed (never before: an answered order survives a power cut);
//! - one acknowledger task removes decided orders from the engine's outbox,
//!   off the commit path;
//! - orders whose batch failed (the store unreachable) stay this writer's:
//!   still `pending` to lookups, they are committed again from memory as
//!   soon as the store answers (`recommit_stranded`), rather than left to
//!   the reconciler's grace period in an outbox that a Redis losing its
//!   data would take with it.
//!
//! Arrival order per sale is kept: the batcher starts a batch's commit only
//! once the previous batch's transaction holds the row locks of its sales
//! ([`OrderStore::commit_in_turn`]). A later batch that touches one of
//! those sales then waits in the store for the earlier one to commit, so an
//! order is never judged before one of the same sale that arrived earlier;
//! and since every commit takes its locks in sale id order, two commits in
//! flight never deadlock.
//!
//! # Traces
//! Each order carries the span it was submitted from (its request's, see
//! [`CommitQueue::submit_from`]); each batch commit runs in a `store commit`
//! span that follows from all of them, which OpenTelemetry exports as one
//! link per order (see [`crate::telemetry`]).

use std::sync::Arc;
use std::time::Duration;

use stockade_core::{Durability, Engine, Order, OrderId, SaleId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::activity::Board;
use crate::in_flight::{self, InFlight};
use stockade_store::arbiter::Verdict;
use stockade_store::engine_views::InFlightOrders;
use stockade_store::{OrderStore, StoreError, StoreKind};

mod acknowledger;
mod stranded;

use acknowledger::Acknowledger;
use stranded::recommit_stranded;

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

/// How many batch commits may be under way at once. PostgreSQL runs
/// transactions that lock different sales side by side, and a transaction
/// waiting for a sale's lock has its statements ready the moment the lock
/// is free; four keeps most of the store's 16 connections for handlers.
/// SQLite has one writer: a second transaction would only sleep in SQLite's
/// busy handler (in steps of milliseconds), so there the next batch waits,
/// formed, for the commit slot instead.
pub fn commits_in_flight(kind: StoreKind) -> usize {
    match kind {
        StoreKind::Postgres => 4,
        StoreKind::Sqlite => 1,
    }
}

/// The result a handler waits for: its order's verdict, or the error that
/// failed its whole batch (the store unavailable: nothing committed).
pub type CommitResult = Result<Verdict, Arc<StoreError>>;

struct Job {
    order: Order,
    done: oneshot::Sender<CommitResult>,
    /// The span the order was submitted from: the batch's span follows
    /// from it. A disabled span, owning nothing, while tracing is off.
    submitted_from: tracing::Span,
    /// When the order was queued: a batch's delay counts from its first
    /// order's arrival, even if that order waited for a commit slot.
    queued_at: Instant,
}

/// The handle handlers use to submit orders. Cheap to clone.
#[derive(Clone)]
pub struct CommitQueue {
    sender: mpsc::Sender<Job>,
    in_flight: Arc<InFlight>,
}

impl std::fmt::Debug for CommitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitQueue")
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl CommitQueue {
    /// Starts the writer. Its task ends, after committing everything queued
    /// and handing the last acknowledgements to the engine, once every
    /// `CommitQueue` clone is dropped.
    pub fn start(
        store: OrderStore,
        engine: Arc<dyn Engine>,
        config: WriterConfig,
        activity: Arc<Board>,
    ) -> (Self, JoinHandle<()>) {
        let (sender, receiver) = mpsc::channel(config.max_batch.max(1) * 16);
        let in_flight = Arc::new(InFlight::default());
        let task = crate::tasks::spawn(write_batches(
            receiver,
            store,
            engine,
            config,
            Arc::clone(&in_flight),
            activity,
        ));
        (Self { sender, in_flight }, task)
    }

    /// Queues an order for commit; the receiver completes when its batch is
    /// committed (or failed). The batch's span follows from the span current
    /// now.
    pub async fn submit(&self, order: Order) -> oneshot::Receiver<CommitResult> {
        self.submit_from(order, tracing::Span::current()).await
    }

    /// [`CommitQueue::submit`], the batch's span following from `span` (the
    /// order's request span, so the commit is linked to the request).
    pub async fn submit_from(
        &self,
        order: Order,
        span: tracing::Span,
    ) -> oneshot::Receiver<CommitResult> {
        let (done, result) = oneshot::channel();
        self.in_flight.insert(order.clone());
        metrics::gauge!("stockade_writer_queue_depth").increment(1.0);
        let job = Job {
            order,
            done,
            submitted_from: span,
            queued_at: Instant::now(),
        };
        if let Err(mpsc::error::SendError(job)) = self.sender.send(job).await {
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

    /// Whether any order of `sale` is waiting for its commit.
    pub fn holds_sale(&self, sale: &SaleId) -> bool {
        self.in_flight.holds_sale(sale)
    }

    /// The orders waiting for their commit, as the engine-view report
    /// tells them.
    pub fn in_flight_report(&self) -> InFlightOrders {
        self.in_flight.report()
    }

    /// An order accepted by the engine whose commit is still under way.
    pub fn in_flight(&self, id: OrderId) -> Option<Order> {
        self.in_flight.get(&id)
    }

    /// An order whose commit is still under way, and a way to wait for the
    /// store's decision (the commit wakes it; no polling).
    pub fn watch(&self, id: OrderId) -> Option<(Order, in_flight::Decided)> {
        self.in_flight.watch(&id)
    }
}

/// The batcher: forms batches in arrival order and starts their commits,
/// each once a commit slot is free and the previous batch holds its locks.
async fn write_batches(
    mut receiver: mpsc::Receiver<Job>,
    store: OrderStore,
    engine: Arc<dyn Engine>,
    config: WriterConfig,
    in_flight: Arc<InFlight>,
    activity: Arc<Board>,
) {
    // Only an engine apart from the store keeps an outbox to clear.
    let (acknowledger, acknowledging) = match engine.durability() {
        Durability::Outbox => {
            let (acknowledger, task) = Acknowledger::start(engine);
            (Some(acknowledger), Some(task))
        }
        Durability::Committed => (None, None),
    };
    let (stranded, stranded_orders) = mpsc::unbounded_channel();
    let recommitting = crate::tasks::spawn(recommit_stranded(
        stranded_orders,
        store.clone(),
        acknowledger.clone(),
        Arc::clone(&in_flight),
        config.max_batch.max(1),
    ));
    let outlets = Outlets {
        store: store.clone(),
        acknowledger: acknowledger.clone(),
        in_flight: Arc::clone(&in_flight),
        stranded,
        activity,
    };
    let slots = Arc::new(Semaphore::new(commits_in_flight(store.kind())));
    let mut commits = JoinSet::new();
    let mut previous_locked: Option<oneshot::Receiver<()>> = None;
    loop {
        let slot = Arc::clone(&slots)
            .acquire_owned()
            .await
            .expect("the writer never closes its semaphore");
        if let Some(locked) = previous_locked.take() {
            // Sent once the previous batch holds its sales' locks, or
            // dropped if its commit failed before: either way, go.
            let _ = locked.await;
        }
        let Some(batch) = next_batch(&mut receiver, &config).await else {
            break;
        };
        let (locked, locked_seen) = oneshot::channel();
        previous_locked = Some(locked_seen);
        commits.spawn(commit_batch(batch, outlets.clone(), locked, slot));
        // Reap finished commits, so the set stays as small as the slots.
        while commits.try_join_next().is_some() {}
    }
    while commits.join_next().await.is_some() {}
    // Stranded orders get one last try; what still fails stays in the
    // engine's outbox for the next start or another instance.
    drop(outlets);
    let _ = recommitting.await;
    // The last sender goes: the acknowledger drains what is queued and ends.
    drop(acknowledger);
    if let Some(task) = acknowledging {
        let _ = task.await;
    }
}

/// The next batch: the first order queued, then whatever follows it, up to
/// `max_batch` orders or until `max_delay` after the first one was queued.
/// None once every sender is gone and the queue is empty.
async fn next_batch(receiver: &mut mpsc::Receiver<Job>, config: &WriterConfig) -> Option<Vec<Job>> {
    let first = receiver.recv().await?;
    let deadline = first.queued_at + config.max_delay;
    let mut batch = vec![first];
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
    Some(batch)
}

/// What a batch commit reports to: the store it commits to, and where its
/// orders go once decided (the engine's acknowledgements, the in-flight
/// set, the stranded loop on failure) and its timing (the activity board).
#[derive(Clone)]
struct Outlets {
    store: OrderStore,
    acknowledger: Option<Acknowledger>,
    in_flight: Arc<InFlight>,
    stranded: mpsc::UnboundedSender<Vec<Order>>,
    activity: Arc<Board>,
}

/// Commits one batch, frees its slot, then answers its waiters and queues
/// its acknowledgements.
async fn commit_batch(
    batch: Vec<Job>,
    outlets: Outlets,
    locked: oneshot::Sender<()>,
    slot: OwnedSemaphorePermit,
) {
    let Outlets {
        store,
        acknowledger,
        in_flight,
        stranded,
        activity,
    } = outlets;
    let span = commit_span(&batch, store.kind());
    let (orders, waiters): (Vec<Order>, Vec<_>) =
        batch.into_iter().map(|job| (job.order, job.done)).unzip();
    metrics::histogram!("stockade_writer_batch_size").record(orders.len() as f64);
    let started = tokio::time::Instant::now();
    let result = store
        .commit_in_turn(&orders, locked)
        .instrument(span.clone())
        .await
        .map_err(Arc::new);
    if !span.is_disabled() {
        match &result {
            Ok(verdicts) => {
                let voided = verdicts
                    .iter()
                    .filter(|v| matches!(v, Verdict::Void(_)))
                    .count();
                span.record("committed", verdicts.len() - voided);
                span.record("voided", voided);
            }
            Err(error) => {
                span.record("otel.status_code", "error");
                span.record("error", tracing::field::display(error));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    metrics::histogram!("stockade_store_commit_seconds").record(seconds);
    activity.record_commit(seconds);
    // The store is done with this batch: the next commit may start.
    drop(slot);
    match &result {
        Ok(verdicts) => {
            log_voids(&orders, verdicts);
            if let Some(acknowledger) = &acknowledger {
                acknowledger.acknowledge(&orders);
            }
        }
        Err(error) => tracing::warn!(
            orders = orders.len(),
            %error,
            "batch commit failed; committing the orders again once the store answers"
        ),
    }
    metrics::gauge!("stockade_writer_queue_depth").decrement(orders.len() as f64);
    if result.is_ok() {
        for order in &orders {
            in_flight.remove(&order.id);
        }
    }
    for (index, done) in waiters.into_iter().enumerate() {
        let answer = match &result {
            Ok(verdicts) => Ok(verdicts[index]),
            Err(error) => Err(Arc::clone(error)),
        };
        // The handler may have given up waiting (deadline): that is fine.
        let _ = done.send(answer);
    }
    if result.is_err() {
        // Still in flight (pending to lookups, left alone by the
        // reconciler): the stranded orders' loop commits them.
        let _ = stranded.send(orders);
    }
}

/// The span of one batch commit: a root span (the batch carries orders of
/// many requests, each of its own trace) that follows from the span each
/// order was submitted from. Its `sale_id` is the batch's sale when it has
/// one sale only.
fn commit_span(batch: &[Job], store: StoreKind) -> tracing::Span {
    let span = tracing::debug_span!(
        parent: None,
        "store commit",
        otel.name = "store commit",
        otel.status_code = tracing::field::Empty,
        db.system.name = match store {
            StoreKind::Postgres => "postgresql",
            StoreKind::Sqlite => "sqlite",
        },
        orders = batch.len(),
        sale_id = tracing::field::Empty,
        committed = tracing::field::Empty,
        voided = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    if !span.is_disabled() {
        if let Some(first) = batch.first()
            && batch
                .iter()
                .all(|job| job.order.sale_id == first.order.sale_id)
        {
            span.record("sale_id", tracing::field::display(&first.order.sale_id));
        }
        for job in batch {
            span.follows_from(&job.submitted_from);
        }
    }
    span
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
                user = %order.user_id,
                epoch = %order.epoch,
                reason = reason.label(),
                "the store refused an order the engine had accepted; nothing was sold"
            );
        }
    }
}
