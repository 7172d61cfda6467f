//! Sales: the id, the specification a sale is created with, and what an
//! engine reports about it.
//!
//! - `snapshot`: [`SaleSnapshot`], a sale's stock in all and per SKU.
//! - `tiers`: checking a sale's tiers against its SKUs and window.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ValidationError;
use crate::sku::{MAX_SKUS, SkuId, SkuSpec};
use crate::tier::TierSpec;

/// The longest payment hold a sale may give its orders: one day.
pub const MAX_HOLD: Duration = Duration::from_secs(86_400);
/// The largest total stock a sale may have.
pub const MAX_TOTAL_STOCK: u32 = 1_000_000_000;
/// The largest per-user limit: no buyer can hold more than a sale's
/// largest stock.
pub const MAX_PER_USER_LIMIT: u32 = MAX_TOTAL_STOCK;
/// The longest sale id, in characters.
pub const MAX_SALE_ID_LEN: usize = 64;
/// The most shards a sale's stock may be split over (see
/// [`SaleSpecBuilder::shards`]).
pub const MAX_SHARDS: u16 = 64;

/// A sale id: 1 to 64 characters from `A-Za-z0-9_-`.
///
/// The alphabet keeps ids safe inside Redis key names (and their `{hash tag}`),
/// URLs and log lines without escaping.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SaleId(String);

impl SaleId {
    /// Validates and wraps a sale id.
    pub fn new(id: impl Into<String>) -> Result<Self, ValidationError> {
        let id = id.into();
        crate::validation::check_token("id", &id, MAX_SALE_ID_LEN)?;
        Ok(Self(id))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SaleId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<SaleId> for String {
    fn from(value: SaleId) -> Self {
        value.0
    }
}

impl fmt::Display for SaleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Everything a sale is created with. Immutable once created: creating the
/// same id again with the same spec is a no-op, with a different one a
/// conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleSpec {
    id: SaleId,
    total_stock: u32,
    skus: Vec<SkuSpec>,
    per_user_limit: u32,
    per_sku_limit: Option<u32>,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    hold: Option<Duration>,
    tiers: Vec<TierSpec>,
    release_reserved_at: Option<DateTime<Utc>>,
    /// Specs stored before shards read as one shard.
    #[serde(default = "one_shard")]
    shards: u16,
}

fn one_shard() -> u16 {
    1
}

impl SaleSpec {
    /// Starts a spec for `id` with `total_stock` items of one SKU named
    /// [`crate::sku::DEFAULT_SKU`], a per-user limit of 1 and no window.
    pub fn builder(
        id: impl Into<String>,
        total_stock: u32,
    ) -> Result<SaleSpecBuilder, ValidationError> {
        // The id is judged first, as by every constructor.
        let id = SaleId::new(id)?;
        check_stock("stock", total_stock)?;
        Self::with_skus(
            String::from(id),
            vec![SkuSpec {
                id: SkuId::default_sku(),
                stock: total_stock,
            }],
        )
    }

    /// Starts a spec for `id` with the given SKUs (1 to
    /// [`MAX_SKUS`], distinct ids, each with 1 item or more, at most
    /// [`MAX_TOTAL_STOCK`] in all), a per-user limit of 1 and no window.
    pub fn with_skus(
        id: impl Into<String>,
        skus: Vec<SkuSpec>,
    ) -> Result<SaleSpecBuilder, ValidationError> {
        let id = SaleId::new(id)?;
        if skus.is_empty() || skus.len() > MAX_SKUS {
            return Err(ValidationError::new(
                "skus",
                format!("must list 1 to {MAX_SKUS} SKUs (got {})", skus.len()),
            ));
        }
        let mut total: u64 = 0;
        for (i, sku) in skus.iter().enumerate() {
            if skus[..i].iter().any(|other| other.id == sku.id) {
                return Err(ValidationError::new(
                    "skus",
                    format!("sku {} is listed twice", sku.id),
                ));
            }
            check_stock("stock", sku.stock).map_err(|e| {
                ValidationError::new("skus", format!("sku {}: stock {}", sku.id, e.reason))
            })?;
            total += u64::from(sku.stock);
        }
        if total > u64::from(MAX_TOTAL_STOCK) {
            return Err(ValidationError::new(
                "skus",
                format!("the SKUs' stock adds up to {total}, more than {MAX_TOTAL_STOCK}"),
            ));
        }
        Ok(SaleSpecBuilder {
            spec: SaleSpec {
                id,
                total_stock: total as u32,
                skus,
                per_user_limit: 1,
                per_sku_limit: None,
                starts_at: None,
                ends_at: None,
                hold: None,
                tiers: Vec::new(),
                release_reserved_at: None,
                shards: 1,
            },
        })
    }

