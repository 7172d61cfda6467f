//! What the checker judges: the sale's terms, the recorded history, the
//! store's orders and what happened after the faults healed. Plain data,
//! so the checker can be fed hand-made histories.

use serde_json::Value;

use crate::history::{Answer, History, Item};

/// A SKU of a sale and its stock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkuStock {
    /// The SKU id.
    pub id: String,
    /// Its items.
    pub stock: u64,
}

/// The SKU of a sale created with `stock` alone.
pub const DEFAULT_SKU: &str = "default";

/// The sale of a round. Its SKUs, on a sale of several, are given to the
/// checker beside the evidence (`checker::check_with_skus`): these terms
/// are also built by the container suite, which includes this file.
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

impl Terms {
    /// The sale's SKUs: `skus` (a sale of several), or, if none are given,
    /// the one `default` SKU holding `stock`.
    pub fn sku_stocks(&self, skus: &[SkuStock]) -> Vec<SkuStock> {
        if skus.is_empty() {
            vec![SkuStock {
                id: DEFAULT_SKU.to_owned(),
                stock: self.stock,
            }]
        } else {
            skus.to_vec()
        }
    }
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
    /// What of each SKU (their quantities add up to `quantity`).
    pub items: Vec<Item>,
    /// `confirmed`, `held`, `cancelled`, `expired`.
    pub status: String,
}

impl StoreOrder {
    /// Whether the order holds stock (confirmed or held).
    pub fn is_live(&self) -> bool {
        matches!(self.status.as_str(), "confirmed" | "held")
    }

    /// Reads one order of a listing page (an order without `items` reads
    /// as having none, which the checker reports).
    pub fn from_json(order: &Value) -> Option<Self> {
        let items = match &order["items"] {
            Value::Null => Vec::new(),
            items => items
                .as_array()?
                .iter()
                .map(|item| {
                    let quantity = u32::try_from(item["quantity"].as_u64()?).ok()?;
                    Some(Item::new(item["sku"].as_str()?, quantity))
                })
                .collect::<Option<_>>()?,
        };
        Some(Self {
            order_id: order["order_id"].as_str()?.to_owned(),
            user_id: order["user_id"].as_str()?.to_owned(),
            quantity: order["quantity"].as_u64()?,
            items,
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
    /// with `sold` (and each of `skus` with its stock sold); for hand-made
    /// histories.
    pub fn healed(instances: usize, stock: u64, skus: &[SkuStock]) -> Self {
        let skus: Vec<Value> = skus
            .iter()
            .map(|s| {
                serde_json::json!({"id": s.id, "stock": s.stock, "remaining": 0, "sold": s.stock,
                                   "status": "sold_out"})
            })
            .collect();
        let view = Answer::Http {
            status: 200,
            body: serde_json::json!({"stock": stock, "remaining": 0, "sold": stock, "skus": skus}),
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
