//! The crowd at the reserve release: on a sale whose tiers' reserves go to
//! everyone at `release_reserved_at`, buyers of no tier wait for that
//! instant and rush the reserved SKU around it, while Redis is loaded: each
//! script call takes a few milliseconds, so the purchases that queue
//! behind one in flight are judged by the next batch, at its later reading
//! of the clock. Purchases asked for just before the release are then
//! judged just after it, and may take what was reserved a moment before:
//! the store must judge them at the engine's instant, not at the one the
//! request was made at (issue 35, item 9). Before this, no seed had a
//! purchase wait for the engine while the clock crossed the release:
//! Redis answered at once and the crowd's arrivals were spread evenly.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Buyer, Sale};

/// Buyers in the rush (the first ones of the crowd, so a smaller crowd
/// keeps them).
pub const RUSH: usize = 300;

/// How far from the release (ms, true time) a buyer of the rush arrives:
/// the instances' clocks are up to 500 ms off, so each instance sees the
/// release somewhere in the rush.
const SPREAD_MS: u64 = 1_000;

/// The rush at the release, drawn for about two thirds of the sales that
/// release reserves (and are not drawn): how long each script call takes
/// Redis (ms), and the rush's arrivals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRush {
    /// Simulated time each script call takes Redis, in ms.
    pub script_ms: u64,
    /// Each buyer's arrival (ms after the start), the first buyers' first.
    pub arrivals: Vec<u64>,
}

/// The rush at `sale`'s release, if it has one, for a crowd of `buyers`.
pub(crate) fn draw_release_rush(
    sale: &Sale,
    buyers: usize,
    rng: &mut ChaCha8Rng,
) -> Option<ReleaseRush> {
    let release = sale.release_reserved_ms?;
    if sale.tiers.is_empty() || sale.draw_close_ms.is_some() || !rng.random_bool(2.0 / 3.0) {
        return None;
    }
    let script_ms = rng.random_range(2..=20);
    let arrivals = (0..buyers.min(RUSH))
        .map(|_| (release + rng.random_range(0..=2 * SPREAD_MS)).saturating_sub(SPREAD_MS))
        .collect();
    Some(ReleaseRush {
        script_ms,
        arrivals,
    })
}

/// The first buyers become the rush: no tier, one or two of the reserved
/// SKU (the first), arriving around the release.
pub(crate) fn rush(buyers: &mut [Buyer], rush: &ReleaseRush, rng: &mut ChaCha8Rng) {
    for (buyer, at) in buyers.iter_mut().zip(&rush.arrivals) {
        buyer.arrives_ms = *at;
        buyer.tier = None;
        buyer.items = vec![(0, rng.random_range(1..=2))];
    }
}

/// Whether an order was asked for before the release and answered after
/// it, by the answering instance's clock: a purchase that waited for the
/// engine while the clock crossed the release.
pub fn crossed(sale: &Sale, answers: &[crate::history::Judged]) -> bool {
    let Some(release) = sale.release_reserved_ms else {
        return false;
    };
    let release = crate::clock::at(release).timestamp_millis();
    answers.iter().any(|answer| {
        matches!(answer.status, 201 | 202)
            && answer.sent_ms < release
            && answer.answered_ms >= release
    })
}
