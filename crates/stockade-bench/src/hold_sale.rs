//! A sale with payment holds, simulated over HTTP (`stockade demo
//! --hold-seconds N --pay-ratio R`): a crowd buys, a share `R` of the
//! buyers who got an order pay for it (confirm) within the hold, the
//! others walk away; their holds expire and the items go back on sale, and
//! a second crowd buys (and pays for) them. At the end the store's orders
//! must add up: confirmed items never above the stock, no hold left once
//! every deadline has passed, every expired hold's item back in stock
//! (sold = confirmed + live holds), and the freed stock sold again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde::Serialize;
use stockade_api::{ErrorCode, OrderStatus};
use stockade_client::{Client, ClientError, Purchase};

use crate::http_load::{self, HttpSale, LoadError, Success};

/// How long after its deadline a hold is surely expired: the documented
/// second, and room for the sweep.
const EXPIRY_BOUND: Duration = Duration::from_millis(1_500);

/// What to simulate.
#[derive(Debug, Clone)]
pub struct HoldSaleConfig {
    /// The service.
    pub url: String,
    /// Its admin token (creates the sale, lists its orders).
    pub admin_token: String,
    /// The payment service's token (`STOCKADE_PAYMENTS_TOKEN`): the
    /// simulated payments confirm held orders with it.
    pub payments_token: String,
    /// The sale id.
    pub sale: String,
    /// Items on sale.
    pub stock: u32,
    /// Buyers of the first crowd (one item each).
    pub buyers: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// The sale's payment hold.
    pub hold_seconds: u64,
    /// The share of first-crowd buyers with an order who pay, 0 to 1.
    pub pay_ratio: f64,
    /// Seed of who pays and when.
    pub seed: u64,
}

/// What happened, and whether it adds up.
#[derive(Debug, Clone, Serialize)]
pub struct HoldSaleReport {
    /// Buyers of the first crowd.
    pub buyers: usize,
    /// Items on sale.
    pub stock: u32,
    /// Orders the first crowd got (held).
    pub held: u64,
    /// Of those, paid within the hold.
    pub paid: u64,
    /// Of those, paid after the hold ran out (a loaded machine), which the
    /// service rightly refused as `hold_expired`.
    pub paid_late: u64,
    /// Holds that ran out unpaid (store status `expired`).
    pub expired: u64,
    /// Orders the second crowd bought (and paid) with the freed stock.
    pub resold: u64,
    /// Orders the second crowd bought but paid for too late (refused as
    /// `hold_expired`): their items are back on sale at the end.
    pub resold_late: u64,
    /// Confirmed items at the end.
    pub confirmed: u64,
    /// Holds still live at the end (0 once every deadline has passed).
    pub live_holds: u64,
    /// `remaining` of the sale at the end.
    pub remaining: i64,
    /// From the first purchase to the end of the second crowd.
    pub elapsed_ms: f64,
    /// Everything that does not add up; empty when the invariants held.
    pub problems: Vec<String>,
}

impl HoldSaleReport {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// A two-column Markdown table.
    pub fn to_table(&self) -> String {
        let rows = [
            ("buyers (first crowd)", self.buyers.to_string()),
            ("stock", self.stock.to_string()),
            ("held by the first crowd", self.held.to_string()),
            ("paid within the hold", self.paid.to_string()),
            ("paid too late (refused)", self.paid_late.to_string()),
            (
                "expired unpaid (items back on sale)",
                self.expired.to_string(),
            ),
            ("sold again to the second crowd", self.resold.to_string()),
            (
                "second crowd paid too late (refused)",
                self.resold_late.to_string(),
            ),
            ("confirmed at the end", self.confirmed.to_string()),
            ("holds still live", self.live_holds.to_string()),
            ("remaining", self.remaining.to_string()),
            ("elapsed", format!("{:.1} s", self.elapsed_ms / 1000.0)),
            (
                "invariants",
                if self.ok() { "held" } else { "BROKEN" }.to_owned(),
            ),
        ];
        let mut table = String::from("| measure | value |\n| --- | ---: |\n");
        for (name, value) in rows {
            table.push_str(&format!("| {name} | {value} |\n"));
        }
        table
    }
}

