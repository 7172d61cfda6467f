//! The contention harness: a crowd arrives at a held lock and drains through
//! it, one holder at a time.
//!
//! One round: a gatekeeper takes the lock; `waiters` fresh tasks (spread over
//! the clients) start acquiring it and settle into waiting; the gatekeeper
//! releases; each task, once it gets the lock, holds it for `hold`, releases
//! it and ends. Every release but the last is handed to one of the tasks
//! still waiting, and nothing else competes: no task comes back for a second
//! turn (which would let a releaser grab the lock again before the waiters,
//! or let the harness itself tell tasks when to try). The hand-off is the time
//! from a holder calling release to the next holder's acquire returning.
//! Rounds repeat until the window is over.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::commandstats::{CommandDelta, CommandStats};
use crate::contender::Contender;
use crate::{LockBenchError, LockBenchOptions};

/// How long the crowd gets to start waiting before the gatekeeper releases.
const SETTLE: Duration = Duration::from_millis(100);

/// What one library's measurement window produced.
pub(crate) struct Measurement {
    /// Hand-off latencies, nanoseconds.
    pub handoffs: Histogram<u64>,
    /// Acquisitions by the crowd (gatekeepers not counted).
    pub acquisitions: u64,
    /// Time the crowds spent draining (from each gatekeeper's release to the
    /// last release of its round).
    pub draining: Duration,
    /// Commands Redis ran during the window (gatekeepers and settling
    /// included).
    pub commands: CommandDelta,
    /// The whole window.
    pub window: Duration,
    /// Rounds measured.
    pub rounds: u64,
}

/// Runs rounds for the warm-up, then for the measurement window.
pub(crate) async fn contend<C: Contender>(
    contenders: Vec<Arc<C>>,
    options: &LockBenchOptions,
    stats: &mut redis::aio::MultiplexedConnection,
    on_measuring: impl Fn(),
) -> Result<Measurement, LockBenchError> {
    let warm_until = Instant::now() + options.warmup;
    loop {
        round(&contenders, options).await?;
        if Instant::now() >= warm_until {
            break;
        }
    }
    let mut measurement = Measurement {
        // 1 ns to 60 s, 3 significant digits.
        handoffs: Histogram::new_with_bounds(1, 60_000_000_000, 3)
            .map_err(|e| LockBenchError::Invalid(format!("histogram: {e}")))?,
        acquisitions: 0,
        draining: Duration::ZERO,
        commands: CommandDelta::default(),
        window: Duration::ZERO,
        rounds: 0,
    };
    let before = CommandStats::read(stats).await?;
    on_measuring();
    let started = Instant::now();
    while started.elapsed() < options.duration {
        let round = round(&contenders, options).await?;
        for nanos in round.handoffs {
            measurement.handoffs.saturating_record(nanos.max(1));
        }
        measurement.acquisitions += round.acquisitions;
        measurement.draining += round.draining;
        measurement.rounds += 1;
    }
    measurement.window = started.elapsed();
    measurement.commands = CommandStats::read(stats).await?.since(&before);
    Ok(measurement)
}

struct Round {
    handoffs: Vec<u64>,
    acquisitions: u64,
    draining: Duration,
}

struct RoundState {
    /// Set by each holder just before it calls release.
    last_release: Mutex<Option<Instant>>,
    handoffs: Mutex<Vec<u64>>,
    /// Holders right now: more than one is a broken lock.
    inside: AtomicUsize,
}

async fn round<C: Contender>(
    contenders: &[Arc<C>],
    options: &LockBenchOptions,
) -> Result<Round, LockBenchError> {
    let gatekeeper = contenders[0].acquire().await?;
    let state = Arc::new(RoundState {
        last_release: Mutex::new(None),
        handoffs: Mutex::new(Vec::with_capacity(options.waiters)),
        inside: AtomicUsize::new(0),
    });
    let mut crowd = tokio::task::JoinSet::new();
    for index in 0..options.waiters {
        let contender = Arc::clone(&contenders[index % contenders.len()]);
        let (state, hold) = (Arc::clone(&state), options.hold);
        crowd.spawn(async move { one_turn(&*contender, &state, hold).await });
    }
    tokio::time::sleep(SETTLE).await;

    let drain_started = Instant::now();
    *lock(&state.last_release) = Some(drain_started);
    contenders[0].release(gatekeeper).await?;
    while let Some(turn) = crowd.join_next().await {
        turn.map_err(|e| LockBenchError::Invalid(format!("a contending task failed: {e}")))??;
    }
    let draining = drain_started.elapsed();
    let handoffs = std::mem::take(&mut *lock(&state.handoffs));
    Ok(Round {
        handoffs,
        acquisitions: options.waiters as u64,
        draining,
    })
}

async fn one_turn<C: Contender>(
    contender: &C,
    state: &RoundState,
    hold: Duration,
) -> Result<(), LockBenchError> {
    let guard = contender.acquire().await?;
    let acquired_at = Instant::now();
    if state.inside.fetch_add(1, Ordering::SeqCst) != 0 {
        return Err(LockBenchError::Invalid(
            "two holders at once: the lock did not exclude".to_owned(),
        ));
    }
    if let Some(released_at) = lock(&state.last_release).take() {
        let nanos = acquired_at.duration_since(released_at).as_nanos();
        lock(&state.handoffs).push(u64::try_from(nanos).unwrap_or(u64::MAX));
    }
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    state.inside.fetch_sub(1, Ordering::SeqCst);
    *lock(&state.last_release) = Some(Instant::now());
    contender.release(guard).await
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
