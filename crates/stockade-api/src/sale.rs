//! Sales: the body that creates one and the body that shows one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::{Allocation, DrawTerms};

use stockade_core::{
    Item, RoomConfig, SaleSnapshot, SaleStatus, SkuId, SkuSpec, TierName, TierSpec, ValidationError,
};
use utoipa::ToSchema;

/// `POST /v1/sales`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSale {
    /// 1 to 64 characters from `A-Za-z0-9_-`.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub id: String,
    /// Items on sale, 1 to 1,000,000,000: one SKU named `default`. Give
    /// either `stock` or `skus`.
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock: Option<u32>,
    /// The SKUs on sale (sizes, colours, the parts of a bundle), each with
    /// its own stock: 1 to 100, distinct ids, 1,000,000,000 items at most
    /// in all. Give either `stock` or `skus`.
    #[schema(min_items = 1, max_items = 100)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skus: Option<Vec<SkuStock>>,
    /// Items one buyer may hold across every SKU, 1 to 1,000,000,000
    /// (default 1).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_user_limit: Option<u32>,
    /// Items one buyer may hold of any one SKU, 1 to 1,000,000,000
    /// (default: only `per_user_limit` applies).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_sku_limit: Option<u32>,
    /// When buying opens (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<DateTime<Utc>>,
    /// When buying closes (RFC 3339), after `starts_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// Payment hold, 1 to 86,400 seconds: orders are `held` until paid
    /// (`POST /v1/orders/{id}/confirm`) and expire unpaid after this long,
    /// their items going back to the stock. Without it, orders are
    /// confirmed at once.
    #[schema(minimum = 1, maximum = 86_400)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u64>,
    /// A waiting room: purchases then need an `Admission-Token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<WaitingRoom>,
    /// Buyer tiers (up to 10): stock reserved for a tier's buyers, their
    /// own per-user limit and an earlier start.
    #[schema(max_items = 10)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<Tier>>,
    /// When unsold reserved stock joins the common stock (RFC 3339, before
    /// `ends_at`). Default: reserves are kept to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_reserved_at: Option<DateTime<Utc>>,
    /// `race` (default: whoever buys first) or `draw` (buyers enter during
    /// `entries_open_at`..`entries_close_at`, then a draw picks the
    /// winners; the sale must be open at `entries_close_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// A draw sale: when entries open (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_open_at: Option<DateTime<Utc>>,
    /// A draw sale: when entries close and the draw is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_close_at: Option<DateTime<Utc>>,
    /// Spreads one hot sale over several Redis Cluster primaries: its stock
    /// split over this many counts (1 to 64, default 1, at most one per
    /// item), each buyer always decided by the same one. One SKU and no
    /// tiers. Only the Redis engine splits; the others keep one count.
    #[schema(minimum = 1, maximum = 64)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u16>,
}

impl CreateSale {
    /// The SKUs the body asks for: `skus`, or `stock` as one SKU named
    /// `default`; an error if it gives both or neither.
    pub fn sku_specs(&self) -> Result<Vec<SkuSpec>, ValidationError> {
        match (&self.stock, &self.skus) {
            (Some(stock), None) => Ok(vec![SkuSpec {
                id: SkuId::default_sku(),
                stock: *stock,
            }]),
            (None, Some(skus)) => skus
                .iter()
                .map(|sku| {
                    Ok(SkuSpec {
                        id: SkuId::new(sku.id.as_str())?,
                        stock: sku.stock,
                    })
                })
                .collect(),
            (Some(_), Some(_)) => Err(ValidationError::new(
                "skus",
                "give either stock (one SKU) or skus, not both",
            )),
            (None, None) => Err(ValidationError::new(
                "stock",
                "is required: give stock (one SKU) or skus",
            )),
        }
    }

    /// A sale of `stock` items under `id`, with the defaults for the rest
    /// (set the public fields for more).
    pub fn new(id: impl Into<String>, stock: u32) -> Self {
        Self {
            id: id.into(),
            stock: Some(stock),
            skus: None,
            per_user_limit: None,
            per_sku_limit: None,
            starts_at: None,
            ends_at: None,
            hold_seconds: None,
            waiting_room: None,
            tiers: None,
            release_reserved_at: None,
            allocation: None,
            entries_open_at: None,
            entries_close_at: None,
            shards: None,
        }
    }

    /// The tiers the body asks for, checked one by one (the sale checks
    /// them against its SKUs).
    pub fn tier_specs(&self) -> Result<Vec<TierSpec>, ValidationError> {
        self.tiers.iter().flatten().map(Tier::spec).collect()
    }
}

/// A buyer tier of a sale.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// 1 to 32 characters from `A-Za-z0-9_-`: the value of the buyer's tier
    /// claim (or the trusted caller's `tier`).
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_-]+$")]
    pub name: String,
    /// Items of each SKU held back for the tier's buyers: SKU id → items.
    /// The reserves of every tier must fit each SKU's stock.
    #[serde(default)]
    pub reserved: BTreeMap<String, u32>,
    /// The tier's per-user limit (default: the sale's).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    pub per_user_limit: Option<u32>,
    /// When the tier's buyers may start, no later than the sale's
    /// `starts_at` (default: with the sale).
    pub starts_at: Option<DateTime<Utc>>,
}

impl Tier {
    fn spec(&self) -> Result<TierSpec, ValidationError> {
        Ok(TierSpec {
            name: TierName::new(self.name.as_str())?,
            reserved: self
                .reserved
                .iter()
                .map(|(sku, quantity)| {
                    Ok(Item {
                        sku: SkuId::new(sku.as_str())?,
                        quantity: *quantity,
                    })
                })
                .collect::<Result<_, ValidationError>>()?,
            per_user_limit: self.per_user_limit,
            starts_at: self.starts_at,
        })
    }
}

