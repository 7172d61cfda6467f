//! The releases the engine owes, applied off the request path.
//!
//! A cancel, a confirm that found its hold run out, and the hold sweeper
//! each decide in the store (one transaction that also records a pending
//! release) and return at once: they never call the engine. The release
//! applier ([`apply_forever`], one per instance, beside the reconciler)
//! gives the items back to the engine:
//! - woken when a release is recorded here, and every [`PASS_INTERVAL`]
//!   (releases recorded by other instances, or retried);
//! - **per sale**: each sale owing releases is served by its own task,
//!   which reads that sale's releases (not the oldest N of all sales) and
//!   applies them in batches, one engine call ([`Engine::release_many`],
//!   one script call on Redis) per [`BATCH`]; a call that fails or takes
//!   longer than [`SALE_TIMEOUT`] backs that sale off (200 ms doubling to
//!   5 s) and no other, so one stuck sale never delays another;
//! - **behind the circuit breaker**: while it is open nothing is sent to
//!   the engine; failures and timeouts count towards opening it.
//!
//! A release applied twice is harmless (the engine answers
//! `already released`), so a crash between the engine call and the
//! settling only repeats work.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use parking_lot::Mutex;
use stockade_core::{Engine, EngineError, Epoch, OrderId, ReleaseOutcome, SaleId};

use crate::state::AppState;
use stockade_store::releases::PendingRelease;

/// How often the applier looks for owed releases without being woken.
pub const PASS_INTERVAL: Duration = Duration::from_secs(1);

/// The longest one engine call for one sale's batch may take.
pub const SALE_TIMEOUT: Duration = Duration::from_millis(500);

/// Releases per engine call (a bounded script call on Redis).
pub const BATCH: u32 = 1_000;

const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How long a buyer's cancel (or a late confirm) waits for the applier to
/// give its items back to the engine, so that its next purchase finds them:
/// a healthy engine takes a few milliseconds; a sick one costs at most this.
pub const SETTLE_WAIT: Duration = Duration::from_millis(100);

