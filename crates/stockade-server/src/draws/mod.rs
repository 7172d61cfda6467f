//! The draw of draw sales, run by every instance and made by one.
//!
//! Every [`TICK`] each instance asks the store which draws have work to do
//! (entries closed and no draw yet, or a draw not settled yet) and, for
//! each, tries to take the draw's lease in the store. The holder of the
//! lease:
//!
//! 1. **draws** ([`draw`]): freezes the entry set in the store (in one
//!    fenced transaction, entries close and each entry gets its place by
//!    [`stockade_core::draw::draw_order`] from the seed committed to at
//!    the sale's creation, with the set's digest), then buys each entry's
//!    items for its buyer through the purchase pipeline in that order, a
//!    [`BATCH`] at a time: the lease is renewed on the store's clock before
//!    each batch, the engine judges the batch's purchases one after another
//!    in the draw's order and the writer commits them together. Each
//!    purchase is keyed `draw-<entry id>` (so the engine, the store's
//!    checks, payment holds and the writer work as for any purchase).
//!    Entries with stock win an order; the others are waitlisted. It
//!    writes the order, the results and the draw's instant in one fenced
//!    transaction, which publishes the seed.
//! 2. **rolls down** ([`roll_down`]) when woken ([`Woken`]: stock came back
//!    to the sale on this instance, or a winner paid), else at the latest
//!    every [`BACKSTOP`]: a winner whose hold lapsed (expired, cancelled,
//!    voided) loses; the waitlisted the store's stock fits are offered it
//!    in the draw's order; once the store says nothing more can roll down
//!    (or the sale ended), the waitlisted lose and the draw settles.
//!
//! An instance killed mid-draw lets its lease run out ([`LEASE`]) and
//! another takes over: it reads the frozen positions (never the set
//! again), and a purchase repeated with its entry's key names the order
//! the first one made, so the draw happens exactly once whoever finishes
//! it. A key that names a void order lapses its entry; the draw goes on.
//!
//! # Layout
//! - `run`: the draw itself.
//! - `roll`: a roll-down pass.
//! - `buy`: buying for entries in the draw's order, a batch at a time.

mod buy;
mod roll;
mod run;

use std::collections::{HashMap, HashSet};
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use chrono::TimeDelta;
use parking_lot::Mutex;
use stockade_core::SaleId;

use crate::state::AppState;

pub use buy::BATCH;
pub use roll::roll_down;
pub use run::{DrawError, draw};

/// How often an instance looks for draws to make: a draw is made within a
/// tick (and its purchases) of its entries closing.
pub const TICK: Duration = Duration::from_millis(500);

/// How long a run's lease lasts (store clock) before another instance may
/// take over; a run renews it before each batch of purchases.
pub const LEASE: TimeDelta = TimeDelta::seconds(10);

/// The slowest a drawn, unsettled draw gets a roll-down pass without being
/// woken: for what no event on this instance announces (a winner paying
/// on another instance, the sale ending, a reserve released).
pub const BACKSTOP: Duration = Duration::from_secs(10);

/// The sales whose draws may roll down now: stock came back to them on
/// this instance (a cancel, an expiry, a release applied to the engine, a
/// rebuild) or a winner paid. Wakes the draws' task.
#[derive(Debug, Default)]
pub struct Woken {
    sales: Mutex<HashSet<SaleId>>,
    notify: tokio::sync::Notify,
    /// Held by the run under way: one at a time per instance. The store's
    /// lease names the instance, so it cannot keep two runs of one
    /// instance (its loop and a [`run_due`] call) from buying one draw at
    /// once, out of the draw's order.
    running: tokio::sync::Mutex<()>,
}

impl Woken {
    /// Something changed for `sale`: its draw, if it has one, gets a pass.
    pub fn wake(&self, sale: &SaleId) {
        self.sales.lock().insert(sale.clone());
        self.notify.notify_one();
    }

    fn take(&self) -> HashSet<SaleId> {
        std::mem::take(&mut *self.sales.lock())
    }

    /// Keeps `sale` woken for the next tick (its lease was taken).
    fn keep(&self, sale: SaleId) {
        self.sales.lock().insert(sale);
    }
}

/// Runs the draws' work until the task is dropped: every [`TICK`], and at
/// once when woken ([`Woken`]). A drawn draw gets a roll-down pass when
/// woken, or after [`BACKSTOP`] without one.
pub async fn run_forever(state: AppState) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut passed: HashMap<SaleId, Instant> = HashMap::new();
    loop {
        tokio::select! {
            // In order, so a run is the same each time (the simulator's replays).
            biased;
            _ = tick.tick() => {}
            () = state.draws_woken().notify.notified() => {}
        }
        let woken = state.draws_woken().take();
        let now = Instant::now();
        let due = |sale: &SaleId| {
            woken.contains(sale) || passed.get(sale).is_none_or(|at| now >= *at + BACKSTOP)
        };
        match run_where(&state, due).await {
            Ok(ran) => {
                passed.retain(|sale, _| ran.unsettled.contains(sale));
                for sale in ran.passes {
                    passed.insert(sale, now);
                }
                // Another instance held the lease: its pass may have read
                // the store before the event; try again next tick.
                for sale in ran.unclaimed.into_iter().filter(|s| woken.contains(s)) {
                    state.draws_woken().keep(sale);
                }
            }
            Err(error) => tracing::warn!(%error, "running the draws failed; retrying"),
        }
    }
}

/// Runs every draw with work to do now (on the store's clock) whose lease
/// this instance gets: draws to make, and a roll-down pass of every drawn
/// draw not settled yet.
pub async fn run_due(state: &AppState) -> Result<(), DrawError> {
    run_where(state, |_| true).await.map(|_| ())
}

/// What [`run_where`] did.
struct Ran {
    /// Drawn draws not settled yet.
    unsettled: HashSet<SaleId>,
    /// Of those, the ones that got a roll-down pass.
    passes: Vec<SaleId>,
    /// Draws whose lease another instance held.
    unclaimed: Vec<SaleId>,
}

/// Makes every draw due, and gives a roll-down pass to the drawn ones
/// `wants_pass` names, each under its lease.
async fn run_where(
    state: &AppState,
    wants_pass: impl Fn(&SaleId) -> bool,
) -> Result<Ran, DrawError> {
    let _running = state.draws_woken().running.lock().await;
    let mut ran = Ran {
        unsettled: HashSet::new(),
        passes: Vec::new(),
        unclaimed: Vec::new(),
    };
    for (sale, drawn) in state.store().draws_to_run().await? {
        if drawn {
            ran.unsettled.insert(sale.clone());
            if !wants_pass(&sale) {
                continue;
            }
        }
        let owner = state.book().instance().to_owned();
        if !state.store().claim_draw(&sale, &owner, LEASE).await? {
            ran.unclaimed.push(sale);
            continue;
        }
        // Read again under the lease: another instance may have moved it on.
        let outcome = match state.store().draw(&sale).await? {
            Some(record) if record.drawn_at.is_none() => draw(state, &sale, &owner).await,
            Some(record) if record.settled_at.is_none() => {
                ran.passes.push(sale.clone());
                roll_down(state, &sale, &owner).await
            }
            _ => Ok(()),
        };
        // The next step may run on any instance, at once.
        state.store().release_draw(&sale, &owner).await?;
        if let Err(error) = outcome {
            tracing::warn!(%sale, %error, "the draw's run stopped; it is run again");
        }
    }
    Ok(ran)
}
