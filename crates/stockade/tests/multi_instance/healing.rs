//! After the faults: wait until every instance is ready, sell the rest to
//! fresh buyers until every instance answers `sold_out` (`sell_out`), wait
//! for the store to settle, and read the sale on every instance. Every wait
//! is bounded and, past its bound, says what it waited for.
//!
//! In a sale with payment holds the fresh buyers pay at once, and unpaid
//! holds of the crowd keep expiring after the sale first sells out: their
//! items come back on sale. So selling out is repeated, each time once the
//! store has no `held` order left, until the confirmed orders hold the
//! whole stock (at most [`SELL_OUT_PASSES`] times). Without holds, it is
//! repeated when items come back on sale after the first pass: an order
//! cancelled while the engine was away gives its items back only once the
//! release applier's pause after the failures runs out.

use std::time::{Duration, Instant};

use crate::api;
use crate::cluster::{Cluster, INSTANCES};
use crate::evidence::{Healing, SkuStock, StoreOrder};
use crate::history::{Answer, Phase, Recorder};
use crate::instance::OUTBOX_GRACE_MS;

// A child by path, so that the container suite, which includes this file,
// finds it too.
#[path = "sell_out.rs"]
mod sell_out;
use sell_out::sell_out;

/// How long the instances may take to answer `/readyz` 200.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long selling out may take once ready (shorter if never ready).
const SELL_OUT_TIMEOUT: Duration = Duration::from_secs(45);
const SELL_OUT_TIMEOUT_UNREADY: Duration = Duration::from_secs(10);
/// Selling out rounds at most, in a sale with payment holds.
const SELL_OUT_PASSES: usize = 4;
/// How long the store may take to have no `held` order left (the holds of
/// this suite last 2 s; unconfirmed ones expire at most 1 s later).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long items owed back to the engine may take to be on sale again:
/// the release applier's longest pause after failures (5 s), its pass
/// interval (1 s), one engine call's bound (0.5 s), and a margin.
const RELEASE_BOUND: Duration = Duration::from_secs(8);
/// How long the store may take to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the live total must stay the same to count as settled: longer
/// than the outbox grace period plus a reconciler tick, so an order left in
/// an outbox would have been committed.
const STABLE_FOR: Duration = Duration::from_millis(OUTBOX_GRACE_MS + 1_500);

/// Heals and observes a sale of one SKU; returns what happened and the
/// store's orders. `holds`: the sale has payment holds (fresh buyers pay
/// at once). The container suite's way in.
#[allow(dead_code)]
pub async fn heal(
    cluster: &Cluster,
    sale: &str,
    stock: u64,
    holds: bool,
    recorder: &Recorder,
    round: usize,
) -> (Healing, Result<Vec<StoreOrder>, String>) {
    heal_skus(cluster, sale, stock, &[], holds, recorder, round).await
}

/// [`heal`] for a sale of `skus` (empty: of one SKU), whose fresh buyers
/// then name a SKU.
pub async fn heal_skus(
    cluster: &Cluster,
    sale: &str,
    stock: u64,
    skus: &[SkuStock],
    holds: bool,
    recorder: &Recorder,
    round: usize,
) -> (Healing, Result<Vec<StoreOrder>, String>) {
    let started = Instant::now();
    let ready = wait_ready(cluster).await;
    eprintln!(
        "round {round}: ready after {} ms: {ready:?}",
        started.elapsed().as_millis()
    );
    let bound = if ready.is_ok() {
        SELL_OUT_TIMEOUT
    } else {
        SELL_OUT_TIMEOUT_UNREADY
    };
    let mut sold_out_everywhere = Ok(());
    for pass in 0..SELL_OUT_PASSES {
        sold_out_everywhere = sell_out(cluster, sale, skus, recorder, bound, pass, holds).await;
        eprintln!(
            "round {round}: final phase (pass {}): {} -> {sold_out_everywhere:?}",
            pass + 1,
            recorder.history().summary(Phase::Final)
        );
        if sold_out_everywhere.is_err() {
            break;
        }
        if !holds {
            // Items of orders cancelled during the faults come back once
            // the release applier's pause runs out, possibly after the
            // sale first sold out: sell them too.
            match stock_comes_back(cluster, sale, stock).await {
                Some(remaining) => {
                    eprintln!("round {round}: {remaining} items came back on sale: selling them");
                    continue;
                }
                None => break,
            }
        }
        match drain_holds(cluster, sale).await {
            Ok(confirmed) if confirmed >= stock => break,
            Ok(confirmed) => eprintln!(
                "round {round}: no hold left, {confirmed} of {stock} items confirmed: \
                 selling the returned items again"
            ),
            Err(error) => {
                eprintln!("round {round}: {error}");
                break;
            }
        }
    }
    let (settled, store) = settle(cluster, sale, stock).await;
    eprintln!("round {round}: settled: {settled:?}");
    let sale_views = sale_views(cluster, sale).await;
    let healing = Healing {
        ready,
        sold_out_everywhere,
        settled,
        sale_views,
    };
    (healing, store)
}

