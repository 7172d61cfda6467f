//! [`Purchases::decide_in_order`]: purchases decided by the engine one
//! after another in a given order, and committed together.
//!
//! A draw buys for its winners in the draw's order: the engine must judge
//! each entry's purchase after the one before it (else a later entry could
//! take stock an earlier one was owed), but the commits need not wait for
//! each other. Each purchase holds a [`Turn`]: it waits for the one before
//! to have had its engine's answer, and lets the next go as soon as it has
//! its own, then waits for its commit beside the others; so the writer
//! gets the whole run at once and commits it in a few batches (one
//! transaction per batch) instead of one transaction per purchase.
//!
//! Once one purchase of the run is answered `sold_out` by the engine, the
//! rest are refused `sold_out` without calling it: nothing after it may
//! win in the draw's order, whatever comes back meanwhile.

use futures::future::join_all;
use stockade_core::PurchaseOutcome;
use tokio::sync::oneshot;

use super::{Attempt, Decision, PurchaseError, Purchases};

/// A purchase's place in a run decided in order. Dropped without a word
/// (the purchase failed before the engine answered), it lets the next go.
#[derive(Debug)]
pub(super) struct Turn {
    /// Answers once the purchase before has its engine's answer: whether
    /// the run goes on (false: it met `sold_out`).
    before: Option<oneshot::Receiver<bool>>,
    /// Tells the next purchase.
    after: Option<oneshot::Sender<bool>>,
    /// Whether the run goes on, as this purchase will tell the next.
    goes_on: bool,
}

impl Turn {
    /// A purchase on its own: it waits for nobody.
    pub(super) fn alone() -> Self {
        Self {
            before: None,
            after: None,
            goes_on: true,
        }
    }

    /// `n` turns, each after the one before.
    fn chain(n: usize) -> Vec<Self> {
        let mut turns = Vec::with_capacity(n);
        let mut before = None;
        for _ in 0..n {
            let (tell, told) = oneshot::channel();
            turns.push(Self {
                before: before.replace(told),
                after: Some(tell),
                goes_on: true,
            });
        }
        turns
    }

    /// Waits for the purchase before; false if the run stopped at a
    /// `sold_out` (this purchase must not be made).
    pub(super) async fn wait(&mut self) -> bool {
        if let Some(before) = self.before.take() {
            // A sender dropped without a word failed before the engine:
            // the run goes on.
            self.goes_on = before.await.unwrap_or(true);
        }
        self.goes_on
    }

    /// The engine answered this purchase `outcome`: the next may go.
    pub(super) fn answered(&mut self, outcome: &PurchaseOutcome) {
        self.goes_on &= !matches!(outcome, PurchaseOutcome::SoldOut);
        self.pass();
    }

    fn pass(&mut self) {
        if let Some(after) = self.after.take() {
            let _ = after.send(self.goes_on);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.pass();
    }
}

impl Purchases<'_> {
    /// Decides `attempts` as [`Purchases::decide`] does each, with the
    /// engine judging them in the order given (each after the one before
    /// has its answer) and their commits in flight together; once one is
    /// answered `sold_out`, the rest are refused `sold_out` unmade. The
    /// answers are in the order given.
    pub async fn decide_in_order(
        &self,
        attempts: Vec<Attempt>,
    ) -> Vec<Result<Decision, PurchaseError>> {
        let turns = Turn::chain(attempts.len());
        join_all(
            attempts
                .into_iter()
                .zip(turns)
                .map(|(attempt, turn)| self.decide_in_turn(attempt, turn)),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turn_waits_for_the_one_before_and_stops_after_sold_out() {
        let mut turns = Turn::chain(3).into_iter();
        let (mut first, mut second, mut third) = (
            turns.next().unwrap(),
            turns.next().unwrap(),
            turns.next().unwrap(),
        );
        assert!(first.wait().await, "the first waits for nobody");
        let waiting = tokio::spawn(async move { (second.wait().await, second) });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second went before the first");
        first.answered(&PurchaseOutcome::SoldOut);
        let (goes_on, second) = waiting.await.unwrap();
        assert!(!goes_on, "the run went on after sold_out");
        // Dropped unmade, the second tells the third the run stopped.
        drop(second);
        assert!(!third.wait().await);
    }

    #[tokio::test]
    async fn a_turn_dropped_before_the_engine_lets_the_next_go() {
        let mut turns = Turn::chain(2).into_iter();
        let first = turns.next().unwrap();
        let mut second = turns.next().unwrap();
        drop(first);
        assert!(second.wait().await);
    }
}
