//! The verdict on a round's draw, as a list of violations: what every
//! instance published (one seed, one order, recomputable from the
//! commitment made at creation, in Rust and by `scripts/verify-draw`, its
//! ids the set the published entry digest names; the
//! first `min(stock, entries)` won, the rest wait), what each buyer reads
//! of their entry, and the store's orders (exactly the winners', no
//! oversell).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use stockade_core::draw::{Seed, draw_order};

use super::calls::{self, Entries};
use crate::api;
use crate::cluster::{Cluster, INSTANCES};
use crate::healing::read_store;

/// Buyers reading their entry at once.
const READERS: usize = 32;
/// How long the store may take to hold every winner's order.
const STORE_TIMEOUT: Duration = Duration::from_secs(15);

/// A draw as an instance published it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The seed, hex.
    pub seed: String,
    /// The entry ids in the draw's order.
    pub order: Vec<String>,
    /// Each entry's result, in the same order.
    pub results: Vec<String>,
    /// `entry_count`.
    pub entry_count: u64,
    /// The frozen entry set's digest (`entry_digest`), if published.
    pub digest: Option<String>,
}

impl Published {
    fn read(draw: &Value) -> Result<Self, String> {
        let seed = draw["seed"].as_str().ok_or("no seed")?.to_owned();
        let mut order = Vec::new();
        let mut results = Vec::new();
        for entry in draw["order"].as_array().into_iter().flatten() {
            let id = entry["entry_id"]
                .as_str()
                .ok_or("an entry without entry_id")?;
            let result = entry["result"].as_str().ok_or("an entry without result")?;
            order.push(id.to_owned());
            results.push(result.to_owned());
        }
        let entry_count = draw["entry_count"].as_u64().ok_or("no entry_count")?;
        Ok(Self {
            seed,
            order,
            results,
            entry_count,
            digest: draw["entry_digest"].as_str().map(str::to_owned),
        })
    }
}

/// Checks (a), (b), (c) and (f) on the draw each instance published
/// (`draws`, in instance order); returns the violations and instance 0's
/// draw when it could be read.
pub fn check_published(
    draws: &[Value],
    commitment: &str,
    stock: u64,
    entries: &Entries,
) -> (Vec<String>, Option<Published>) {
    let mut violations = Vec::new();
    let mut read = Vec::new();
    for (index, draw) in draws.iter().enumerate() {
        match Published::read(draw) {
            Ok(published) => read.push(published),
            Err(why) => violations.push(format!("instance {index}'s draw: {why}: {draw}")),
        }
    }
    if read.len() < draws.len() || read.is_empty() {
        return (violations, None);
    }
    let first = read[0].clone();
    // (a) One draw, whoever is asked.
    for (index, other) in read.iter().enumerate().skip(1) {
        if other.seed != first.seed {
            violations.push(format!(
                "instance {index} published seed {}, instance 0 seed {}",
                other.seed, first.seed
            ));
        }
        if other.digest != first.digest {
            violations.push(format!(
                "instance {index} published entry digest {:?}, instance 0 {:?}",
                other.digest, first.digest
            ));
        }
        let differs = (0..first.order.len().max(other.order.len())).find(|&p| {
            first.order.get(p) != other.order.get(p) || first.results.get(p) != other.results.get(p)
        });
        if let Some(p) = differs {
            violations.push(format!(
                "instance {index}'s draw differs from instance 0's at position {p}: {:?} {:?} \
                 against {:?} {:?} ({} and {} entries)",
                other.order.get(p),
                other.results.get(p),
                first.order.get(p),
                first.results.get(p),
                other.order.len(),
                first.order.len()
            ));
        }
    }
    if first.digest.is_none() {
        violations.push("the draw published no entry_digest".to_owned());
    }
    // (b) The seed is the one committed to; the order is the seed's.
    match Seed::from_hex(&first.seed) {
        Ok(seed) if seed.matches(commitment) => match draw_order(&seed, &first.order) {
            Ok(order) if order == first.order => {}
            Ok(order) => violations.push(format!(
                "the published order is not draw_order(seed, its entries): first difference \
                 at position {}",
                order
                    .iter()
                    .zip(&first.order)
                    .take_while(|(a, b)| a == b)
                    .count()
            )),
            Err(error) => violations.push(format!("the published order: {error}")),
        },
        Ok(_) => violations.push(format!(
            "seed {} does not match the commitment {commitment} made at creation",
            first.seed
        )),
        Err(error) => violations.push(format!("the published seed: {error}")),
    }
    match calls::audit(&first.seed, commitment, first.digest.as_deref(), &first.order) {
        Ok(order) if order == first.order => {}
        Ok(order) => violations.push(format!(
            "scripts/verify-draw recomputed another order ({} ids; first difference at position {})",
            order.len(),
            order.iter().zip(&first.order).take_while(|(a, b)| a == b).count()
        )),
        Err(why) => violations.push(format!("scripts/verify-draw: {why}")),
    }
    // (f) Every answered entry is drawn, and nothing else.
    let drawn: BTreeSet<&str> = first.order.iter().map(String::as_str).collect();
    if drawn.len() != first.order.len() {
        violations.push("an entry appears twice in the published order".to_owned());
    }
    for (buyer, id) in &entries.by_buyer {
        if !drawn.contains(id.as_str()) {
            violations.push(format!(
                "{buyer}'s entry {id} (answered 201/200) is not in the draw"
            ));
        }
    }
    let answered: BTreeSet<&str> = entries.by_buyer.values().map(String::as_str).collect();
    for id in drawn.difference(&answered) {
        violations.push(format!(
            "entry {id} is in the draw but no buyer was answered it"
        ));
    }
    if first.entry_count != first.order.len() as u64 {
        violations.push(format!(
            "entry_count {} but {} entries in the order",
            first.entry_count,
            first.order.len()
        ));
    }
    // (c) The first min(stock, entries) won; the others wait.
    let winners = (stock as usize).min(first.order.len());
    let won = first.results.iter().filter(|r| *r == "won").count();
    if won != winners {
        violations.push(format!(
            "{won} entries won; expected min(stock, entries) = {winners}"
        ));
    }
    if let Some(p) = first.results[..winners].iter().position(|r| r != "won") {
        violations.push(format!(
            "position {p} of the order ({}) is {} though within the stock",
            first.order[p], first.results[p]
        ));
    }
    if let Some(p) = first.results[winners..]
        .iter()
        .position(|r| r != "waitlisted")
    {
        let p = p + winners;
        violations.push(format!(
            "position {p} of the order ({}) is {}; past the stock every entry waits (waitlisted)",
            first.order[p], first.results[p]
        ));
    }
    (violations, Some(first))
}