impl From<&TierSpec> for Tier {
    fn from(tier: &TierSpec) -> Self {
        Self {
            name: tier.name.to_string(),
            reserved: tier
                .reserved
                .iter()
                .map(|item| (item.sku.to_string(), item.quantity))
                .collect(),
            per_user_limit: tier.per_user_limit,
            starts_at: tier.starts_at,
        }
    }
}

/// A SKU of a new sale and its stock.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SkuStock {
    /// 1 to 64 characters from `A-Za-z0-9_-`, unique within the sale.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub id: String,
    /// Its items, 1 to 1,000,000,000.
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    pub stock: u32,
}

/// One SKU of a sale as it stands.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkuView {
    /// The SKU id.
    pub id: String,
    /// Its items in all.
    pub stock: u32,
    /// Its items still available.
    pub remaining: u32,
    /// Its items held by live orders.
    pub sold: u32,
    /// `upcoming`, `open`, `sold_out` (this SKU) or `ended`.
    #[schema(value_type = String, example = "open")]
    pub status: SaleStatus,
}

fn default_factor() -> f64 {
    f64::from(RoomConfig::DEFAULT_FACTOR_MILLI) / 1_000.0
}

/// A sale's waiting room.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitingRoom {
    /// Buyers admitted per second at most, 1 to 100,000.
    #[schema(minimum = 1, maximum = 100_000)]
    pub admit_per_second: u32,
    /// How long an admission token is valid, 1 to 3,600 seconds.
    #[schema(minimum = 1, maximum = 3_600)]
    pub admission_ttl_seconds: u64,
    /// Outstanding admissions never exceed the remaining stock times this,
    /// 1.0 to 10.0 (default 1.5).
    #[serde(default = "default_factor")]
    #[schema(minimum = 1.0, maximum = 10.0, default = 1.5)]
    pub admission_factor: f64,
}

impl WaitingRoom {
    /// The validated settings.
    pub fn config(&self) -> Result<RoomConfig, ValidationError> {
        let factor = self.admission_factor * 1_000.0;
        if !factor.is_finite() || !(0.0..=f64::from(u32::MAX)).contains(&factor) {
            return Err(ValidationError::new(
                "waiting_room.admission_factor",
                "must be a number between 1.0 and 10.0",
            ));
        }
        if self.admission_ttl_seconds > RoomConfig::MAX_TTL.as_secs() {
            return Err(ValidationError::new(
                "waiting_room.admission_ttl_seconds",
                format!(
                    "must be between 1 and {} seconds",
                    RoomConfig::MAX_TTL.as_secs()
                ),
            ));
        }
        RoomConfig::new(
            self.admit_per_second,
            std::time::Duration::from_secs(self.admission_ttl_seconds),
            factor.round() as u32,
        )
    }
}

impl From<RoomConfig> for WaitingRoom {
    fn from(config: RoomConfig) -> Self {
        Self {
            admit_per_second: config.admit_per_second,
            admission_ttl_seconds: config.admission_ttl.as_secs(),
            admission_factor: f64::from(config.admission_factor_milli) / 1_000.0,
        }
    }
}

/// A sale and its stock.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Sale {
    /// The sale id.
    pub id: String,
    /// Items on sale in total, across every SKU.
    pub stock: u32,
    /// Items left.
    pub remaining: u32,
    /// Items held by live orders.
    pub sold: u32,
    /// Each SKU's stock, in the order given at creation (one SKU named
    /// `default` for a sale created with `stock`; empty from a service
    /// older than SKUs).
    #[serde(default)]
    pub skus: Vec<SkuView>,
    /// Items one buyer may hold, across every SKU.
    pub per_user_limit: u32,
    /// Items one buyer may hold of any one SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_sku_limit: Option<u32>,
    /// `upcoming`, `open`, `sold_out` (every SKU) or `ended`.
    #[schema(value_type = String, example = "open")]
    pub status: SaleStatus,
    /// When buying opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<DateTime<Utc>>,
    /// When buying closes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// Hold time of unpaid orders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u64>,
    /// The sale's waiting room, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<WaitingRoom>,
    /// The buyer tiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<Tier>,
    /// When unsold reserved stock joins the common stock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_reserved_at: Option<DateTime<Utc>>,
    /// `race` or `draw`.
    #[serde(default)]
    pub allocation: Allocation,
    /// A draw sale's entry window and seed commitment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<DrawTerms>,
    /// Over how many shards the stock is spread (1: not split).
    #[serde(default = "one_shard")]
    pub shards: u16,
}

fn one_shard() -> u16 {
    1
}

impl From<SaleSnapshot> for Sale {
    fn from(snapshot: SaleSnapshot) -> Self {
        let spec = &snapshot.spec;
        Self {
            id: spec.id().to_string(),
            stock: spec.total_stock(),
            remaining: snapshot.remaining,
            sold: snapshot.sold,
            skus: snapshot
                .skus
                .iter()
                .map(|sku| SkuView {
                    id: sku.id.to_string(),
                    stock: sku.stock,
                    remaining: sku.remaining,
                    sold: sku.sold,
                    status: sku.status,
                })
                .collect(),
            per_user_limit: spec.per_user_limit(),
            per_sku_limit: spec.per_sku_limit(),
            status: snapshot.status,
            starts_at: spec.starts_at(),
            ends_at: spec.ends_at(),
            hold_seconds: spec.hold().map(|d| d.as_secs()),
            waiting_room: None,
            tiers: spec.tiers().iter().map(Tier::from).collect(),
            release_reserved_at: spec.release_reserved_at(),
            allocation: Allocation::Race,
            draw: None,
            shards: spec.shards(),
        }
    }
}
