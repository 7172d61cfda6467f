//! Sales: the body that creates one and the body that shows one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use stockade_core::{RoomConfig, SaleSnapshot, SaleStatus, ValidationError};
use utoipa::ToSchema;

/// `POST /v1/sales`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSale {
    /// 1 to 64 characters from `A-Za-z0-9_-`.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub id: String,
    /// Items on sale, 1 to 1,000,000,000.
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    pub stock: u32,
    /// Items one buyer may hold, 1 to 1,000,000,000 (default 1).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    pub per_user_limit: Option<u32>,
    /// When buying opens (RFC 3339).
    pub starts_at: Option<DateTime<Utc>>,
    /// When buying closes (RFC 3339), after `starts_at`.
    pub ends_at: Option<DateTime<Utc>>,
    /// Payment hold, 1 to 86,400 seconds: orders are `held` until paid
    /// (`POST /v1/orders/{id}/confirm`) and expire unpaid after this long,
    /// their items going back to the stock. Without it, orders are
    /// confirmed at once.
    #[schema(minimum = 1, maximum = 86_400)]
    pub hold_seconds: Option<u64>,
    /// A waiting room: purchases then need an `Admission-Token`.
    pub waiting_room: Option<WaitingRoom>,
}

impl CreateSale {
    /// A sale of `stock` items under `id`, with the defaults for the rest
    /// (set the public fields for more).
    pub fn new(id: impl Into<String>, stock: u32) -> Self {
        Self {
            id: id.into(),
            stock,
            per_user_limit: None,
            starts_at: None,
            ends_at: None,
            hold_seconds: None,
            waiting_room: None,
        }
    }
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
    /// Items on sale in total.
    pub stock: u32,
    /// Items left.
    pub remaining: u32,
    /// Items held by live orders.
    pub sold: u32,
    /// Items one buyer may hold.
    pub per_user_limit: u32,
    /// `upcoming`, `open`, `sold_out` or `ended`.
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
}

impl From<SaleSnapshot> for Sale {
    fn from(snapshot: SaleSnapshot) -> Self {
        let spec = &snapshot.spec;
        Self {
            id: spec.id().to_string(),
            stock: spec.total_stock(),
            remaining: snapshot.remaining,
            sold: snapshot.sold,
            per_user_limit: spec.per_user_limit(),
            status: snapshot.status,
            starts_at: spec.starts_at(),
            ends_at: spec.ends_at(),
            hold_seconds: spec.hold().map(|d| d.as_secs()),
            waiting_room: None,
        }
    }
}