async fn wait_ready(cluster: &Cluster) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let answers = cluster
            .ask_all(|client, url| async move { api::readyz(&client, &url).await })
            .await;
        let unready: Vec<String> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| a.status() != Some(200))
            .map(|(i, a)| format!("instance {i}: {}", a.describe()))
            .collect();
        if unready.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not every instance answered /readyz 200 within {} s after the faults healed: {}",
                READY_TIMEOUT.as_secs(),
                unready.join("; ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls the store until its live total stops changing with no `held`
/// order left. Ok once it held still (at `stock`, or for twice as long at
/// another value, which the checker then reports); Err if it never did.
async fn settle(
    cluster: &Cluster,
    sale: &str,
    stock: u64,
) -> (Result<(), String>, Result<Vec<StoreOrder>, String>) {
    let started = Instant::now();
    let mut last: Result<Vec<StoreOrder>, String> = Err("never read".into());
    let mut total: Option<u64> = None;
    let mut since = Instant::now();
    let mut totals = Vec::new();
    let mut held_orders = 0;
    loop {
        let read = read_store(cluster, sale).await;
        if let Ok(orders) = &read {
            let now: u64 = orders
                .iter()
                .filter(|o| o.is_live())
                .map(|o| o.quantity)
                .sum();
            held_orders = orders.iter().filter(|o| o.status == "held").count();
            if held_orders > 0 {
                // Not settled while a hold may still expire.
                total = None;
                since = Instant::now();
            } else if total != Some(now) {
                total = Some(now);
                since = Instant::now();
                totals.push(now);
            }
        }
        // Keep the last successful read; a failure replaces only a failure.
        if read.is_ok() || last.is_err() {
            last = read;
        }
        let held = since.elapsed();
        if total == Some(stock) && held >= STABLE_FOR || total.is_some() && held >= 2 * STABLE_FOR {
            return (Ok(()), last);
        }
        if started.elapsed() >= SETTLE_TIMEOUT {
            let why = match &last {
                Ok(_) if held_orders > 0 => format!("{held_orders} orders are still held"),
                Ok(_) => format!("its live total kept changing: {totals:?}"),
                Err(e) => format!("it could not be read: {e}"),
            };
            return (
                Err(format!(
                    "the store did not settle within {} s: {why}",
                    SETTLE_TIMEOUT.as_secs()
                )),
                last,
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// After selling out, waits until the live orders hold the whole stock
/// (`None`), or an instance shows items back on sale (`Some(remaining)`),
/// for at most [`RELEASE_BOUND`] (then `None`: the checker judges what
/// is left).
async fn stock_comes_back(cluster: &Cluster, sale: &str, stock: u64) -> Option<u64> {
    let deadline = Instant::now() + RELEASE_BOUND;
    loop {
        if let Ok(orders) = read_store(cluster, sale).await {
            let live: u64 = orders
                .iter()
                .filter(|o| o.is_live())
                .map(|o| o.quantity)
                .sum();
            if live >= stock {
                return None;
            }
        }
        let remaining = sale_views(cluster, sale)
            .await
            .iter()
            .filter_map(|view| view.body()["remaining"].as_u64())
            .max()
            .unwrap_or(0);
        if remaining > 0 {
            return Some(remaining);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the store has no `held` order of `sale` left; returns the
/// items the confirmed orders then hold.
async fn drain_holds(cluster: &Cluster, sale: &str) -> Result<u64, String> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        let read = read_store(cluster, sale).await;
        let held = match &read {
            Ok(orders) => {
                let held = orders.iter().filter(|o| o.status == "held").count();
                if held == 0 {
                    return Ok(orders
                        .iter()
                        .filter(|o| o.status == "confirmed")
                        .map(|o| o.quantity)
                        .sum());
                }
                format!("{held} orders still held")
            }
            Err(error) => error.clone(),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "holds not drained within {} s: {held}",
                DRAIN_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Reads every page of the sale's orders through the first instance that
/// answers.
pub async fn read_store(cluster: &Cluster, sale: &str) -> Result<Vec<StoreOrder>, String> {
    let mut failures = Vec::new();
    'instances: for index in 0..INSTANCES {
        let url = cluster.endpoints().get(index);
        let mut orders = Vec::new();
        let mut after = String::new();
        for _page in 0..100 {
            let answer = api::orders_page(cluster.client(), &url, sale, &after).await;
            if answer.status() != Some(200) {
                failures.push(format!("instance {index}: {}", answer.describe()));
                continue 'instances;
            }
            let body = answer.body();
            for order in body["orders"].as_array().into_iter().flatten() {
                match StoreOrder::from_json(order) {
                    Some(order) => orders.push(order),
                    None => panic!("an order of the listing is not an order: {order}"),
                }
            }
            match body["next_after"].as_str() {
                Some(next) => after = next.to_owned(),
                None => return Ok(orders),
            }
        }
        panic!("the order listing of {sale} has more than 100 pages of 1000");
    }
    Err(format!(
        "no instance listed the orders: {}",
        failures.join("; ")
    ))
}

/// `GET /v1/sales/{id}` on every instance, retrying 503s for up to 5 s.
async fn sale_views(cluster: &Cluster, sale: &str) -> Vec<Answer> {
    let mut views = Vec::new();
    for index in 0..INSTANCES {
        let deadline = Instant::now() + Duration::from_secs(5);
        let url = cluster.endpoints().get(index);
        loop {
            let answer = api::get_sale(cluster.client(), &url, sale).await;
            if answer.status() == Some(200) || Instant::now() >= deadline {
                views.push(answer);
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    views
}
