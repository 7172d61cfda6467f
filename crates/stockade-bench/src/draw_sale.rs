//! A draw sale, simulated over HTTP (`stockade demo --draw`): a crowd
//! enters during the entry window, the service draws when it closes, and
//! the result is checked as an outside auditor would: the seed against the
//! commitment published at creation, the order recomputed from the seed
//! and the published entries, the winners' orders in the store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use serde::Serialize;
use stockade_api::{Allocation, CreateSale, EntryRequest, ErrorCode, OrderStatus, SkuStock};
use stockade_client::Client;
use stockade_core::draw::{EntryResult, Seed, draw_order};

use crate::http_load::{self, LoadError};
use crate::scenario::skus;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct DrawSaleConfig {
    /// The service.
    pub url: String,
    /// Its admin token (creates the sale, lists its orders).
    pub admin_token: String,
    /// The sale id.
    pub sale: String,
    /// Items on sale.
    pub stock: u32,
    /// SKUs the stock is split over ([`skus`]).
    pub skus: u32,
    /// Buyers who enter (one item each).
    pub buyers: usize,
    /// Entries in flight at once.
    pub concurrency: usize,
}

/// What happened, and whether it adds up.
#[derive(Debug, Clone, Serialize)]
pub struct DrawSaleReport {
    /// Buyers who tried to enter.
    pub buyers: usize,
    /// Items on sale.
    pub stock: u32,
    /// Entries the service took.
    pub entered: u64,
    /// Entries refused as `entries_closed` after the window closed: the
    /// crowd was slower than the window (a loaded machine), which the
    /// service rightly refuses.
    pub late: u64,
    /// Entries that won an order.
    pub won: u64,
    /// Entries left waiting (or lost) when the stock ran out.
    pub not_drawn: u64,
    /// Committed orders of the sale.
    pub orders: u64,
    /// The seed matched the commitment published at creation.
    pub seed_verified: bool,
    /// The published order is the one the seed gives.
    pub order_recomputed: bool,
    /// From the first entry to the published draw.
    pub elapsed_ms: f64,
    /// Everything that does not add up; empty when the draw is right.
    pub problems: Vec<String>,
}

