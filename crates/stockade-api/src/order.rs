//! Purchases and orders: the purchase request, an order as a client sees
//! it, and its status.

use chrono::{DateTime, Utc};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};
use stockade_core::{Item, Order, OrderId, SkuId, ValidationError, WantedItem};
use utoipa::ToSchema;

/// Where an order stands, as a client sees it: the store's four statuses
/// and `pending`, an order the engine accepted that the store has not
/// committed yet. (An order the store refused is never shown as an order:
/// it is answered 409 or 404 `order_failed`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Accepted, not committed yet: follow it at `GET /v1/orders/{id}`.
    Pending,
    /// Awaiting payment until `expires_at`.
    Held,
    /// Sold for good.
    Confirmed,
    /// Cancelled: its items went back on sale.
    Cancelled,
    /// Unpaid in time: its items went back on sale.
    Expired,
}

impl OrderStatus {
    /// The status as sent on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

impl From<stockade_core::OrderStatus> for OrderStatus {
    fn from(status: stockade_core::OrderStatus) -> Self {
        use stockade_core::OrderStatus as Stored;
        match status {
            Stored::Held => Self::Held,
            Stored::Confirmed => Self::Confirmed,
            Stored::Cancelled => Self::Cancelled,
            Stored::Expired => Self::Expired,
        }
    }
}

impl std::fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn one() -> u32 {
    1
}

/// `POST /v1/sales/{id}/purchases`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PurchaseRequest {
    /// The buyer: 1 to 128 bytes, not blank, without control,
    /// bidirectional or zero-width characters. Required unless the request
    /// carries a buyer's JWT (the buyer is then its `sub`; naming anyone
    /// else is 403 `user_mismatch`). The pattern: no whitespace at either
    /// end, and none of the control, bidirectional or zero-width
    /// characters `stockade_core::validation::check_identifier` refuses;
    /// the id is then taken in Unicode NFC (`stockade_core::UserId`).
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF](?:[^\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]*[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF])?$"
    )]
    pub user_id: Option<String>,
    /// Items to buy of `sku` (default 1). Not with `items`.
    #[schema(minimum = 1, maximum = 1_000_000_000, default = 1)]
    pub quantity: Option<u32>,
    /// The SKU to buy; may be left out on a sale of one SKU. Not with
    /// `items`.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub sku: Option<String>,
    /// A bundle: several SKUs bought all or nothing (1 to 20 items, each
    /// SKU once). Not with `sku` or `quantity`.
    #[schema(min_items = 1, max_items = 20)]
    pub items: Option<Vec<ItemBody>>,
    /// The buyer's tier, with identity off (the trusted caller's word):
    /// with identity on it comes from the JWT's tier claim, and naming
    /// another is 403. A tier the sale does not have makes no difference.
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_-]+$")]
    pub tier: Option<String>,
}

impl PurchaseRequest {
    /// A purchase of `quantity` items of the sale's only SKU.
    pub fn of(user_id: Option<String>, quantity: u32) -> Self {
        Self {
            user_id,
            quantity: Some(quantity),
            sku: None,
            items: None,
            tier: None,
        }
    }

    /// The items asked for, checked: `items`, or one item of `sku` (or of
    /// the sale's only SKU) and `quantity` (default 1).
    pub fn wanted(&self) -> Result<Vec<WantedItem>, ValidationError> {
        let Some(items) = &self.items else {
            return Ok(vec![WantedItem {
                sku: self.sku.clone().map(SkuId::new).transpose()?,
                quantity: self.quantity.unwrap_or(1),
            }]);
        };
        if self.sku.is_some() || self.quantity.is_some() {
            return Err(ValidationError::new(
                "items",
                "give either items or sku and quantity, not both",
            ));
        }
        let wanted = items
            .iter()
            .map(|item| {
                Ok(WantedItem {
                    sku: Some(SkuId::new(item.sku.as_str())?),
                    quantity: item.quantity,
                })
            })
            .collect::<Result<Vec<_>, ValidationError>>()?;
        stockade_core::sku::check_wanted(&wanted)?;
        Ok(wanted)
    }
}