/// A winning entry: its buyer and the order it says it won.
#[derive(Debug, Clone)]
pub struct Winner {
    /// The buyer.
    pub buyer: String,
    /// `order_id` of the buyer's entry.
    pub order_id: String,
}

/// (e) Every buyer reads their entry (on an instance of the round's
/// choosing): a winner's says `won` with an order, every other's the
/// result the draw published and no order. Returns the violations and
/// the winners by entry id.
pub async fn check_buyers(
    cluster: &Cluster,
    sale: &str,
    round: usize,
    entries: &Entries,
    published: &Published,
) -> (Vec<String>, BTreeMap<String, Winner>) {
    let result_of: BTreeMap<&str, &str> = published
        .order
        .iter()
        .map(String::as_str)
        .zip(published.results.iter().map(String::as_str))
        .collect();
    let buyers: Vec<(String, String)> = entries
        .by_buyer
        .iter()
        .map(|(b, id)| (b.clone(), id.clone()))
        .collect();
    let buyers = Arc::new(buyers);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let read: Arc<Mutex<Vec<(usize, String, Value)>>> = Arc::default();
    let workers: Vec<_> = (0..READERS)
        .map(|_| {
            let (client, endpoints) = (cluster.client().clone(), cluster.endpoints());
            let (buyers, next, read) = (Arc::clone(&buyers), Arc::clone(&next), Arc::clone(&read));
            let sale = sale.to_owned();
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((buyer, _)) = buyers.get(n) else {
                        return;
                    };
                    // A pseudo-random instance per buyer and round.
                    let mut instance =
                        (n.wrapping_mul(2_654_435_761) >> 7).wrapping_add(round) % INSTANCES;
                    let mut answer =
                        calls::my_entry(&client, &endpoints.get(instance), &sale, buyer).await;
                    for _ in 0..4 {
                        if !matches!(answer.status(), None | Some(503)) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        instance = (instance + 1) % INSTANCES;
                        answer =
                            calls::my_entry(&client, &endpoints.get(instance), &sale, buyer).await;
                    }
                    let seen = match answer.status() {
                        Some(200) => answer.body().clone(),
                        _ => Value::String(answer.describe()),
                    };
                    read.lock()
                        .unwrap()
                        .push((n, format!("instance {instance}"), seen));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("an entry reader panicked");
    }
    let mut violations = Vec::new();
    let mut winners = BTreeMap::new();
    let read = std::mem::take(&mut *read.lock().unwrap());
    for (n, on, entry) in read {
        let (buyer, id) = &buyers[n];
        let Value::Object(_) = entry else {
            violations.push(format!("{buyer}: GET entries/me on {on} answered {entry}"));
            continue;
        };
        let expected = result_of.get(id.as_str()).copied().unwrap_or("(not drawn)");
        let (result, order) = (entry["result"].as_str(), entry["order_id"].as_str());
        if entry["entry_id"].as_str() != Some(id.as_str()) || result != Some(expected) {
            violations.push(format!(
                "{buyer}: entries/me on {on} shows entry {} {:?}; the draw published {id} {expected}",
                entry["entry_id"], result
            ));
            continue;
        }
        match (expected, order) {
            ("won", Some(order)) => {
                let winner = Winner {
                    buyer: buyer.clone(),
                    order_id: order.to_owned(),
                };
                winners.insert(id.clone(), winner);
            }
            ("won", None) => {
                violations.push(format!("{buyer} won (entry {id}) but has no order_id"))
            }
            (_, Some(order)) => violations.push(format!(
                "{buyer}'s entry {id} is {expected} but names order {order}"
            )),
            _ => {}
        }
    }
    (violations, winners)
}

/// (d) The store's orders of the sale are exactly the winners': one live
/// order of one item per winning entry, for its buyer, none for anyone
/// else; and every instance's sale view has the rest remaining.
pub async fn check_store(
    cluster: &Cluster,
    sale: &str,
    stock: u64,
    winners: &BTreeMap<String, Winner>,
) -> Vec<String> {
    let deadline = Instant::now() + STORE_TIMEOUT;
    let orders = loop {
        let read = read_store(cluster, sale).await;
        let live = read
            .as_ref()
            .map_or(0, |o| o.iter().filter(|o| o.is_live()).count());
        if live >= winners.len() || Instant::now() >= deadline {
            break read;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let orders = match orders {
        Ok(orders) => orders,
        Err(error) => return vec![format!("the store's orders: {error}")],
    };
    let mut violations = Vec::new();
    let by_order: BTreeMap<&str, (&str, &Winner)> = winners
        .iter()
        .map(|(entry, w)| (w.order_id.as_str(), (entry.as_str(), w)))
        .collect();
    if by_order.len() != winners.len() {
        violations.push(format!(
            "{} winning entries name only {} distinct orders",
            winners.len(),
            by_order.len()
        ));
    }
    let mut listed = BTreeSet::new();
    let mut live_items = 0;
    for order in &orders {
        if !listed.insert(order.order_id.as_str()) {
            violations.push(format!("order {} is listed twice", order.order_id));
        }
        if order.is_live() {
            live_items += order.quantity;
        }
        match by_order.get(order.order_id.as_str()) {
            None => violations.push(format!(
                "order {} ({}, {} of {}) is no winning entry's",
                order.order_id, order.status, order.quantity, order.user_id
            )),
            Some((entry, winner)) => {
                if order.user_id != winner.buyer || order.quantity != 1 || !order.is_live() {
                    violations.push(format!(
                        "order {} of entry {entry} ({}) is {} of {} for {}",
                        order.order_id, winner.buyer, order.status, order.quantity, order.user_id
                    ));
                }
            }
        }
    }
    for (order, (entry, winner)) in &by_order {
        if !listed.contains(order) {
            violations.push(format!(
                "order {order} of {}'s winning entry {entry} is not in the store",
                winner.buyer
            ));
        }
    }
    if live_items != winners.len() as u64 || live_items > stock {
        violations.push(format!(
            "the store's live orders hold {live_items} items; {} entries won, stock {stock}",
            winners.len()
        ));
    }
    let remaining = stock.saturating_sub(winners.len() as u64);
    for index in 0..INSTANCES {
        let url = cluster.endpoints().get(index);
        let deadline = Instant::now() + Duration::from_secs(5);
        let view = loop {
            let view = api::get_sale(cluster.client(), &url, sale).await;
            if view.status() == Some(200) || Instant::now() >= deadline {
                break view;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        if view.body()["remaining"].as_u64() != Some(remaining) {
            violations.push(format!(
                "instance {index}'s sale view: expected remaining {remaining} \
                 ({} entries won of stock {stock}): {}",
                winners.len(),
                view.describe()
            ));
        }
    }
    violations
}
