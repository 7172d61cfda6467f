//! Where the service's random choices and the instants in its ids come
//! from: the operating system and the wall clock, unless the thread has
//! been given a seed and a clock ([`seed_thread`]).
//!
//! The simulator runs a whole cluster on one thread and must make the same
//! choices each time it replays a seed; every random id, nonce and shuffle
//! of the service is drawn here so that one call makes them repeatable.

use std::cell::RefCell;
use std::sync::Arc;

use rand::distr::{Distribution, StandardUniform};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::Clock;

/// A thread's seeded source.
struct Seeded {
    rng: ChaCha8Rng,
    clock: Arc<dyn Clock>,
}

thread_local! {
    static SEEDED: RefCell<Option<Seeded>> = const { RefCell::new(None) };
}

/// Until dropped, this thread's random choices come from `seed` and the
/// instants in its ids from `clock`.
#[must_use = "the seed applies only while the guard lives"]
pub struct SeededThread(());

impl Drop for SeededThread {
    fn drop(&mut self) {
        SEEDED.with(|seeded| seeded.borrow_mut().take());
    }
}

/// Makes this thread's random choices come from `seed`, and the instants in
/// its ids from `clock`, until the guard is dropped.
pub fn seed_thread(seed: u64, clock: Arc<dyn Clock>) -> SeededThread {
    SEEDED.with(|seeded| {
        *seeded.borrow_mut() = Some(Seeded {
            rng: ChaCha8Rng::seed_from_u64(seed),
            clock,
        });
    });
    SeededThread(())
}

/// Runs `f` with this thread's source: the seeded one, or the system's.
pub fn with_rng<T>(f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
    SEEDED.with(|seeded| match seeded.borrow_mut().as_mut() {
        Some(seeded) => f(&mut seeded.rng),
        None => f(&mut rand::rng()),
    })
}

/// A random value.
pub fn random<T>() -> T
where
    StandardUniform: Distribution<T>,
{
    with_rng(|rng| rng.random())
}

/// A random number in `range`.
pub fn random_below(bound: u64) -> u64 {
    with_rng(|rng| rng.random_range(0..bound.max(1)))
}

/// Fills `bytes` with random bytes.
pub fn fill(bytes: &mut [u8]) {
    with_rng(|rng| rng.fill_bytes(bytes));
}

/// Milliseconds since the Unix epoch, for ids that sort by time.
pub fn unix_millis() -> u64 {
    let seeded = SEEDED.with(|seeded| {
        seeded
            .borrow()
            .as_ref()
            .map(|seeded| seeded.clock.now().timestamp_millis())
    });
    match seeded {
        Some(millis) => u64::try_from(millis).unwrap_or_default(),
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// A version 7 UUID: the instant, then random bits.
pub fn uuid_v7() -> uuid::Uuid {
    let random: [u8; 10] = random();
    uuid::Builder::from_unix_timestamp_millis(unix_millis(), &random).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;
    use chrono::{TimeZone, Utc};

    fn draws() -> (u64, [u8; 4], uuid::Uuid) {
        (
            random(),
            {
                let mut b = [0; 4];
                fill(&mut b);
                b
            },
            uuid_v7(),
        )
    }

    #[test]
    fn a_seeded_thread_draws_the_same_values_each_time() {
        let clock = Arc::new(ManualClock::new(
            Utc.timestamp_millis_opt(1_700_000_000_000).unwrap(),
        ));
        let first = {
            let _seeded = seed_thread(7, clock.clone());
            draws()
        };
        let second = {
            let _seeded = seed_thread(7, clock.clone());
            draws()
        };
        assert_eq!(first, second);
        assert_eq!(first.2.get_timestamp().unwrap().to_unix().0, 1_700_000_000);
        let other = {
            let _seeded = seed_thread(8, clock);
            draws()
        };
        assert_ne!(first.0, other.0, "another seed draws other values");
    }

    #[test]
    fn an_unseeded_thread_draws_from_the_system() {
        assert_ne!(draws().0, draws().0);
    }
}
