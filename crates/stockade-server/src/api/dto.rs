//! The request and response bodies of the API (and of its OpenAPI schema).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use stockade_core::{Order, SaleSnapshot, SaleStatus, ValidationError};
use utoipa::ToSchema;

use crate::waiting_room::RoomConfig;

/// `POST /v1/sales`.
#[derive(Debug, Deserialize, ToSchema)]
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

fn default_factor() -> f64 {
    f64::from(crate::waiting_room::RoomConfig::DEFAULT_FACTOR_MILLI) / 1_000.0
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
#[derive(Debug, Serialize, ToSchema)]
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

fn one() -> u32 {
    1
}

/// `POST /v1/sales/{id}/purchases`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PurchaseRequest {
    /// The buyer: 1 to 128 bytes, not blank, without control,
    /// bidirectional or zero-width characters. Required unless the request
    /// carries a buyer's JWT (the buyer is then its `sub`; naming anyone
    /// else is 403 `user_mismatch`). The pattern: some character that is
    /// not whitespace, and none of the control, bidirectional or
    /// zero-width characters `stockade_core::validation::check_identifier`
    /// refuses.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]*[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF][^\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]*$"
    )]
    pub user_id: Option<String>,
    /// Items to buy (default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    pub quantity: u32,
}

/// An order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OrderBody {
    /// Time-ordered unique id (UUIDv7, 74 random bits).
    #[schema(format = Uuid)]
    pub order_id: String,
    /// The sale.
    pub sale_id: String,
    /// The buyer.
    pub user_id: String,
    /// Items bought.
    pub quantity: u32,
    /// `held` (awaiting payment until `expires_at`), `confirmed`,
    /// `cancelled`, `expired` (unpaid in time: items back on sale), or
    /// `pending` (accepted, not committed yet).
    pub status: String,
    /// When the engine accepted it.
    pub created_at: DateTime<Utc>,
    /// Orders of a sale with a payment hold: when the hold runs out unless
    /// confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Items left in the sale right after this purchase (purchase answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
}

impl OrderBody {
    /// The order with its stored status.
    pub fn from_order(order: &Order) -> Self {
        Self::with_status(order, order.status.as_str())
    }

    /// The order with another status (`pending`).
    pub fn with_status(order: &Order, status: &str) -> Self {
        Self {
            order_id: order.id.to_string(),
            sale_id: order.sale_id.to_string(),
            user_id: order.user_id.to_string(),
            quantity: order.quantity,
            status: status.to_owned(),
            created_at: order.created_at,
            expires_at: order.expires_at,
            remaining: None,
        }
    }
}

/// A page of a sale's orders.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OrderPage {
    /// Orders in creation order.
    pub orders: Vec<OrderBody>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub next_after: Option<String>,
}

/// `POST /v1/sales/{id}/queue`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinQueue {
    /// The buyer: 1 to 128 bytes. With identity on, the JWT's `sub` names
    /// the buyer: leave it out or repeat it.
    #[schema(nullable = false, min_length = 1, max_length = 128)]
    pub user_id: Option<String>,
}

/// A queue ticket and where it stands.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueTicket {
    /// The ticket: poll it at `GET /v1/queue/{ticket}`.
    pub ticket: String,
    /// The sale.
    pub sale_id: String,
    /// `waiting`, `admitted` or `closed`.
    #[schema(example = "waiting")]
    pub status: String,
    /// Place in the queue while waiting (1 is next). Before the sale
    /// starts it is provisional: early joiners are put in a random order
    /// at the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Seconds until admission at the room's rate, while waiting (it can
    /// be longer when admission waits for stock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_wait_seconds: Option<u64>,
    /// When admitted: send it as the `Admission-Token` header of the purchase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// When admitted: when the token expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_expires_at: Option<DateTime<Utc>>,
    /// When closed: `sold_out`, `ended` or `admission_expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_reason: Option<String>,
}

/// The error shape of every non-2xx answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code, e.g. `sold_out`, `invalid_request`.
    pub code: String,
    /// A message for people.
    pub message: String,
}
