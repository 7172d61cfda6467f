//! Redis out for every instance longer than the fallback's quiet period,
//! and what the README promises then: "once no instance has reached Redis
//! for 4 s ... the sale moves to PostgreSQL ... and moves back, rebuilt
//! from the store, once Redis answers again". The other freezes of a seed
//! are shorter than that period (`draws::draw_faults`), so without these
//! outages no seed would wait for the move.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use stockade_server::recovery::{FALLBACK_LIVE, FALLBACK_QUIET};

use crate::history::{History, Judged, Move};
use crate::oracle::Violation;
use crate::scenario::{Engine, Fault, MAX_OFFSET_MS, Scenario, Size};

/// How long an outage lasts, in ms: past the quiet period by more than the
/// bound the move is due by, so that it is due while Redis is still out.
pub const OUTAGE_MS: std::ops::Range<u64> = 10_000..16_000;

/// How long after Redis froze for everyone the sale must have moved, in
/// ms: the quiet period, plus a report period (the last report that
/// reached Redis may be a second old when it froze), plus another for a
/// live instance's report of orders it was still committing, plus the two
/// clocks' offsets (reports are stamped by the reporter's, judged by the
/// mover's), plus a second to spare.
const MOVE_BY_MS: u64 = FALLBACK_QUIET.as_millis() as u64 + 3_000 + 2 * MAX_OFFSET_MS as u64;

/// An answer at most this long after its request did not wait on Redis
/// (the engine's response timeout is 2 s): its instance's breaker was open
/// and the move to the fallback was asked for, and refused.
const FAST_MS: u64 = 1_000;

/// How long after Redis thawed the sale must be back on the engine, in
/// ms: the reconciler's pass (every second) finds Redis healthy and
/// rebuilds the sale, with a rebuild's wait for the writers to spare.
const BACK_BY_MS: u64 = 10_000;

/// How far from an outage alone the other faults are kept, in ms: enough
/// that [`judge`] judges it (no other fault within [`FALLBACK_LIVE`]
/// before it, nor before the move back after it).
const APART_MS: u64 = 12_000;

/// A third of the seeds on Redis (from a stream of their own, so that the
/// others keep their faults) freeze Redis once for an outage, as the
/// size's faults allow. Half of those outages come alone: the seed's other
/// faults within [`APART_MS`] of it are left out (clock jumps aside, which
/// [`judge`] allows for), so that the fallback's moves are judged; the
/// rest come among the other faults, and meet them.
pub(crate) fn add_outage(
    rng: &mut ChaCha8Rng,
    engine: Engine,
    size: Size,
    faults: &mut Vec<(u64, Fault)>,
) {
    if engine != Engine::Redis || size.faults == 0 || !rng.random_bool(1.0 / 3.0) {
        return;
    }
    let at = rng.random_range(0..size.span_ms.max(1));
    let lasts = rng.random_range(OUTAGE_MS);
    if rng.random_bool(0.5) {
        faults.retain(|&(other_at, other)| {
            matches!(other, Fault::ClockJump(..))
                || other_at + other.lasts_ms() + APART_MS < at
                || other_at > at + lasts + APART_MS
        });
    }
    faults.push((at, Fault::RedisFreeze(lasts)));
}

/// The broken promises of the fallback's moves in a run with the
/// fallback, judged on each outage of a sale not in the fallback already.
/// The move is judged on the answers before any other fault came near
/// (clock jumps aside, which only widen the bound by their size; a fault
/// that ended within [`FALLBACK_LIVE`] before the outage leaves it
/// unjudged); the move back, if no other fault came between the outage
/// and the bound. `end_ms`: when the run ended.
pub fn judge(scenario: &Scenario, history: &History, end_ms: u64) -> Vec<Violation> {
    if scenario.engine != Engine::Redis || !scenario.fallback {
        return Vec::new();
    }
    let faults = history.faults();
    let moves = history.moves();
    let answers = history.judged_answers();
    let live_ms = FALLBACK_LIVE.as_millis() as u64;
    let mut broken = Vec::new();
    for outage in faults
        .iter()
        .filter(|f| matches!(f.fault, Fault::RedisFreeze(_)))
    {
        let (froze, thawed) = (outage.from_ms, outage.to_ms);
        let (mut jumps_ms, mut calm_until, mut calm_before) = (0, thawed, true);
        let mut calm_back = true;
        for other in faults.iter().filter(|f| *f != outage) {
            if let Fault::ClockJump(_, by) = other.fault {
                jumps_ms += by.unsigned_abs();
            } else if other.from_ms > froze {
                calm_until = calm_until.min(other.from_ms);
                calm_back &= other.from_ms > thawed + BACK_BY_MS;
            } else if other.to_ms + live_ms > froze {
                calm_before = false;
            }
        }
        let last_move = moves.iter().rev().find(|(at, _)| *at <= froze);
        if !calm_before || last_move.is_some_and(|(_, to)| *to == Move::ToFallback) {
            continue;
        }
        let moved = moves
            .iter()
            .find(|(at, to)| *to == Move::ToFallback && (froze..=thawed).contains(at))
            .map(|(at, _)| *at);
        let due = froze + MOVE_BY_MS + jumps_ms;
        if let Some(refused) = refused_move(&answers, due, calm_until, moved) {
            broken.push(format!(
                "Redis froze for every instance at {froze} ms (for {} ms), and {} ms later \
                 i{} answered {} 503 engine_unavailable at once: the sale had not moved to \
                 the fallback, due {} ms after no instance could reach Redis",
                thawed - froze,
                refused.at_ms.0 - froze,
                refused.instance,
                refused.user,
                due - froze,
            ));
        }
        let Some(moved) = moved else { continue };
        let ended = scenario
            .sale
            .ends_ms
            .is_some_and(|ends| ends <= thawed + BACK_BY_MS);
        if !calm_back || ended || end_ms < thawed + BACK_BY_MS {
            continue;
        }
        let back = moves
            .iter()
            .any(|(at, to)| *to == Move::Rebuilt && *at > moved && *at <= thawed + BACK_BY_MS);
        if !back {
            broken.push(format!(
                "Redis thawed at {thawed} ms after an outage of {} ms that moved the sale to \
                 the fallback (at {moved} ms), and {BACK_BY_MS} ms later the sale was not \
                 back on Redis",
                thawed - froze
            ));
        }
    }
    broken
}

