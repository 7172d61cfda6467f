//! One hot sale over several Redis primaries: its stock split over shards.
//!
//! A sale created with `shards: N` (N > 1) keeps N complete sets of keys,
//! each a sale of its own to the scripts (sale hash, holdings, keys, orders,
//! outbox), under hash tags on different Cluster slots ([`placement`]).
//! Shard 0 is the sale's own keys. Every shard holds the whole spec; its
//! `remaining` is its part of the stock.
//!
//! - **A buyer always meets the same shard** ([`SaleSpec::shard_of`]): their
//!   holdings and idempotency keys live there, so the per-user limit and
//!   replays are exact without any cross-shard step.
//! - **A shard that runs dry takes stock from its siblings** ([`transfer`]):
//!   on demand, when a purchase finds too little, and in the background,
//!   leveling the shards of every sale sold from lately. So the sale sells
//!   out at exactly its total, and is sold out only when every shard is.
//! - **Releases** go to every shard at once: only the one holding the order
//!   knows it (the others answer "unknown order").
//! - **Outbox, rebuild, close, retire** run on every shard; a rebuild
//!   splits the store's orders by buyer and the stock left evenly.
//!
//! A sharded sale has one SKU and no tiers ([`SaleSpec`] refuses others):
//! a tier's reserve or a bundle is a rule over the whole stock at once.
//!
//! # Layout
//! - `placement`: the shards' hash tags.
//! - `transfer`: moving stock between shards (take, give, put back), on
//!   demand and in the background.

mod placement;
mod transfer;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use dashmap::DashMap;
use stockade_core::{EngineError, ReleaseOutcome, SaleId, SaleSpec, UserId};

use super::SharedConnection;
use super::keys::SaleKeys;
use super::scripts::redis_error;
pub(super) use transfer::{Transfers, in_flight, spawn_rebalancer};

/// The keys of every shard of one sale (one for an unsharded sale).
#[derive(Debug)]
pub(super) struct Layout {
    shards: Vec<SaleKeys>,
    /// When a purchase last met the sale (ms since the epoch): the
    /// background rebalancer levels the sales sold from lately.
    touched_ms: AtomicI64,
}

impl Layout {
    fn new(prefix: &str, sale: &SaleId, shards: u16) -> Self {
        let shards = if shards <= 1 {
            vec![SaleKeys::new(prefix, sale)]
        } else {
            placement::tags(sale.as_str(), shards)
                .iter()
                .map(|tag| SaleKeys::tagged(prefix, tag))
                .collect()
        };
        Self {
            shards,
            touched_ms: AtomicI64::new(0),
        }
    }

    /// How many shards.
    pub(super) fn len(&self) -> u16 {
        self.shards.len() as u16
    }

    /// Whether the stock is split at all.
    pub(super) fn is_sharded(&self) -> bool {
        self.shards.len() > 1
    }

    /// The keys of shard `shard`.
    pub(super) fn keys(&self, shard: u16) -> &SaleKeys {
        &self.shards[usize::from(shard)]
    }

    /// Every shard's keys, with its number.
    pub(super) fn all(&self) -> impl Iterator<Item = (u16, &SaleKeys)> {
        self.shards
            .iter()
            .enumerate()
            .map(|(k, keys)| (k as u16, keys))
    }

    /// The shard that decides `user`'s purchases.
    pub(super) fn shard_of(&self, user: &UserId) -> u16 {
        stockade_core::sale::shard_of(user.as_str(), self.len())
    }

    pub(super) fn touch(&self, now_ms: i64) {
        self.touched_ms.store(now_ms, Ordering::Relaxed);
    }

    fn touched_ms(&self) -> i64 {
        self.touched_ms.load(Ordering::Relaxed)
    }
}

/// The layouts of the sales this process has met. A sale's shard count is
/// part of its spec, which never changes, so a layout once read is kept
/// until the sale is retired.
pub(super) struct Layouts {
    prefix: String,
    known: DashMap<SaleId, Arc<Layout>>,
}