impl DrawSaleReport {
    /// Whether the draw is right.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Creates the draw sale, sends the entries (`on_entry` is called once
/// per answer), waits for the draw and checks it.
pub async fn run(
    config: &DrawSaleConfig,
    on_entry: Arc<dyn Fn() + Send + Sync>,
) -> Result<DrawSaleReport, LoadError> {
    let client = http_load::client(&config.url, &config.admin_token, config.concurrency)
        .map_err(|e| LoadError::Setup(format!("--url: {e}")))?;
    // Long enough for the crowd to enter (about 2,000 entries a second on
    // a laptop, with room to spare for a loaded machine: the store closes
    // entries on its own clock, at the insert), closed soon after.
    let window = TimeDelta::seconds(4 + (config.buyers / 1_000) as i64);
    let opens = Utc::now() - TimeDelta::seconds(1);
    let closes = opens + TimeDelta::seconds(1) + window;
    let mut sale = CreateSale::new(config.sale.as_str(), config.stock);
    if config.skus > 1 {
        sale.stock = None;
        sale.skus = Some(
            skus::specs(config.stock, config.skus)
                .into_iter()
                .map(|sku| SkuStock {
                    id: sku.id.to_string(),
                    stock: sku.stock,
                })
                .collect(),
        );
    }
    sale.allocation = Some(Allocation::Draw);
    sale.entries_open_at = Some(opens);
    sale.entries_close_at = Some(closes);
    let created = client
        .create_sale(&sale)
        .await
        .map_err(|e| LoadError::Service(format!("creating the draw sale failed: {e}")))?;
    let commitment = created
        .body
        .draw
        .map(|draw| draw.seed_commitment)
        .ok_or_else(|| LoadError::Service("the sale was created without a draw".into()))?;
    let started = Instant::now();
    let entered = enter_all(&client, config, closes, on_entry).await;
    let mut problems = Vec::new();
    if entered.refused > 0 {
        problems.push(format!(
            "{} entries were refused within the window ({})",
            entered.refused,
            entered.reasons.join(", ")
        ));
    }
    // The draw is made within a second of the close.
    let wait = (closes - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let draw = loop {
        let draw = client
            .draw(&config.sale)
            .await
            .map_err(|e| LoadError::Service(format!("reading the draw failed: {e}")))?;
        if draw.seed.is_some() {
            break draw;
        }
        if Instant::now() > deadline {
            return Err(LoadError::Service(format!(
                "the draw was not made within 30 s of the close (state {})",
                draw.state
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    let seed = draw
        .seed
        .as_deref()
        .and_then(|seed| Seed::from_hex(seed).ok());
    let seed_verified = seed.as_ref().is_some_and(|seed| seed.matches(&commitment));
    if !seed_verified {
        problems.push("the published seed does not match the commitment".into());
    }
    let published: Vec<String> = draw.order.iter().map(|e| e.entry_id.clone()).collect();
    let order_recomputed = seed
        .as_ref()
        .and_then(|seed| draw_order(seed, &published).ok())
        .is_some_and(|order| order == published);
    if !order_recomputed {
        problems.push("the published order is not the one the seed gives".into());
    }
    let won = draw
        .order
        .iter()
        .filter(|e| e.result == EntryResult::Won)
        .count() as u64;
    let orders = client
        .all_orders(&config.sale)
        .await
        .map_err(|e| LoadError::Service(format!("listing the orders failed: {e}")))?
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::Confirmed | OrderStatus::Held))
        .count() as u64;
    if draw.order.len() as u64 != entered.taken {
        problems.push(format!(
            "{} entries taken but {} in the draw",
            entered.taken,
            draw.order.len()
        ));
    }
    if orders != won {
        problems.push(format!(
            "{won} entries won but the store has {orders} orders"
        ));
    }
    let expected = entered.taken.min(u64::from(config.stock));
    if config.skus <= 1 && won != expected {
        problems.push(format!("{won} entries won, {expected} expected"));
    }
    Ok(DrawSaleReport {
        buyers: config.buyers,
        stock: config.stock,
        entered: entered.taken,
        late: entered.late,
        won,
        not_drawn: entered.taken - won,
        orders,
        seed_verified,
        order_recomputed,
        elapsed_ms,
        problems,
    })
}

/// What the crowd's entries came to.
struct Entered {
    taken: u64,
    /// Refused as closed, answered after `closes` on this machine's clock.
    late: u64,
    /// Refused otherwise, or as closed before the window closed.
    refused: u64,
    reasons: Vec<String>,
}

/// One entry's answer.
enum Answer {
    Taken,
    Late,
    Refused(String),
}

/// Whether a refusal with `code`, answered at `now`, is an entry sent too
/// late: `entries_closed` answered after the close was judged after it
/// too; answered before it, the service closed early.
fn late_entry(code: Option<ErrorCode>, closes: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    code == Some(ErrorCode::EntriesClosed) && now >= closes
}

async fn enter_all(
    client: &Client,
    config: &DrawSaleConfig,
    closes: DateTime<Utc>,
    on_entry: Arc<dyn Fn() + Send + Sync>,
) -> Entered {
    let answers: Vec<Answer> = futures::stream::iter(0..config.buyers)
        .map(|b| {
            let on_entry = Arc::clone(&on_entry);
            async move {
                let buyer = format!("buyer-{b}");
                let entry = EntryRequest {
                    user_id: Some(buyer.clone()),
                    sku: skus::of_buyer(&buyer, config.skus),
                    ..EntryRequest::default()
                };
                let answer = client.enter_draw(&config.sale, &entry).await;
                on_entry();
                match answer {
                    Ok(_) => Answer::Taken,
                    Err(error) if late_entry(error.code(), closes, Utc::now()) => Answer::Late,
                    Err(error) => Answer::Refused(
                        error
                            .code()
                            .map_or_else(|| error.to_string(), |code| code.to_string()),
                    ),
                }
            }
        })
        .buffer_unordered(config.concurrency.max(1))
        .collect()
        .await;
    let mut entered = Entered {
        taken: 0,
        late: 0,
        refused: 0,
        reasons: Vec::new(),
    };
    for answer in answers {
        match answer {
            Answer::Taken => entered.taken += 1,
            Answer::Late => entered.late += 1,
            Answer::Refused(reason) => {
                entered.refused += 1;
                entered.reasons.push(reason);
            }
        }
    }
    entered.reasons.sort();
    entered.reasons.dedup();
    entered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_entries_closed_answered_after_the_close_is_late() {
        let closes = Utc::now();
        let closed = Some(ErrorCode::EntriesClosed);
        assert!(late_entry(
            closed,
            closes,
            closes + TimeDelta::milliseconds(1)
        ));
        assert!(
            !late_entry(closed, closes, closes - TimeDelta::milliseconds(1)),
            "closed early"
        );
        assert!(!late_entry(
            Some(ErrorCode::SoldOut),
            closes,
            closes + TimeDelta::seconds(1)
        ));
    }
}