/// The first purchase sent from `due_ms` until `thawed_ms` (and before the
/// move, if there was one) answered 503 `engine_unavailable` without
/// waiting on Redis: a move asked for and refused.
fn refused_move(
    answers: &[Judged],
    due_ms: u64,
    thawed_ms: u64,
    moved: Option<u64>,
) -> Option<&Judged> {
    answers.iter().find(|a| {
        let (sent, answered) = a.at_ms;
        a.code == "engine_unavailable"
            && sent >= due_ms
            && answered <= thawed_ms
            && answered - sent < FAST_MS
            && moved.is_none_or(|moved| sent < moved)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::FaultSpan;

    fn answer(code: &str, sent: u64, answered: u64) -> Judged {
        Judged {
            user: "u1".into(),
            key: String::new(),
            status: 503,
            code: code.into(),
            sent_ms: 0,
            answered_ms: 0,
            instance: 0,
            at_ms: (sent, answered),
            repeat: false,
            remaining: None,
        }
    }

    fn outage() -> FaultSpan {
        FaultSpan {
            from_ms: 5_000,
            to_ms: 17_000,
            fault: Fault::RedisFreeze(12_000),
        }
    }

    fn judged(history: &History) -> Vec<Violation> {
        let mut scenario = Scenario::draw(0x5eed_001e, Size::default());
        (scenario.engine, scenario.fallback, scenario.sale.ends_ms) = (Engine::Redis, true, None);
        judge(&scenario, history, 60_000)
    }

    #[test]
    fn an_outage_is_reported_without_its_move_or_its_way_back() {
        let history = History::default();
        history.fault(outage());
        history.judged(answer("engine_unavailable", 14_000, 14_000));
        let broken = judged(&history);
        assert!(
            broken.len() == 1 && broken[0].contains("had not moved"),
            "{broken:?}"
        );

        let history = History::default();
        history.fault(outage());
        history.moved(10_000, Move::ToFallback);
        let broken = judged(&history);
        assert!(
            broken.len() == 1 && broken[0].contains("not back on Redis"),
            "{broken:?}"
        );
        history.moved(17_500, Move::Rebuilt);
        assert_eq!(judged(&history), Vec::<Violation>::new());
    }

    #[test]
    fn an_outage_another_fault_came_near_is_not_judged_from_then_on() {
        let history = History::default();
        history.fault(outage());
        history.judged(answer("engine_unavailable", 14_000, 14_000));
        // A store outage from 13 s: the move might wait on the store.
        history.fault(FaultSpan {
            from_ms: 13_000,
            to_ms: 15_000,
            fault: Fault::StoreOutage(2_000),
        });
        assert_eq!(judged(&history), Vec::<Violation>::new());
        // A crash that ended within the live period before it: unjudged.
        let history = History::default();
        history.fault(outage());
        history.judged(answer("engine_unavailable", 14_000, 14_000));
        history.fault(FaultSpan {
            from_ms: 1_000,
            to_ms: 2_000,
            fault: Fault::Crash(0, 1_000),
        });
        assert_eq!(judged(&history), Vec::<Violation>::new());
        // A clock jump only widens the bound: 14 s is still past it.
        let history = History::default();
        history.fault(outage());
        history.judged(answer("engine_unavailable", 14_000, 14_000));
        history.fault(FaultSpan {
            from_ms: 6_000,
            to_ms: 6_000,
            fault: Fault::ClockJump(0, 400),
        });
        assert_eq!(judged(&history).len(), 1);
    }

    #[test]
    fn a_fast_refusal_after_the_due_instant_and_before_the_move_is_a_refused_move() {
        let due = 10_000;
        let late = answer("engine_unavailable", 11_000, 11_000);
        assert!(refused_move(std::slice::from_ref(&late), due, 20_000, None).is_some());
        assert!(refused_move(std::slice::from_ref(&late), due, 20_000, Some(12_000)).is_some());
        // After the move, before the due instant, after the thaw, slow
        // (it waited on Redis: a breaker's trial), or another code: none.
        let none = [
            (late, Some(10_500)),
            (answer("engine_unavailable", 9_000, 9_000), None),
            (answer("engine_unavailable", 19_500, 20_500), None),
            (answer("engine_unavailable", 11_000, 13_000), None),
            (answer("rebuilding", 11_000, 11_000), None),
        ];
        for (answer, moved) in none {
            let at = answer.at_ms;
            assert!(
                refused_move(&[answer], due, 20_000, moved).is_none(),
                "{at:?}"
            );
        }
    }
}
