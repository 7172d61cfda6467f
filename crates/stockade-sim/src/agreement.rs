//! The engine and the store's arbiter agree: the arbiter judges again
//! every order an engine accepted (stock, limits, the epoch, the key), so a
//! refusal of one is a second judge disagreeing with the first. Some
//! faults explain a disagreement: after a Redis loss, a failover to a
//! replica behind, or replies lost after their commands ran, the engine
//! decides from state the store never saw, and after a move to the
//! fallback the orders accepted under the epoch it left commit beside the
//! store's own decisions. Each explains the refusals of orders accepted
//! under the epoch the sale was under when it happened (the next rebuild
//! puts the sale under a new one, from the store's state). A failover
//! also leaves the old primary serving the connections opened before it
//! (see [`crate::redis::Primary::promote`]): two primaries, each rebuilt
//! in turn by the instances that reach it, each rebuild voiding the other
//! side's orders as stale, and a key or a holding one recorded is unknown
//! to the other: every epoch from the one before the first the old primary
//! wrote after the failover to the one after its last is disturbed. Any
//! other refusal is the engine out of line with nothing to excuse it.
//!
//! A refusal as stale (`stale_epoch`) is explained by two primaries only:
//! a rebuild closes the engine and waits for every live instance's writer
//! before it advances the epoch, so no other fault leaves an order of the
//! old epoch behind it. (Checked on 300 seeds of the standard mix with
//! every stale refusal reported: each of the 24 seeds with one had two
//! primaries.) This is what catches a close that does not close, or a
//! store that commits an order of an epoch it left.

use crate::history::History;
use crate::oracle::Violation;

/// The refusals that are not a disagreement: a commit of an order an
/// earlier commit already refused (a retried batch, a replayed outbox).
const NOT_A_DISAGREEMENT: &[&str] = &["earlier"];

/// The reason the store gives an order of an epoch it left.
const STALE: &str = "stale_epoch";

/// Each order the store refused after an engine accepted it, under an
/// epoch no fault disturbed.
pub fn engine_and_arbiter(history: &History) -> Vec<Violation> {
    let disturbed = history.disturbed_epochs();
    let two_primaries = history.two_primaries_epochs();
    history
        .voided_orders()
        .into_iter()
        .filter(|v| !NOT_A_DISAGREEMENT.contains(&v.reason.as_str()))
        .filter(|v| match v.reason.as_str() {
            STALE => !two_primaries.contains(&v.epoch),
            _ => !disturbed.contains_key(&v.epoch),
        })
        .map(|v| {
            format!(
                "the store refused order {} ({}) that the engine accepted under epoch {}, at {} ms, with no fault under that epoch to explain it (disturbed epochs: {disturbed:?}; a stale refusal is explained only by two primaries, under {two_primaries:?})",
                v.order, v.reason, v.epoch, v.at_ms
            )
        })
        .collect()
}
