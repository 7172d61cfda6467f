//! Every rebuild has a cause. A rebuild reloads the sale into the engine
//! from the store under a new epoch: the sale's purchases wait for it or
//! are answered 503 meanwhile, and orders the engine accepted under the
//! old epoch must be settled first. The service rebuilds when the engine
//! may be out of line with the store: Redis lost the sale or restarted, a
//! failover, lost writes found as drift or refusals, the sale coming back
//! from the fallback. Each of those follows a fault (or a move to the
//! fallback); a rebuild with none since the one before is a rebuild for
//! nothing: a sale paused, and the work of a whole reload, for no reason
//! (an instance that rebuilds again instead of adopting another's
//! rebuild, a drift check that misreads the outbox).

use crate::history::{FaultSpan, History, Move};
use crate::oracle::Violation;

/// The rebuilds of the run with no fault and no move to the fallback since
/// the rebuild before (or since the start, for the first).
pub fn judge(history: &History) -> Vec<Violation> {
    uncaused(&history.faults(), &history.moves())
        .into_iter()
        .map(|(at, before)| {
            let since = match before {
                Some(before) => format!("the rebuild before it, at {before} ms"),
                None => "the start".to_owned(),
            };
            format!(
                "a rebuild for nothing: the engine was rebuilt at {at} ms with no fault and no \
                 move to the fallback since {since} (the sale paused for no reason)"
            )
        })
        .collect()
}

/// Each uncaused rebuild's instant, with the instant of the rebuild before.
fn uncaused(faults: &[FaultSpan], moves: &[(u64, Move)]) -> Vec<(u64, Option<u64>)> {
    let mut found = Vec::new();
    let mut before: Option<u64> = None;
    let mut moved_away = false;
    for &(at, to) in moves {
        match to {
            Move::ToFallback => moved_away = true,
            Move::Rebuilt => {
                let from = before.unwrap_or(0);
                // A fault still under way at the rebuild before, or struck
                // since, may be why.
                let faulted = faults.iter().any(|f| f.to_ms >= from && f.from_ms <= at);
                if !faulted && !moved_away {
                    found.push((at, before));
                }
                (before, moved_away) = (Some(at), false);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Fault;

    fn span(from_ms: u64, to_ms: u64) -> FaultSpan {
        FaultSpan {
            from_ms,
            to_ms,
            fault: Fault::RedisLoss,
        }
    }

    #[test]
    fn a_rebuild_after_a_fault_or_a_move_has_a_cause() {
        let moves = [
            (1_500, Move::Rebuilt),
            (9_000, Move::ToFallback),
            (15_000, Move::Rebuilt),
        ];
        assert_eq!(uncaused(&[span(1_000, 1_000)], &moves), vec![]);
    }

    #[test]
    fn a_second_rebuild_with_nothing_since_the_first_is_for_nothing() {
        let moves = [(1_500, Move::Rebuilt), (2_000, Move::Rebuilt)];
        assert_eq!(
            uncaused(&[span(1_000, 1_000)], &moves),
            vec![(2_000, Some(1_500))]
        );
    }

    #[test]
    fn a_fault_under_way_at_the_first_rebuild_may_cause_the_second() {
        let moves = [(1_500, Move::Rebuilt), (4_000, Move::Rebuilt)];
        assert_eq!(uncaused(&[span(1_000, 3_000)], &moves), vec![]);
    }

    #[test]
    fn a_rebuild_in_a_run_without_faults_is_for_nothing() {
        assert_eq!(uncaused(&[], &[(800, Move::Rebuilt)]), vec![(800, None)]);
    }
}
