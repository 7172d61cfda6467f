//! What the checker judges: the sale's terms, the recorded history, the
//! store's orders and what happened after the faults healed. Plain data,
//! so the checker can be fed hand-made histories.

use serde_json::Value;

use crate::history::{Answer, History};

/// The sale of a round.
#[derive(Debug, Clone)]
pub struct Terms {
    /// The sale id.
    pub sale: String,
    /// Total stock.
    pub stock: u64,
    /// Items one buyer may hold.
    pub per_user_limit: u64,
    /// The sale's payment hold in seconds (`None`: orders are confirmed at
    /// once).
    pub hold_seconds: Option<u64>,
}

/// An order as the store lists it (`GET /v1/sales/{id}/orders`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOrder {
    /// The order id.
    pub order_id: String,
    /// The buyer.
    pub user_id: String,
    /// Items.
    pub quantity: u64,
    /// `confirmed`, `held`, `cancelled`, `expired`.
    pub status: String,
}

impl StoreOrder {
    /// Whether the order holds stock (confirmed or held).
    pub fn is_live(&self) -> bool {
        matches!(self.status.as_str(), "confirmed" | "held")
    }

    /// Reads one order of a listing page.
    pub fn from_json(order: &Value) -> Option<Self> {
        Some(Self {
            order_id: order["order_id"].as_str()?.to_owned(),
            user_id: order["user_id"].as_str()?.to_owned(),
            quantity: order["quantity"].as_u64()?,
            status: order["status"].as_str()?.to_owned(),
        })
    }
}

/// What happened once the faults were healed. Each `Err` says what never
/// happened within its bound.
#[derive(Debug, Clone)]
pub struct Healing {
    /// Every instance answered `/readyz` 200.
    pub ready: Result<(), String>,
    /// Fresh buyers bought until every instance answered `sold_out`.
    pub sold_out_everywhere: Result<(), String>,
    /// The store's live total stopped changing.
    pub settled: Result<(), String>,
    /// `GET /v1/sales/{id}` on each instance, in instance order.
    pub sale_views: Vec<Answer>,
}

impl Healing {
    /// Everything healed, and every instance reports the sale `sold_out`
    /// with `sold`; for hand-made histories.
    pub fn healed(instances: usize, stock: u64) -> Self {
        let view = Answer::Http {
            status: 200,
            body: serde_json::json!({"stock": stock, "remaining": 0, "sold": stock}),
            retry_after: None,
        };
        Self {
            ready: Ok(()),
            sold_out_everywhere: Ok(()),
            settled: Ok(()),
            sale_views: vec![view; instances],
        }
    }
}

/// Everything the checker needs about one round.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The sale.
    pub terms: Terms,
    /// Every request and its answer, crowd and final phase.
    pub history: History,
    /// The store's orders of the sale (all pages), or why they could not be
    /// read.
    pub store: Result<Vec<StoreOrder>, String>,
    /// After the faults.
    pub healing: Healing,
    /// The instances' `expired` counters of the sale (`None` for a sale
    /// without holds).
    pub expiry_counters: Option<ExpiryCounters>,
}

/// `stockade_orders_total{sale,event="expired"}` as the instances' `/metrics`
/// told it. A killed instance loses its counters, so its count is also
/// scraped just before the kill; each `Err` says why a scrape failed.
#[derive(Debug, Clone, Default)]
pub struct ExpiryCounters {
    /// Scraped once the store settled, in instance order.
    pub after_healing: Vec<Result<u64, String>>,
    /// Scraped from a victim just before it was SIGKILLed: (instance, count).
    pub before_kills: Vec<(usize, Result<u64, String>)>,
}
