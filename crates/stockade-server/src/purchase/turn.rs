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
//! win in the draw's order, whatever comes back meanwhile. Once one fails
//! before the engine judged it (shed, rebuilding, the store down), the rest
//! are not made either ([`PurchaseError::RunStopped`]): made, they would
//! take stock the failed one was owed when the run is tried again.

use futures::future::join_all;
use stockade_core::PurchaseOutcome;
use tokio::sync::oneshot;

use super::{Attempt, Decision, PurchaseError, Purchases};

/// Where a run decided in order stands, as one purchase tells the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    /// The purchase before had its engine's answer: this one may go.
    GoesOn,
    /// A purchase before was answered `sold_out`: nothing after may win.
    SoldOut,
    /// A purchase before failed before the engine judged it: nothing after
    /// may be made, or it would jump the queue.
    Stopped,
}

/// A purchase's place in a run decided in order. Dropped without a word
/// (the purchase failed before the engine answered), it stops the run.
#[derive(Debug)]
pub(super) struct Turn {
    /// Answers once the purchase before has its engine's answer.
    before: Option<oneshot::Receiver<Run>>,
    /// Tells the next purchase.
    after: Option<oneshot::Sender<Run>>,
    /// How the run stands, as this purchase will tell the next.
    run: Run,
}

impl Turn {
    /// A purchase on its own: it waits for nobody.
    pub(super) fn alone() -> Self {
        Self {
            before: None,
            after: None,
            run: Run::Stopped,
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
                run: Run::Stopped,
            });
        }
        turns
    }

    /// Waits for the purchase before; anything but [`Run::GoesOn`] means
    /// this purchase must not be made. Until it is answered, this turn
    /// tells the next the run stopped.
    pub(super) async fn wait(&mut self) -> Run {
        let run = match self.before.take() {
            // A sender dropped without a word failed before the engine.
            Some(before) => before.await.unwrap_or(Run::Stopped),
            None => Run::GoesOn,
        };
        // Not made, the next hears why; made, `answered` says how it went.
        self.run = match run {
            Run::GoesOn => Run::Stopped,
            stopped => stopped,
        };
        run
    }

    /// The engine answered this purchase `outcome`: the next may go, unless
    /// it was `sold_out`.
    pub(super) fn answered(&mut self, outcome: &PurchaseOutcome) {
        self.run = match outcome {
            PurchaseOutcome::SoldOut => Run::SoldOut,
            _ => Run::GoesOn,
        };
        self.pass();
    }

    fn pass(&mut self) {
        if let Some(after) = self.after.take() {
            let _ = after.send(self.run);
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
    /// answered `sold_out`, the rest are refused `sold_out` unmade; once one
    /// fails before the engine's answer, the rest fail unmade
    /// ([`PurchaseError::RunStopped`]). The answers are in the order given.
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
        assert_eq!(
            first.wait().await,
            Run::GoesOn,
            "the first waits for nobody"
        );
        let waiting = tokio::spawn(async move { (second.wait().await, second) });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second went before the first");
        first.answered(&PurchaseOutcome::SoldOut);
        let (run, second) = waiting.await.unwrap();
        assert_eq!(run, Run::SoldOut, "the run went on after sold_out");
        // Dropped unmade, the second passes sold_out on to the third.
        drop(second);
        assert_eq!(third.wait().await, Run::SoldOut);
    }

    #[tokio::test]
    async fn a_turn_dropped_before_the_engine_stops_the_run() {
        let mut turns = Turn::chain(3).into_iter();
        let mut first = turns.next().unwrap();
        let mut second = turns.next().unwrap();
        let mut third = turns.next().unwrap();
        assert_eq!(first.wait().await, Run::GoesOn);
        // Failed before the engine (shed, rebuilding, store down).
        drop(first);
        assert_eq!(second.wait().await, Run::Stopped);
        drop(second);
        assert_eq!(third.wait().await, Run::Stopped);
    }

    #[tokio::test]
    async fn an_answered_turn_lets_the_next_go() {
        let mut turns = Turn::chain(2).into_iter();
        let mut first = turns.next().unwrap();
        let mut second = turns.next().unwrap();
        assert_eq!(first.wait().await, Run::GoesOn);
        first.answered(&PurchaseOutcome::InsufficientStock {
            sku: stockade_core::SkuId::new("a").unwrap(),
            remaining: 0,
        });
        drop(first);
        assert_eq!(second.wait().await, Run::GoesOn);
    }
}