impl Layouts {
    pub(super) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            known: DashMap::new(),
        }
    }

    /// The layout of `spec`'s sale (creating or rebuilding it).
    pub(super) fn of_spec(&self, spec: &SaleSpec) -> Arc<Layout> {
        Arc::clone(
            self.known
                .entry(spec.id().clone())
                .or_insert_with(|| Arc::new(Layout::new(&self.prefix, spec.id(), spec.shards())))
                .value(),
        )
    }

    /// The layout of `sale`: known here, or read from its sale hash (one
    /// HGET, once per sale and process). A sale Redis does not have is
    /// taken as unsharded and not remembered: its own keys answer that it
    /// is unknown, and its rebuild names its layout.
    pub(super) async fn of(
        &self,
        connection: &SharedConnection,
        sale: &SaleId,
    ) -> Result<Arc<Layout>, EngineError> {
        if let Some(layout) = self.known.get(sale) {
            return Ok(Arc::clone(layout.value()));
        }
        let home = SaleKeys::new(&self.prefix, sale);
        let (total, shards): (Option<String>, Option<u16>) = redis::cmd("HMGET")
            .arg(&home.sale)
            .arg(&["total", "shards"])
            .query_async(&mut connection.clone())
            .await
            .map_err(redis_error)?;
        let layout = Arc::new(Layout::new(&self.prefix, sale, shards.unwrap_or(1)));
        if total.is_none() {
            return Ok(layout);
        }
        Ok(Arc::clone(
            self.known.entry(sale.clone()).or_insert(layout).value(),
        ))
    }

    /// The layout of `sale` as known here, without asking Redis (a purchase
    /// batch's, whose purchase looked it up): else the sale's own keys.
    pub(super) fn known_or_own(&self, sale: &SaleId) -> Arc<Layout> {
        match self.known.get(sale) {
            Some(layout) => Arc::clone(layout.value()),
            None => Arc::new(Layout::new(&self.prefix, sale, 1)),
        }
    }

    /// Forgets a retired sale.
    pub(super) fn forget(&self, sale: &SaleId) {
        self.known.remove(sale);
    }

    /// The sharded sales a purchase met since `since_ms`.
    fn sharded_since(&self, since_ms: i64) -> Vec<(SaleId, Arc<Layout>)> {
        self.known
            .iter()
            .filter(|entry| entry.is_sharded() && entry.touched_ms() >= since_ms)
            .map(|entry| (entry.key().clone(), Arc::clone(entry.value())))
            .collect()
    }
}

/// Every shard's sale hash, each in one HGETALL (atomic: a shard's spec and
/// stock are read together), all at once.
pub(super) async fn hashes(
    connection: &SharedConnection,
    layout: &Layout,
) -> Result<Vec<HashMap<String, String>>, EngineError> {
    futures::future::try_join_all(layout.all().map(|(_, keys)| async move {
        redis::cmd("HGETALL")
            .arg(&keys.sale)
            .query_async(&mut connection.clone())
            .await
            .map_err(redis_error)
    }))
    .await
}

/// `total` split over `shards`, as evenly as it goes (the first shards one
/// item more).
pub(super) fn shares(total: u32, shards: u16) -> Vec<u32> {
    let n = u32::from(shards.max(1));
    (0..n)
        .map(|k| total / n + u32::from(k < total % n))
        .collect()
}

/// One order's release, from every shard's answer: the shard that holds
/// the order decides; a shard that could not tell (rebuilding, or lost)
/// comes next; "unknown order" only if every shard says so.
pub(super) fn owner_answer(answers: impl IntoIterator<Item = ReleaseOutcome>) -> ReleaseOutcome {
    let rank = |answer: &ReleaseOutcome| match answer {
        ReleaseOutcome::Released { .. } | ReleaseOutcome::AlreadyReleased => 3,
        ReleaseOutcome::WrongEpoch { .. } => 2,
        ReleaseOutcome::UnknownSale => 1,
        ReleaseOutcome::UnknownOrder => 0,
    };
    answers
        .into_iter()
        .max_by_key(rank)
        .unwrap_or(ReleaseOutcome::UnknownOrder)
}

/// A sharded sale's stock left, from every shard's hash read one after
/// another: each shard's `remaining`, plus what is in flight between
/// shards (taken, and not yet given). Exact when no transfer is under way.
pub(super) fn remaining_of(hashes: &[HashMap<String, String>]) -> Result<u32, EngineError> {
    let mut remaining: u64 = 0;
    for hash in hashes {
        let left = hash
            .get("remaining")
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| EngineError::backend("a shard's sale hash has no valid remaining"))?;
        remaining += left;
    }
    remaining += in_flight(hashes);
    u32::try_from(remaining)
        .map_err(|_| EngineError::backend("a sharded sale's shards hold more than any sale"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_one_at_most() {
        assert_eq!(shares(10, 3), vec![4, 3, 3]);
        assert_eq!(shares(3, 3), vec![1, 1, 1]);
        assert_eq!(shares(7, 1), vec![7]);
        let split = shares(1_000_003, 16);
        assert_eq!(split.iter().sum::<u32>(), 1_000_003);
        assert!(split.iter().max().unwrap() - split.iter().min().unwrap() <= 1);
    }

    #[test]
    fn the_shard_holding_the_order_decides_its_release() {
        let released = ReleaseOutcome::Released {
            quantity: 1,
            remaining: 4,
        };
        assert_eq!(
            owner_answer([
                ReleaseOutcome::UnknownOrder,
                released,
                ReleaseOutcome::UnknownOrder
            ]),
            released
        );
        assert_eq!(
            owner_answer([ReleaseOutcome::UnknownOrder, ReleaseOutcome::UnknownOrder]),
            ReleaseOutcome::UnknownOrder
        );
        let rebuilding = ReleaseOutcome::WrongEpoch {
            engine: stockade_core::Epoch::CLOSED,
        };
        assert_eq!(
            owner_answer([
                ReleaseOutcome::UnknownOrder,
                rebuilding,
                ReleaseOutcome::UnknownSale
            ]),
            rebuilding
        );
    }
}
