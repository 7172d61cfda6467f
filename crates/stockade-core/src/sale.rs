//! Sales: the id, the specification a sale is created with, and what an
//! engine reports about it.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ValidationError;
use crate::sku::{MAX_SKUS, SkuId, SkuSpec};

/// The longest payment hold a sale may give its orders: one day.
pub const MAX_HOLD: Duration = Duration::from_secs(86_400);
/// The largest total stock a sale may have.
pub const MAX_TOTAL_STOCK: u32 = 1_000_000_000;
/// The largest per-user limit: no buyer can hold more than a sale's
/// largest stock.
pub const MAX_PER_USER_LIMIT: u32 = MAX_TOTAL_STOCK;
/// The longest sale id, in characters.
pub const MAX_SALE_ID_LEN: usize = 64;

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
        if id.is_empty() || id.len() > MAX_SALE_ID_LEN {
            return Err(ValidationError::new(
                "id",
                format!(
                    "must be 1 to {MAX_SALE_ID_LEN} characters long (got {})",
                    id.len()
                ),
            ));
        }
        if let Some(bad) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(ValidationError::new(
                "id",
                format!("may contain only A-Z, a-z, 0-9, '_' and '-' (found {bad:?})"),
            ));
        }
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
}

impl SaleSpec {
    /// Starts a spec for `id` with `total_stock` items of one SKU named
    /// [`crate::sku::DEFAULT_SKU`], a per-user limit of 1 and no window.
    pub fn builder(
        id: impl Into<String>,
        total_stock: u32,
    ) -> Result<SaleSpecBuilder, ValidationError> {
        let id = SaleId::new(id)?;
        check_stock("stock", total_stock)?;
        Ok(SaleSpecBuilder {
            spec: SaleSpec {
                id,
                total_stock,
                skus: vec![SkuSpec {
                    id: SkuId::default_sku(),
                    stock: total_stock,
                }],
                per_user_limit: 1,
                per_sku_limit: None,
                starts_at: None,
                ends_at: None,
                hold: None,
            },
        })
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

    /// The window state at `now`, ignoring stock.
    pub fn window_at(&self, now: DateTime<Utc>) -> Window {
        if self.starts_at.is_some_and(|start| now < start) {
            Window::NotStarted
        } else if self.ends_at.is_some_and(|end| now >= end) {
            Window::Ended
        } else {
            Window::Open
        }
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

    /// Checks the window and returns the spec.
    pub fn build(self) -> Result<SaleSpec, ValidationError> {
        if let (Some(start), Some(end)) = (self.spec.starts_at, self.spec.ends_at)
            && end <= start
        {
            return Err(ValidationError::new(
                "ends_at",
                format!("must be after starts_at ({start})"),
            ));
        }
        Ok(self.spec)
    }
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

/// What an engine knows about a sale at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleSnapshot {
    /// The sale's specification.
    pub spec: SaleSpec,
    /// Items still available, across every SKU.
    pub remaining: u32,
    /// Items held by live (not cancelled) orders: always `total - remaining`.
    pub sold: u32,
    /// Status at the instant of the snapshot: sold out when every SKU is.
    pub status: SaleStatus,
    /// Each SKU's stock, in the spec's order.
    pub skus: Vec<SkuSnapshot>,
}

/// One SKU of a [`SaleSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuSnapshot {
    /// The SKU id.
    pub id: SkuId,
    /// Its stock.
    pub stock: u32,
    /// Its items still available.
    pub remaining: u32,
    /// Its items held by live orders.
    pub sold: u32,
    /// The sale's status, sold out when this SKU is.
    pub status: SaleStatus,
}

impl SaleSnapshot {
    /// Builds a snapshot from the spec, each SKU's remaining stock (in the
    /// spec's order; a missing figure counts as none left) and the instant.
    pub fn at(spec: SaleSpec, remaining: &[u32], now: DateTime<Utc>) -> Self {
        let status_of = |left: u32| match spec.window_at(now) {
            Window::NotStarted => SaleStatus::Upcoming,
            Window::Ended => SaleStatus::Ended,
            Window::Open if left == 0 => SaleStatus::SoldOut,
            Window::Open => SaleStatus::Open,
        };
        let skus: Vec<SkuSnapshot> = spec
            .skus()
            .iter()
            .enumerate()
            .map(|(i, sku)| {
                let left = remaining.get(i).copied().unwrap_or(0).min(sku.stock);
                SkuSnapshot {
                    id: sku.id.clone(),
                    stock: sku.stock,
                    remaining: left,
                    sold: sku.stock - left,
                    status: status_of(left),
                }
            })
            .collect();
        let total_left: u32 = skus.iter().map(|s| s.remaining).sum();
        Self {
            status: status_of(total_left),
            sold: spec.total_stock().saturating_sub(total_left),
            remaining: total_left,
            skus,
            spec,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sale_ids_accept_the_alphabet_and_length() {
        assert!(SaleId::new("a").is_ok());
        assert!(SaleId::new("A-z_09").is_ok());
        assert!(SaleId::new("x".repeat(64)).is_ok());
        let too_long = SaleId::new("x".repeat(65)).unwrap_err();
        assert_eq!(too_long.field, "id");
        assert!(SaleId::new("").is_err());
        let braces = SaleId::new("a{b}").unwrap_err();
        assert!(braces.reason.contains("'{'"), "{braces}");
        assert!(SaleId::new("a b").is_err());
        assert!(SaleId::new("é").is_err());
    }

    #[test]
    fn stock_and_limit_bounds() {
        assert!(SaleSpec::builder("s", 0).is_err());
        assert!(SaleSpec::builder("s", 1).is_ok());
        assert!(SaleSpec::builder("s", MAX_TOTAL_STOCK).is_ok());
        assert!(SaleSpec::builder("s", MAX_TOTAL_STOCK + 1).is_err());
        let err = SaleSpec::builder("s", 5)
            .unwrap()
            .per_user_limit(0)
            .unwrap_err();
        assert_eq!(err.field, "per_user_limit");
        let err = SaleSpec::builder("s", 5)
            .unwrap()
            .per_user_limit(MAX_PER_USER_LIMIT + 1)
            .unwrap_err();
        assert_eq!(err.field, "per_user_limit");
        assert!(
            SaleSpec::builder("s", 5)
                .unwrap()
                .per_user_limit(MAX_PER_USER_LIMIT)
                .is_ok()
        );
        assert_eq!(
            SaleSpec::builder("s", 5)
                .unwrap()
                .build()
                .unwrap()
                .per_user_limit(),
            1
        );
    }

    #[test]
    fn window_must_end_after_it_starts() {
        let t = DateTime::<Utc>::from_timestamp(1_000, 0).unwrap();
        let err = SaleSpec::builder("s", 5)
            .unwrap()
            .starts_at(t)
            .ends_at(t)
            .build()
            .unwrap_err();
        assert_eq!(err.field, "ends_at");
    }

    #[test]
    fn snapshot_status_follows_window_then_stock() {
        let start = DateTime::<Utc>::from_timestamp(1_000, 0).unwrap();
        let end = DateTime::<Utc>::from_timestamp(2_000, 0).unwrap();
        let spec = SaleSpec::builder("s", 5)
            .unwrap()
            .starts_at(start)
            .ends_at(end)
            .build()
            .unwrap();
        let at = |secs| DateTime::<Utc>::from_timestamp(secs, 0).unwrap();
        assert_eq!(
            SaleSnapshot::at(spec.clone(), &[5], at(999)).status,
            SaleStatus::Upcoming
        );
        assert_eq!(
            SaleSnapshot::at(spec.clone(), &[5], at(1_000)).status,
            SaleStatus::Open
        );
        assert_eq!(
            SaleSnapshot::at(spec.clone(), &[0], at(1_500)).status,
            SaleStatus::SoldOut
        );
        assert_eq!(
            SaleSnapshot::at(spec.clone(), &[3], at(2_000)).status,
            SaleStatus::Ended
        );
        assert_eq!(SaleSnapshot::at(spec, &[3], at(1_500)).sold, 2);
    }

    #[test]
    fn sale_id_deserialization_validates() {
        assert!(serde_json::from_str::<SaleId>("\"ok-id\"").is_ok());
        assert!(serde_json::from_str::<SaleId>("\"not ok\"").is_err());
    }
}