    /// The sale id.
    pub fn id(&self) -> &SaleId {
        &self.id
    }
    /// Items on sale in total.
    pub fn total_stock(&self) -> u32 {
        self.total_stock
    }
    /// The SKUs, in the order they were listed at creation.
    pub fn skus(&self) -> &[SkuSpec] {
        &self.skus
    }
    /// The position of `sku` among [`SaleSpec::skus`].
    pub fn sku_index(&self, sku: &SkuId) -> Option<usize> {
        self.skus.iter().position(|s| s.id == *sku)
    }
    /// How many items one buyer may hold at most, across every SKU.
    pub fn per_user_limit(&self) -> u32 {
        self.per_user_limit
    }
    /// How many items of any one SKU one buyer may hold at most (None: only
    /// the per-user limit applies).
    pub fn per_sku_limit(&self) -> Option<u32> {
        self.per_sku_limit
    }
    /// When buying opens (None: from creation).
    pub fn starts_at(&self) -> Option<DateTime<Utc>> {
        self.starts_at
    }
    /// When buying closes, exclusive (None: never).
    pub fn ends_at(&self) -> Option<DateTime<Utc>> {
        self.ends_at
    }
    /// How long an unpaid order is held before it expires (None: orders are
    /// confirmed at once).
    pub fn hold(&self) -> Option<Duration> {
        self.hold
    }
    /// The buyer tiers, in the order given at creation.
    pub fn tiers(&self) -> &[TierSpec] {
        &self.tiers
    }
    /// The position of the tier named `name` among [`SaleSpec::tiers`].
    pub fn tier_index(&self, name: &crate::TierName) -> Option<usize> {
        self.tiers.iter().position(|tier| tier.name == *name)
    }
    /// When unsold reserved stock joins the common stock (None: at the
    /// end of the sale, never for buying).
    pub fn release_reserved_at(&self) -> Option<DateTime<Utc>> {
        self.release_reserved_at
    }
    /// Over how many shards the engine spreads the stock (1: not split).
    /// Only the Redis engine splits; the others hold one count whatever
    /// this says, and keep it for when the sale moves back to Redis.
    pub fn shards(&self) -> u16 {
        self.shards
    }
    /// The same sale spread over `shards` shards, checked as at creation
    /// (for tools and tests that run one scenario sharded and not).
    pub fn resharded(&self, shards: u16) -> Result<SaleSpec, ValidationError> {
        SaleSpecBuilder { spec: self.clone() }
            .shards(shards)?
            .build()
    }
    /// The shard that decides every purchase of `user`: always the same,
    /// so one buyer's purchases meet one count and the per-user limit stays
    /// exact. A hash every process and version computes alike (FNV-1a).
    pub fn shard_of(&self, user: &crate::UserId) -> u16 {
        shard_of(user.as_str(), self.shards)
    }
    /// Whether the tiers' reserves still hold at `now`.
    pub fn reserves_hold_at(&self, now: DateTime<Utc>) -> bool {
        !self.tiers.is_empty() && self.release_reserved_at.is_none_or(|at| now < at)
    }
    /// Items of SKU `sku` (its position) reserved for every tier together.
    pub fn reserved_of(&self, sku: usize) -> u32 {
        let id = &self.skus[sku].id;
        self.tiers.iter().map(|tier| tier.reserved_of(id)).sum()
    }

    /// The window state at `now` for a buyer of tier `tier` (its position;
    /// None: no tier): a tier may start earlier.
    pub fn window_for(&self, tier: Option<usize>, now: DateTime<Utc>) -> Window {
        let starts = tier
            .and_then(|t| self.tiers[t].starts_at)
            .or(self.starts_at);
        if starts.is_some_and(|start| now < start) {
            Window::NotStarted
        } else if self.ends_at.is_some_and(|end| now >= end) {
            Window::Ended
        } else {
            Window::Open
        }
    }

    /// The window state at `now`, ignoring stock.
    pub fn window_at(&self, now: DateTime<Utc>) -> Window {
        self.window_for(None, now)
    }
}

/// Where `now` falls relative to a sale's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Before `starts_at`.
    NotStarted,
    /// Between `starts_at` (inclusive) and `ends_at` (exclusive).
    Open,
    /// At or after `ends_at`.
    Ended,
}

/// Sets the optional parts of a [`SaleSpec`]; [`build`](Self::build) checks
/// that they fit together.
#[derive(Debug, Clone)]
pub struct SaleSpecBuilder {
    spec: SaleSpec,
}

impl SaleSpecBuilder {
    /// Sets the per-user limit (1 to [`MAX_PER_USER_LIMIT`]).
    pub fn per_user_limit(mut self, limit: u32) -> Result<Self, ValidationError> {
        if !(1..=MAX_PER_USER_LIMIT).contains(&limit) {
            return Err(ValidationError::new(
                "per_user_limit",
                format!("must be between 1 and {MAX_PER_USER_LIMIT} (got {limit})"),
            ));
        }
        self.spec.per_user_limit = limit;
        Ok(self)
    }

