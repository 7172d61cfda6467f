//! The draw of draw sales, run by every instance and made by one.
//!
//! Every [`TICK`] each instance asks the store which draws have work to do
//! (entries closed and no draw yet, or a draw whose holds may still roll
//! down) and, for each, tries to take the draw's lease in the store. The
//! holder of the lease:
//!
//! 1. **draws** ([`draw`]): freezes the entry set in the store (in one
//!    fenced transaction, entries close and each entry gets its place by
//!    [`stockade_core::draw::draw_order`] from the seed committed to at
//!    the sale's creation, with the set's digest), then, in that order,
//!    checking the lease on the store's clock before each purchase, buys
//!    each entry's items for
//!    its buyer through the purchase pipeline with the idempotency key
//!    `draw-<entry id>` (so the engine, the store's checks, payment holds
//!    and the writer work as for any purchase). Entries with stock win an
//!    order; the others are waitlisted. It writes the order, the results
//!    and the draw's instant in one fenced transaction, which publishes
//!    the seed.
//! 2. **rolls down** ([`roll_down`]): a winner whose hold lapsed (expired
//!    or cancelled) loses; the waitlisted are offered the freed stock in
//!    the draw's order; once no hold is outstanding and nothing more can be
//!    sold (or the sale ended), the waitlisted lose and the draw settles.
//!
//! An instance killed mid-draw lets its lease run out ([`LEASE`]) and
//! another takes over: it reads the frozen positions (never the set
//! again), and a purchase repeated with its entry's key names the order
//! the first one made, so the draw happens exactly once whoever finishes
//! it. A key that names a void order lapses its entry; the draw goes on.
//!
//! # Layout
//! - `run`: one run of one draw (the draw, or a roll-down pass).

mod run;

use std::time::Duration;

use chrono::TimeDelta;

use crate::state::AppState;

pub use run::{draw, roll_down};

/// How often an instance looks for draws with work to do: a draw is made
/// within a tick (and its purchases) of its entries closing.
pub const TICK: Duration = Duration::from_millis(500);

/// How long a run's lease lasts (store clock) before another instance may
/// take over; a run renews it before each purchase.
pub const LEASE: TimeDelta = TimeDelta::seconds(10);

/// Runs the draws' work until the task is dropped.
pub async fn run_forever(state: AppState) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(error) = run_due(&state).await {
            tracing::warn!(%error, "running the draws failed; retrying");
        }
    }
}

/// Runs every draw with work to do now (on the store's clock) whose lease
/// this instance gets.
pub async fn run_due(state: &AppState) -> Result<(), run::DrawError> {
    for sale in state.store().draws_to_run().await? {
        let owner = state.book().instance().to_owned();
        if !state.store().claim_draw(&sale, &owner, LEASE).await? {
            continue;
        }
        let outcome = match state.store().draw(&sale).await? {
            Some(record) if record.drawn_at.is_none() => draw(state, &sale, &owner).await,
            Some(_) => roll_down(state, &sale, &owner).await,
            None => Ok(()),
        };
        // The next step may run on any instance, at once.
        state.store().release_draw(&sale, &owner).await?;
        if let Err(error) = outcome {
            tracing::warn!(%sale, %error, "the draw's run stopped; it is run again");
        }
    }
    Ok(())
}
