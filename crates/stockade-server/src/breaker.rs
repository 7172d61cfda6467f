//! A circuit breaker in front of the engine. When Redis is unreachable or
//! slow, every purchase would otherwise wait for the full response timeout
//! before hearing 503; after a few consecutive failures the breaker opens
//! and purchases are answered 503 at once, until a cool-down has passed and
//! one trial request is let through (half-open). A success closes it. A
//! trial that never reports (its client went away, or it ended in an error
//! that says nothing about reachability) does not keep the breaker
//! half-open: after another cool-down the next request is the trial.
//!
//! Time is passed in, so the breaker is tested without sleeping.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use parking_lot::Mutex;

/// Consecutive failures that open the circuit.
pub const DEFAULT_THRESHOLD: u32 = 3;
/// How long the circuit stays open before a trial request.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(1);

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Requests pass; `failures` in a row so far.
    Closed { failures: u32 },
    /// Requests are refused until `until`.
    Open { until: Instant },
    /// One trial request is under way since `since`; others are refused
    /// until it reports or a cool-down passes.
    HalfOpen { since: Instant },
}

/// Opens after `threshold` consecutive failures, for `cooldown`.
#[derive(Debug)]
pub struct CircuitBreaker {
    /// True while closed with no failure counted: the purchase path then
    /// reads one atomic and never takes the lock.
    healthy: AtomicBool,
    state: Mutex<State>,
    threshold: u32,
    cooldown: Duration,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::new(DEFAULT_THRESHOLD, DEFAULT_COOLDOWN)
    }
}

impl CircuitBreaker {
    /// A closed breaker.
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            healthy: AtomicBool::new(true),
            state: Mutex::new(State::Closed { failures: 0 }),
            threshold: threshold.max(1),
            cooldown,
        }
    }

    /// Whether a request may go to the engine now. Past the cool-down the
    /// first caller gets through as the trial; the rest wait for its result.
    pub fn allow(&self, now: Instant) -> bool {
        if self.healthy.load(Ordering::Acquire) {
            return true;
        }
        let mut state = self.state.lock();
        match *state {
            State::Closed { .. } => true,
            State::Open { until } if now >= until => {
                *state = State::HalfOpen { since: now };
                true
            }
            State::HalfOpen { since } if now >= since + self.cooldown => {
                *state = State::HalfOpen { since: now };
                true
            }
            State::Open { .. } | State::HalfOpen { .. } => false,
        }
    }

    /// The engine answered (any answer, even an error that is not about
    /// reachability: it is there).
    pub fn succeeded(&self) {
        if self.healthy.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state.lock();
        if !matches!(*state, State::Closed { .. }) {
            metrics::gauge!("stockade_circuit_open").set(0.0);
        }
        *state = State::Closed { failures: 0 };
        self.healthy.store(true, Ordering::Release);
    }

    /// The engine was unreachable or too slow.
    pub fn failed(&self, now: Instant) {
        let mut state = self.state.lock();
        self.healthy.store(false, Ordering::Release);
        *state = match *state {
            State::Closed { failures } if failures + 1 < self.threshold => State::Closed {
                failures: failures + 1,
            },
            _ => {
                metrics::counter!("stockade_circuit_opened_total").increment(1);
                metrics::gauge!("stockade_circuit_open").set(1.0);
                State::Open {
                    until: now + self.cooldown,
                }
            }
        };
    }

    /// Whether the circuit is open (or trying to close).
    pub fn is_open(&self) -> bool {
        !matches!(*self.state.lock(), State::Closed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_closes_after_a_good_trial() {
        let breaker = CircuitBreaker::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(breaker.allow(t0));
        breaker.failed(t0);
        breaker.failed(t0);
        assert!(breaker.allow(t0), "two failures are not enough");
        breaker.failed(t0);
        assert!(breaker.is_open());
        assert!(!breaker.allow(t0 + Duration::from_millis(999)));
        // After the cool-down one trial goes through, the others wait.
        assert!(breaker.allow(t0 + Duration::from_secs(1)));
        assert!(!breaker.allow(t0 + Duration::from_secs(1)));
        breaker.succeeded();
        assert!(!breaker.is_open());
        assert!(breaker.allow(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn a_failed_trial_opens_it_again() {
        let breaker = CircuitBreaker::new(1, Duration::from_secs(2));
        let t0 = Instant::now();
        breaker.failed(t0);
        let t1 = t0 + Duration::from_secs(2);
        assert!(breaker.allow(t1));
        breaker.failed(t1);
        assert!(!breaker.allow(t1 + Duration::from_secs(1)));
        assert!(breaker.allow(t1 + Duration::from_secs(2)));
    }

    #[test]
    fn a_trial_that_never_reports_does_not_keep_it_half_open() {
        let breaker = CircuitBreaker::new(1, Duration::from_secs(1));
        let t0 = Instant::now();
        breaker.failed(t0);
        let t1 = t0 + Duration::from_secs(1);
        assert!(breaker.allow(t1), "the trial");
        // The trial's client went away: neither succeeded nor failed.
        assert!(!breaker.allow(t1 + Duration::from_millis(500)));
        assert!(
            breaker.allow(t1 + Duration::from_secs(1)),
            "a new trial after another cool-down"
        );
        breaker.succeeded();
        assert!(!breaker.is_open());
    }

    #[test]
    fn the_open_gauge_follows_the_breaker() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        // What `actions` set the gauge to, on a fresh recorder (a snapshot
        // resets gauges, so each phase gets its own).
        let gauge_after = |actions: &dyn Fn()| {
            let recorder = DebuggingRecorder::new();
            let snapshotter = recorder.snapshotter();
            metrics::with_local_recorder(&recorder, actions);
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .find(|(key, ..)| key.key().name() == "stockade_circuit_open")
                .map(|(.., value)| value)
        };
        let breaker = CircuitBreaker::new(2, Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(gauge_after(&|| breaker.failed(t0)), None, "not open yet");
        assert_eq!(
            gauge_after(&|| breaker.failed(t0)),
            Some(DebugValue::Gauge(1.0.into()))
        );
        assert!(breaker.allow(t0 + Duration::from_secs(1)), "the trial");
        assert_eq!(
            gauge_after(&|| breaker.succeeded()),
            Some(DebugValue::Gauge(0.0.into()))
        );
    }

    #[test]
    fn a_success_resets_the_count() {
        let breaker = CircuitBreaker::new(2, Duration::from_secs(1));
        let t0 = Instant::now();
        breaker.failed(t0);
        breaker.succeeded();
        breaker.failed(t0);
        assert!(breaker.allow(t0), "failures must be consecutive");
    }
}