    /// Caps what one buyer may hold of each SKU (1 to
    /// [`MAX_PER_USER_LIMIT`]).
    pub fn per_sku_limit(mut self, limit: u32) -> Result<Self, ValidationError> {
        if !(1..=MAX_PER_USER_LIMIT).contains(&limit) {
            return Err(ValidationError::new(
                "per_sku_limit",
                format!("must be between 1 and {MAX_PER_USER_LIMIT} (got {limit})"),
            ));
        }
        self.spec.per_sku_limit = Some(limit);
        Ok(self)
    }

    /// Sets when buying opens (kept to the millisecond, as every engine
    /// stores it).
    pub fn starts_at(mut self, at: DateTime<Utc>) -> Self {
        self.spec.starts_at = Some(to_millis(at));
        self
    }

    /// Sets when buying closes (kept to the millisecond).
    pub fn ends_at(mut self, at: DateTime<Utc>) -> Self {
        self.spec.ends_at = Some(to_millis(at));
        self
    }

    /// Sets the buyer tiers (checked with the rest by
    /// [`build`](Self::build)).
    pub fn tiers(mut self, tiers: Vec<TierSpec>) -> Self {
        self.spec.tiers = tiers
            .into_iter()
            .map(|tier| TierSpec {
                starts_at: tier.starts_at.map(to_millis),
                ..tier
            })
            .collect();
        self
    }

    /// Sets when unsold reserved stock joins the common stock (kept to the
    /// millisecond).
    pub fn release_reserved_at(mut self, at: DateTime<Utc>) -> Self {
        self.spec.release_reserved_at = Some(to_millis(at));
        self
    }

    /// Sets the payment hold of the sale's orders: 1 second to
    /// [`MAX_HOLD`] (a day), kept to the millisecond.
    pub fn hold(mut self, hold: Duration) -> Result<Self, ValidationError> {
        let hold = Duration::from_millis(hold.as_millis() as u64);
        if hold < Duration::from_secs(1) || hold > MAX_HOLD {
            return Err(ValidationError::new(
                "hold_seconds",
                "must be between 1 and 86400 seconds (one day)",
            ));
        }
        self.spec.hold = Some(hold);
        Ok(self)
    }

    /// Splits the stock over `shards` counts (1 to [`MAX_SHARDS`]) that
    /// the Redis engine keeps on different Cluster slots, so one hot sale
    /// spreads over several primaries. A sharded sale has one SKU and no
    /// tiers: both are rules over the whole stock at once, which no shard
    /// sees.
    pub fn shards(mut self, shards: u16) -> Result<Self, ValidationError> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(ValidationError::new(
                "shards",
                format!("must be between 1 and {MAX_SHARDS} (got {shards})"),
            ));
        }
        self.spec.shards = shards;
        Ok(self)
    }

    /// Checks the window, the tiers and the shards, and returns the spec.
    pub fn build(self) -> Result<SaleSpec, ValidationError> {
        if self.spec.shards > 1 && (self.spec.skus.len() > 1 || !self.spec.tiers.is_empty()) {
            return Err(ValidationError::new(
                "shards",
                "a sale split over shards must have one SKU and no tiers: \
                 split a sale of several SKUs into one sale per hot SKU",
            ));
        }
        if u32::from(self.spec.shards) > self.spec.total_stock {
            return Err(ValidationError::new(
                "shards",
                format!(
                    "{} shards for a stock of {}: every shard needs an item to start with",
                    self.spec.shards, self.spec.total_stock
                ),
            ));
        }
        if let (Some(start), Some(end)) = (self.spec.starts_at, self.spec.ends_at)
            && end <= start
        {
            return Err(ValidationError::new(
                "ends_at",
                format!("must be after starts_at ({start})"),
            ));
        }
        check_tiers(&self.spec)?;
        Ok(self.spec)
    }
}

/// FNV-1a of `user`, modulo `shards`: see [`SaleSpec::shard_of`].
pub fn shard_of(user: &str, shards: u16) -> u16 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in user.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(shards.max(1))) as u16
}

/// Checks one stock figure: 1 to [`MAX_TOTAL_STOCK`].
fn check_stock(field: &'static str, stock: u32) -> Result<(), ValidationError> {
    if !(1..=MAX_TOTAL_STOCK).contains(&stock) {
        return Err(ValidationError::new(
            field,
            format!("must be between 1 and {MAX_TOTAL_STOCK} (got {stock})"),
        ));
    }
    Ok(())
}

/// Drops sub-millisecond precision, so a spec survives a round trip through
/// any engine unchanged.
fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// Whether a sale can be bought from right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleStatus {
    /// The window has not opened yet.
    Upcoming,
    /// Open, with stock left.
    Open,
    /// Open, with no stock left.
    SoldOut,
    /// The window has closed.
    Ended,
}

mod snapshot;
mod tiers;

pub use snapshot::{SaleSnapshot, SkuSnapshot};
use tiers::check_tiers;

#[cfg(test)]
mod tests;
