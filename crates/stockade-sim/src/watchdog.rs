//! A run whose simulated clock stands still is stuck: a task that spins
//! without ever yielding to the clock (a livelock: a loop that finds work
//! that is never done), or a thread blocked for good (a deadlock). The
//! paused runtime then never reaches the run's end, so the run would hang
//! until something outside killed it; the watchdog, a thread of its own,
//! ends the process instead, saying what it saw and how to replay it.
//!
//! A healthy run moves its clock hundreds of times a wall second (a quiet
//! stretch costs no wall time: the paused clock jumps it), so a minute of
//! wall time at one simulated instant is far past any load.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::history::History;

/// How long the simulated clock may stand still, in wall time.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

/// The exit status of a process ended by the watchdog.
pub const STUCK_EXIT: i32 = 70;

/// Watches `history`'s clock while the guard lives.
pub struct Watchdog {
    // Dropped with the guard: the watching thread then ends.
    _done: mpsc::Sender<()>,
}

impl Watchdog {
    /// Starts watching the run of `seed`, whose events `history` logs.
    pub fn start(seed: u64, history: History) -> Self {
        let (done, finished) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("sim-watchdog-{seed:#x}"))
            .spawn(move || {
                watch(seed, &history, &finished, STUCK_AFTER, |why| {
                    eprintln!("{why}");
                    std::process::exit(STUCK_EXIT);
                });
            })
            .expect("a thread for the watchdog");
        Self { _done: done }
    }
}

/// Checks the clock every second until `finished` says the run ended;
/// calls `stuck` with what it saw once the clock stood still for
/// `stuck_after`.
fn watch(
    seed: u64,
    history: &History,
    finished: &mpsc::Receiver<()>,
    stuck_after: Duration,
    stuck: impl FnOnce(String),
) {
    let mut last = history.latest_ms();
    let mut since = Instant::now();
    loop {
        match finished.recv_timeout(Duration::from_millis(250)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = history.latest_ms();
        if now != last {
            (last, since) = (now, Instant::now());
            continue;
        }
        if since.elapsed() >= stuck_after {
            return stuck(format!(
                "seed {seed:#x}: stuck: the simulated clock stood still at {now} ms for {} s \
                 of wall time: a task spins without yielding to the clock, or a thread is \
                 blocked for good. Its last events:\n{}\nreplay: stockade sim --seed {seed:#x} --log",
                stuck_after.as_secs(),
                history.last_lines(20).join("\n")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the watchdog over `history` for `wall`, with a 1 s bound,
    /// while `drive` logs; returns what it reported, if anything.
    fn watched(history: &History, wall: Duration, drive: impl Fn(u64)) -> Option<String> {
        let (done, finished) = mpsc::channel();
        std::thread::scope(|scope| {
            let watcher = scope.spawn(move || {
                let mut report = None;
                watch(0x5eed, history, &finished, Duration::from_secs(1), |why| {
                    report = Some(why);
                });
                report
            });
            let started = Instant::now();
            let mut tick = 0;
            while started.elapsed() < wall {
                drive(tick);
                tick += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            drop(done);
            watcher.join().unwrap()
        })
    }

    #[test]
    fn a_clock_standing_still_is_reported_with_the_last_events() {
        let history = History::default();
        history.log(5, "the last thing that happened");
        // Lines keep coming, all at one instant: a task spinning.
        let report = watched(&history, Duration::from_millis(2_500), |_| {
            history.log(7, "spinning");
        })
        .expect("reported stuck");
        assert!(report.contains("stood still at 7 ms"), "{report}");
        assert!(report.contains("spinning"), "{report}");
        assert!(report.contains("stockade sim --seed 0x5eed"), "{report}");
    }

    #[test]
    fn a_moving_clock_is_left_alone() {
        let history = History::default();
        let report = watched(&history, Duration::from_millis(2_500), |tick| {
            history.log(tick, "moving");
        });
        assert_eq!(report, None);
    }
}
