//! How purchases are decided and committed: the commit deadline, the
//! group-commit batches, the reconciler's grace, the rejection caches and
//! the bound on purchases in flight.

use std::time::Duration;

use super::group::settings_group;
use super::{ConfigError, Sources, invalid};
use crate::writer::WriterConfig;

settings_group! {
    /// Purchases and commits.
    #[command(next_help_heading = "Purchases and commits")]
    pub struct PurchaseSettings {
        /// How long a purchase waits for its commit before answering 202
        /// pending (at least 1).
        #[arg(long, env = "STOCKADE_COMMIT_DEADLINE_MS", value_name = "MS", default_value = "2000")]
        pub commit_deadline_ms: Option<u64>,
        /// Most orders per store transaction (1 to 10000).
        #[arg(long, env = "STOCKADE_BATCH_MAX", value_name = "N", default_value = "512")]
        pub batch_max: Option<usize>,
        /// Longest wait for a batch to fill (at most 1000).
        #[arg(long, env = "STOCKADE_BATCH_DELAY_MS", value_name = "MS", default_value = "2")]
        pub batch_delay_ms: Option<u64>,
        /// How old an accepted order still missing from the store must be
        /// before any reconciler commits it itself; longer than the commit
        /// deadline.
        #[arg(long, env = "STOCKADE_OUTBOX_GRACE_MS", value_name = "MS", default_value = "10000")]
        pub outbox_grace_ms: Option<u64>,
        /// How long this instance answers sold_out and unknown_sale from
        /// what it learned, without asking Redis or the database (0 to
        /// 1000; 0 turns these caches off). Stock given back through
        /// another instance is sold here again within this bound; not
        /// started and ended always come from the sale's times.
        #[arg(long, env = "STOCKADE_REJECTION_TTL_MS", value_name = "MS", default_value = "500")]
        pub rejection_ttl_ms: Option<u64>,
        /// Most purchases in flight on this instance; one more is answered
        /// at once with 503 overloaded and Retry-After: 1, selling nothing
        /// (at least 1).
        #[arg(long, env = "STOCKADE_MAX_PURCHASES_IN_FLIGHT", value_name = "N", default_value = "4096")]
        pub max_purchases_in_flight: Option<u64>,
    }
}

/// The purchase settings, checked.
#[derive(Debug, Clone, Copy)]
pub(super) struct Purchases {
    pub(super) commit_deadline: Duration,
    pub(super) writer: WriterConfig,
    pub(super) outbox_grace: Duration,
    pub(super) rejection_ttl: Duration,
    pub(super) max_in_flight: usize,
}

impl PurchaseSettings {
    /// Every purchase setting within its bounds, the reconciler's grace
    /// longer than the commit deadline.
    pub(super) fn resolve(&self, sources: &Sources) -> Result<Purchases, ConfigError> {
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        let commit_deadline = Duration::from_millis(self.commit_deadline_ms.unwrap_or_default());
        if commit_deadline.is_zero() {
            return Err(bad("commit_deadline_ms", "must be at least 1".into()));
        }
        let max_batch = self.batch_max.unwrap_or_default();
        if !(1..=10_000).contains(&max_batch) {
            return Err(bad("batch_max", "must be between 1 and 10000".into()));
        }
        let max_delay = Duration::from_millis(self.batch_delay_ms.unwrap_or_default());
        if max_delay > Duration::from_secs(1) {
            return Err(bad("batch_delay_ms", "must be at most 1000".into()));
        }
        let outbox_grace = Duration::from_millis(self.outbox_grace_ms.unwrap_or_default());
        if outbox_grace <= commit_deadline {
            return Err(bad(
                "outbox_grace_ms",
                format!(
                    "must be longer than the commit deadline ({} = {} ms), or the reconciler would race the writer",
                    sources.name("commit_deadline_ms"),
                    commit_deadline.as_millis()
                ),
            ));
        }
        let rejection_ttl = Duration::from_millis(self.rejection_ttl_ms.unwrap_or_default());
        if rejection_ttl > crate::sale_book::MAX_TTL {
            return Err(bad(
                "rejection_ttl_ms",
                format!(
                    "must be at most {} (the bound on how long another instance's cancel may go unseen)",
                    crate::sale_book::MAX_TTL.as_millis()
                ),
            ));
        }
        let max_in_flight = self.max_purchases_in_flight.unwrap_or_default();
        if !(1..=crate::shedding::MAX_IN_FLIGHT_LIMIT as u64).contains(&max_in_flight) {
            return Err(bad(
                "max_purchases_in_flight",
                format!(
                    "must be between 1 and {} (it is {max_in_flight})",
                    crate::shedding::MAX_IN_FLIGHT_LIMIT
                ),
            ));
        }
        Ok(Purchases {
            commit_deadline,
            writer: WriterConfig {
                max_batch,
                max_delay,
            },
            outbox_grace,
            rejection_ttl,
            max_in_flight: max_in_flight as usize,
        })
    }
}