/// [`items_returned`], then waits up to [`SETTLE_WAIT`] for the applier to
/// have applied the sale's owed releases (for a buyer's cancel: the stock
/// is back in the engine when the answer arrives, unless the engine is
/// sick). The handler itself never calls the engine.
pub async fn items_returned_awaited(state: &AppState, sale: &SaleId, release_owed: bool) {
    if !release_owed {
        return items_returned(state, sale, false).await;
    }
    let mut settled = state.releases_settled().subscribe();
    items_returned(state, sale, true).await;
    let wait = async {
        loop {
            match settled.recv().await {
                Ok(done) if done == *sale => return,
                Ok(_) => {}
                // Missed announcements: the sale's may be among them.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    };
    let _ = tokio::time::timeout(SETTLE_WAIT, wait).await;
}

/// Items of `sale` went back in the store (a cancel, an expiry, a late
/// confirm; `release_owed` when the store recorded a release the engine
/// owes for them): the release applier is woken, and this instance stops
/// answering `sold_out` and reopens the sale's waiting room at once, the
/// others within the rejection ttl. Never waits on the engine.
pub async fn items_returned(state: &AppState, sale: &SaleId, release_owed: bool) {
    if release_owed {
        state.releases_owed().notify_one();
    }
    state.stock_returned(sale);
}

/// Applies now, in this task, the releases the engine owes for one sale
/// (a rebuild does, once the engine is in line), or for every sale owing
/// some, one after the other. The applier runs the same per-sale step in
/// the background; this is for callers already off the request path.
pub async fn apply_pending_releases(state: &AppState, only: Option<&SaleId>) {
    let sales = match only {
        Some(sale) => vec![sale.clone()],
        None => match state.store().sales_owed_releases().await {
            Ok(sales) => sales,
            Err(error) => {
                tracing::warn!(%error, "cannot read the pending releases; retrying");
                return;
            }
        },
    };
    for sale in sales {
        let _ = apply_sale(state, &sale).await;
    }
}

/// Why a sale's releases are not all applied.
#[derive(Debug)]
enum Held {
    /// The engine is unavailable (error, timeout, breaker open), or the
    /// store failed: retried after a pause.
    Unavailable,
    /// The engine does not hold the releases' epoch yet (a rebuild is
    /// due): retried after a pause.
    NotYet,
}

/// Applies `sale`'s owed releases, batch after batch, until none is left
/// or one is held up.
async fn apply_sale(state: &AppState, sale: &SaleId) -> Result<usize, Held> {
    if !state.engine_apart() {
        return Ok(0);
    }
    let engine = state.engine();
    let mut settled_total = 0;
    loop {
        let pending = match state.store().pending_releases_of(sale, BATCH).await {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(%sale, %error, "cannot read the pending releases; retrying");
                return Err(Held::Unavailable);
            }
        };
        if pending.is_empty() {
            return Ok(settled_total);
        }
        let full = pending.len() == BATCH as usize;
        let outcomes = call_engine(state, engine.as_ref(), sale, &pending).await?;
        let settled: Vec<OrderId> = pending
            .iter()
            .zip(&outcomes)
            .filter(|(release, outcome)| settles(state, release, outcome))
            .map(|(release, _)| release.order_id)
            .collect();
        // Settled together: one transaction for the batch.
        if let Err(error) = state.store().releases_settled(&settled).await {
            tracing::warn!(%sale, releases = settled.len(), %error, "cannot settle releases; retrying");
            return Err(Held::Unavailable);
        }
        settled_total += settled.len();
        if settled.len() < pending.len() {
            return Err(Held::NotYet);
        }
        if !full {
            return Ok(settled_total);
        }
    }
}

/// One engine call for a batch, behind the breaker, within
/// [`SALE_TIMEOUT`].
async fn call_engine(
    state: &AppState,
    engine: &dyn Engine,
    sale: &SaleId,
    pending: &[PendingRelease],
) -> Result<Vec<ReleaseOutcome>, Held> {
    if !state.breaker().allow(Instant::now()) {
        return Err(Held::Unavailable);
    }
    let releases: Vec<(OrderId, Epoch)> = pending.iter().map(|r| (r.order_id, r.epoch)).collect();
    let started = Instant::now();
    let error = match tokio::time::timeout(SALE_TIMEOUT, engine.release_many(sale, &releases)).await
    {
        Ok(Ok(outcomes)) => {
            state.breaker().succeeded();
            metrics::histogram!("stockade_engine_seconds", "op" => "release")
                .record(started.elapsed().as_secs_f64());
            return Ok(outcomes);
        }
        Ok(Err(error)) => error,
        Err(_) => EngineError::Unavailable(
            format!("no answer within {} ms", SALE_TIMEOUT.as_millis()).into(),
        ),
    };
    if error.is_retryable() {
        state.breaker().failed(Instant::now());
    } else {
        state.breaker().succeeded();
    }
    tracing::warn!(%sale, releases = releases.len(), %error,
        "releasing items to the engine failed; retrying this sale after a pause");
    Err(Held::Unavailable)
}

/// Whether the engine's answer settles a release (it has the items back,
/// or has nothing to give back).
fn settles(state: &AppState, release: &PendingRelease, outcome: &ReleaseOutcome) -> bool {
    match outcome {
        ReleaseOutcome::Released { remaining, .. } => {
            stockade_store::order_transitions(release.sale_id.as_str(), "released", 1);
            metrics::gauge!("stockade_sale_remaining", "sale" => release.sale_id.to_string())
                .set(f64::from(*remaining));
            state.stock_returned(&release.sale_id);
            true
        }
        ReleaseOutcome::AlreadyReleased | ReleaseOutcome::UnknownOrder => true,
        // Rebuilt under a newer epoch from a store that had the order
        // cancelled already: nothing left to give back.
        ReleaseOutcome::WrongEpoch { engine } if *engine > release.epoch => true,
        ReleaseOutcome::WrongEpoch { .. } | ReleaseOutcome::UnknownSale => false,
    }
}

/// A sale's place in the applier: being served, or backing off.
#[derive(Debug)]
struct Slot {
    running: bool,
    retry_at: Instant,
    pause: Duration,
}

/// The release applier: runs until the task is dropped.
pub async fn apply_forever(state: AppState) {
    let slots: Arc<Mutex<HashMap<SaleId, Slot>>> = Arc::default();
    let mut tick = tokio::time::interval(PASS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // In order, so a run is the same each time (the simulator's replays).
            biased;
            _ = tick.tick() => {}
            () = state.releases_owed().notified() => {}
        }
        if !state.engine_apart() {
            continue;
        }
        let owing = match state.store().sales_owed_releases().await {
            Ok(owing) => owing,
            Err(error) => {
                tracing::warn!(%error, "cannot read the pending releases; retrying");
                continue;
            }
        };
        let now = Instant::now();
        let mut table = slots.lock();
        // Sales nobody owes any more (settled elsewhere) are forgotten.
        table.retain(|sale, slot| slot.running || owing.contains(sale));
        for sale in owing {
            let slot = table.entry(sale.clone()).or_insert(Slot {
                running: false,
                retry_at: now,
                pause: FIRST_PAUSE,
            });
            if slot.running || now < slot.retry_at {
                continue;
            }
            slot.running = true;
            let state = state.clone();
            let slots = Arc::clone(&slots);
            tokio::spawn(async move {
                let result = apply_sale(&state, &sale).await;
                let mut table = slots.lock();
                match result {
                    Ok(settled) => {
                        table.remove(&sale);
                        let _ = state.releases_settled().send(sale.clone());
                        if settled > 0 {
                            // Releases recorded while this ran: look again.
                            state.releases_owed().notify_one();
                        }
                    }
                    Err(held) => {
                        if let Some(slot) = table.get_mut(&sale) {
                            slot.running = false;
                            slot.retry_at = Instant::now() + slot.pause;
                            tracing::debug!(%sale, ?held, pause = ?slot.pause, "releases held up");
                            slot.pause = (slot.pause * 2).min(MAX_PAUSE);
                        }
                    }
                }
            });
        }
    }
}
