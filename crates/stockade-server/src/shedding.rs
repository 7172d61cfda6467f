//! Load shedding: at most `--max-purchases-in-flight` purchases are being
//! decided and committed on this instance at once. One more is answered at
//! once with 503 `overloaded` and `Retry-After: 1`, having sold nothing,
//! instead of joining a queue in which every request would wait until it
//! timed out. Rejections answered from what the instance knows
//! (`sale_book::rejections`) cost nothing and do not count.

use std::sync::Arc;
use stockade_api::ErrorCode;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default bound on purchases in flight per instance.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4_096;

/// The largest bound accepted.
pub const MAX_IN_FLIGHT_LIMIT: usize = 1_000_000;

/// The bound on purchases in flight.
#[derive(Debug, Clone)]
pub struct Shedder {
    permits: Arc<Semaphore>,
    limit: usize,
}

/// A purchase's place among those in flight, given back when dropped.
#[derive(Debug)]
pub struct InFlight {
    _permit: OwnedSemaphorePermit,
}

impl Shedder {
    /// At most `limit` purchases in flight: 1 to [`MAX_IN_FLIGHT_LIMIT`],
    /// as `--max-purchases-in-flight` is checked to be.
    pub fn new(limit: usize) -> Self {
        debug_assert!((1..=MAX_IN_FLIGHT_LIMIT).contains(&limit), "{limit}");
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// The bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How many purchases are in flight now.
    pub fn in_flight(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    /// A place for one more purchase, or 503 `overloaded` (counted in
    /// `stockade_purchases_shed_total`) when all are taken. Never waits.
    pub fn admit(&self) -> Result<InFlight, Overloaded> {
        match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => Ok(InFlight { _permit: permit }),
            Err(_) => {
                metrics::counter!("stockade_purchases_shed_total").increment(1);
                Err(Overloaded { limit: self.limit })
            }
        }
    }
}

/// Every place in flight is taken: answered 503 `overloaded`, nothing
/// sold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overloaded {
    /// The bound.
    pub limit: usize,
}

impl Overloaded {
    /// The code the API answers with.
    pub fn code(self) -> ErrorCode {
        ErrorCode::Overloaded
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn one_over_the_bound_is_shed_until_a_place_is_given_back() {
        let shedder = Shedder::new(2);
        let first = shedder.admit().unwrap();
        let _second = shedder.admit().unwrap();
        assert_eq!(shedder.in_flight(), 2);
        let shed = shedder.admit().unwrap_err();
        assert_eq!(shed.code().status(), StatusCode::SERVICE_UNAVAILABLE);
        drop(first);
        assert_eq!(shedder.in_flight(), 1);
        assert!(shedder.admit().is_ok());
    }
}