/// Runs the simulation; `progress` is told about each answered request
/// and each phase (a line for people).
pub async fn run(
    config: &HoldSaleConfig,
    progress: Arc<dyn Fn(Phase) + Send + Sync>,
) -> Result<HoldSaleReport, LoadError> {
    if !(0.0..=1.0).contains(&config.pay_ratio) {
        return Err(LoadError::Setup(format!(
            "--pay-ratio must be between 0 and 1, not {}",
            config.pay_ratio
        )));
    }
    let client = http_load::client_builder(&config.url, config.concurrency)
        .admin_token(&config.admin_token)
        .payments_token(&config.payments_token)
        .build()
        .map_err(|e| LoadError::Setup(format!("--url: {e}")))?;
    http_load::create_sale(
        &client,
        &config.sale,
        config.stock,
        1,
        Some(config.hold_seconds),
    )
    .await?;
    let sale = HttpSale::new(client.clone(), config.sale.clone(), Success::Order);
    let started = Instant::now();
    let hold = Duration::from_secs(config.hold_seconds);
    let mut rng = rand::rngs::StdRng::seed_from_u64(config.seed);

    // The first crowd: buy, then a share pay within the first half of the
    // hold, the others never do.
    progress(Phase::Line(format!(
        "first crowd: {} buyers for {} items, {:.0}% of those with an order pay within {} s",
        config.buyers,
        config.stock,
        config.pay_ratio * 100.0,
        config.hold_seconds
    )));
    let buyers: Vec<(String, bool, Duration)> = (0..config.buyers)
        .map(|i| {
            let pays = rng.random_bool(config.pay_ratio);
            let after = hold.mul_f64(rng.random_range(0.0..0.5));
            (format!("first-{i}"), pays, after)
        })
        .collect();
    let answers = futures::stream::iter(buyers)
        .map(|(buyer, pays, after)| {
            let pay_after = pays.then_some(after);
            buy_then_pay(&client, config, buyer, pay_after, &progress)
        })
        .buffer_unordered(config.concurrency)
        .collect::<Vec<_>>()
        .await;
    let first = Tally::of(answers)?;
    let (held, paid) = (first.held, first.paid);
    progress(Phase::Line(format!(
        "{held} orders held, {paid} paid; waiting for the unpaid holds to run out"
    )));
    // Every first-crowd deadline has passed, plus the expiry bound.
    let first_deadline = started + hold;
    tokio::time::sleep_until((first_deadline + EXPIRY_BOUND).into()).await;

    // The second crowd buys what came back, and pays at once.
    let back = sale.sale_remaining().await.map_err(service_error)?;
    progress(Phase::Line(format!(
        "{back} items back on sale; a second crowd buys them and pays at once"
    )));
    let second: Vec<String> = (0..(back.max(0) as usize + 10))
        .map(|i| format!("second-{i}"))
        .collect();
    let answers = futures::stream::iter(second)
        .map(|buyer| buy_then_pay(&client, config, buyer, Some(Duration::ZERO), &progress))
        .buffer_unordered(config.concurrency)
        .collect::<Vec<_>>()
        .await;
    let second = Tally::of(answers)?;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if second.late > 0 {
        // Their holds ran out: give the expiry its bound before counting.
        tokio::time::sleep(EXPIRY_BOUND).await;
    }

    // What the store says.
    let orders = sale.orders().await.map_err(service_error)?;
    let count = |status: OrderStatus| {
        orders
            .iter()
            .filter(|o| o.status == status)
            .map(|o| u64::from(o.quantity))
            .sum::<u64>()
    };
    let (confirmed, live_holds, expired) = (
        count(OrderStatus::Confirmed),
        count(OrderStatus::Held),
        count(OrderStatus::Expired),
    );
    let remaining = sale.sale_remaining().await.map_err(service_error)?;
    let stock = u64::from(config.stock);
    let mut problems = Vec::new();
    if confirmed > stock {
        problems.push(format!(
            "{confirmed} items confirmed of a stock of {stock}: oversold"
        ));
    }
    if live_holds > 0 {
        problems.push(format!(
            "{live_holds} holds still live after every deadline passed"
        ));
    }
    if expired != held - paid + second.late {
        problems.push(format!(
            "{expired} holds expired, but {} orders went unpaid",
            held - paid + second.late
        ));
    }
    let sold = stock as i64 - remaining;
    if sold != (confirmed + live_holds) as i64 {
        problems.push(format!(
            "the sale counts {sold} items sold, but {confirmed} are confirmed and {live_holds} held: an expired hold's item did not come back"
        ));
    }
    let resold = second.paid;
    if expired > 0 && resold == 0 && remaining == 0 {
        problems.push("the freed stock was never sold again".to_owned());
    }
    Ok(HoldSaleReport {
        buyers: config.buyers,
        stock: config.stock,
        held,
        paid,
        paid_late: first.late,
        expired,
        resold,
        resold_late: second.late,
        confirmed,
        live_holds,
        remaining,
        elapsed_ms,
        problems,
    })
}

/// What one buyer came to.
enum Fate {
    /// Sold out.
    NoOrder,
    /// Got an order and did not pay.
    Held,
    /// Got an order and paid within its hold.
    Paid,
    /// Got an order and paid after its hold ran out: refused.
    PaidLate,
}

/// A crowd's buyers, counted.
struct Tally {
    held: u64,
    paid: u64,
    late: u64,
}