impl From<&Item> for ItemBody {
    fn from(item: &Item) -> Self {
        Self {
            sku: item.sku.to_string(),
            quantity: item.quantity,
        }
    }
}

/// An item of a bundle or an order: a quantity of one SKU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemBody {
    /// The SKU.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub sku: String,
    /// How many (default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 1_000_000_000, default = 1)]
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
    /// Items bought, across every SKU.
    pub quantity: u32,
    /// What was bought: a quantity of each SKU (empty from a service
    /// older than SKUs).
    #[serde(default)]
    pub items: Vec<ItemBody>,
    /// The buyer's tier, when one of the sale's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Where the order stands.
    pub status: OrderStatus,
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
        Self::with_status(order, order.status.into())
    }

    /// An order accepted by the engine and not committed yet.
    pub fn pending(order: &Order) -> Self {
        Self::with_status(order, OrderStatus::Pending)
    }

    /// Owned copies of the view's fields: one mapping from an [`Order`] to
    /// the API's fields, the view's.
    fn with_status(order: &Order, status: OrderStatus) -> Self {
        let view = OrderView::with_status(order, status);
        Self {
            order_id: view.order_id.to_string(),
            sale_id: view.sale_id.to_owned(),
            user_id: view.user_id.to_owned(),
            quantity: view.quantity,
            items: view.items.iter().map(ItemBody::from).collect(),
            tier: view.tier.map(str::to_owned),
            status: view.status,
            created_at: *view.created_at,
            expires_at: view.expires_at.copied(),
            remaining: view.remaining,
        }
    }
}

/// An order rendered straight from the [`Order`] it shows, borrowing every
/// field: the same JSON as the [`OrderBody`] made from it, without copying
/// the ids and items into owned strings first. Answers on the hot path
/// (a purchase's 201) use it; a test keeps the two shapes the same.
#[derive(Debug, Serialize)]
pub struct OrderView<'a> {
    #[serde(serialize_with = "display")]
    order_id: &'a OrderId,
    sale_id: &'a str,
    user_id: &'a str,
    quantity: u32,
    #[serde(serialize_with = "items")]
    items: &'a [Item],
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<&'a str>,
    status: OrderStatus,
    created_at: &'a DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<&'a DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining: Option<u32>,
}

impl<'a> OrderView<'a> {
    /// The order with its stored status.
    pub fn of(order: &'a Order) -> Self {
        Self::with_status(order, order.status.into())
    }

    /// An order accepted by the engine and not committed yet.
    pub fn pending(order: &'a Order) -> Self {
        Self::with_status(order, OrderStatus::Pending)
    }

    /// The same, with the items left in the sale (a purchase's answer).
    pub fn with_remaining(self, remaining: u32) -> Self {
        Self {
            remaining: Some(remaining),
            ..self
        }
    }

    /// The order's id.
    pub fn order_id(&self) -> &OrderId {
        self.order_id
    }

    fn with_status(order: &'a Order, status: OrderStatus) -> Self {
        Self {
            order_id: &order.id,
            sale_id: order.sale_id.as_str(),
            user_id: order.user_id.as_str(),
            quantity: order.quantity,
            items: &order.items,
            tier: order.tier.as_ref().map(|tier| tier.as_str()),
            status,
            created_at: &order.created_at,
            expires_at: order.expires_at.as_ref(),
            remaining: None,
        }
    }
}

fn display<S: Serializer>(id: &&OrderId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(id)
}

fn items<S: Serializer>(items: &&[Item], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct ItemView<'a> {
        sku: &'a str,
        quantity: u32,
    }
    let mut seq = serializer.serialize_seq(Some(items.len()))?;
    for item in *items {
        seq.serialize_element(&ItemView {
            sku: item.sku.as_str(),
            quantity: item.quantity,
        })?;
    }
    seq.end()
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
