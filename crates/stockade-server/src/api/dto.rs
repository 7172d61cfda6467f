//! The request and response bodies of the API (and of its OpenAPI schema).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use stockade_core::{Order, SaleSnapshot, SaleStatus};
use utoipa::ToSchema;

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
    /// Items one buyer may hold (default 1).
    #[schema(minimum = 1)]
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