impl Tally {
    fn of(buyers: Vec<Result<Fate, LoadError>>) -> Result<Self, LoadError> {
        let mut tally = Self {
            held: 0,
            paid: 0,
            late: 0,
        };
        for buyer in buyers {
            match buyer? {
                Fate::NoOrder => continue,
                Fate::Held => {}
                Fate::Paid => tally.paid += 1,
                Fate::PaidLate => tally.late += 1,
            }
            tally.held += 1;
        }
        Ok(tally)
    }
}

/// One buyer: buys one item and, with `pay_after`, pays for it after that
/// long.
async fn buy_then_pay(
    client: &Client,
    config: &HoldSaleConfig,
    buyer: String,
    pay_after: Option<Duration>,
    progress: &Arc<dyn Fn(Phase) + Send + Sync>,
) -> Result<Fate, LoadError> {
    let order = buy(client, &config.sale, &buyer).await;
    progress(Phase::Answered);
    let Some((order, deadline)) = order? else {
        return Ok(Fate::NoOrder);
    };
    let Some(after) = pay_after else {
        return Ok(Fate::Held);
    };
    tokio::time::sleep(after).await;
    confirm(client, &order, deadline).await
}

/// Whether a refusal with `code`, answered at `now`, is a payment made
/// after the hold's `deadline`: `hold_expired` answered before it is the
/// service's error, not the buyer's lateness.
fn paid_late(code: Option<ErrorCode>, deadline: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    code == Some(ErrorCode::HoldExpired) && deadline.is_some_and(|deadline| now >= deadline)
}

/// Progress of the simulation.
#[derive(Debug, Clone)]
pub enum Phase {
    /// A purchase was answered.
    Answered,
    /// A phase began: a line for people.
    Line(String),
}

fn service_error(error: ClientError) -> LoadError {
    LoadError::Service(format!("the service failed: {error}"))
}

/// One purchase: the order id and its hold's deadline on 201, None on 409
/// (sold out).
async fn buy(
    client: &Client,
    sale: &str,
    buyer: &str,
) -> Result<Option<(String, Option<DateTime<Utc>>)>, LoadError> {
    let key = format!("{buyer}-1");
    let purchase = Purchase::by(buyer).idempotency_key(&key);
    // 503s (overloaded, rebuilding) are retried with the same key.
    for _ in 0..50 {
        match client.purchase(sale, &purchase).await {
            Ok(reply) if reply.status == StatusCode::ACCEPTED => {}
            Ok(reply) => return Ok(Some((reply.body.order_id, reply.body.expires_at))),
            Err(error) => match error.status() {
                Some(StatusCode::CONFLICT) => return Ok(None),
                Some(StatusCode::SERVICE_UNAVAILABLE) => {}
                _ => {
                    return Err(LoadError::Service(format!("a purchase failed: {error}")));
                }
            },
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(LoadError::Service(
        "a purchase stayed unavailable for 5 s".into(),
    ))
}

/// Pays for an order as the payment service does: `POST
/// /v1/orders/{id}/confirm` with the payments token, retried while the
/// order is still being committed. A `hold_expired` answered after the
/// hold's `deadline` (this machine's clock) is a late payment; answered
/// before it, the service let the hold run out early: an error.
async fn confirm(
    client: &Client,
    order: &str,
    deadline: Option<DateTime<Utc>>,
) -> Result<Fate, LoadError> {
    for _ in 0..50 {
        let error = match client.confirm_order(order).await {
            Ok(_) => return Ok(Fate::Paid),
            Err(error) => error,
        };
        if paid_late(error.code(), deadline, Utc::now()) {
            return Ok(Fate::PaidLate);
        }
        match error.status() {
            // A 409 other than `order_pending` is final (`hold_expired`,
            // `order_cancelled`).
            Some(StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE)
                if !matches!(
                    error.code(),
                    Some(ErrorCode::HoldExpired | ErrorCode::OrderCancelled)
                ) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE) => {
                return Err(LoadError::Service(format!(
                    "confirming order {order} within its hold failed: {error}"
                )));
            }
            _ => {
                return Err(LoadError::Service(format!(
                    "confirming order {order} failed: {error}"
                )));
            }
        }
    }
    Err(LoadError::Service(format!(
        "order {order} could not be confirmed within 5 s"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn only_a_hold_expired_answered_after_the_deadline_is_late() {
        let deadline = Utc::now();
        let after = deadline + TimeDelta::milliseconds(1);
        let before = deadline - TimeDelta::milliseconds(1);
        let expired = Some(ErrorCode::HoldExpired);
        assert!(paid_late(expired, Some(deadline), deadline));
        assert!(paid_late(expired, Some(deadline), after));
        assert!(!paid_late(expired, Some(deadline), before), "expired early");
        assert!(!paid_late(expired, None, after), "no hold");
        assert!(!paid_late(
            Some(ErrorCode::OrderCancelled),
            Some(deadline),
            after
        ));
    }
}
