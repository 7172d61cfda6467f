//! Entries racing a draw's close on two instances whose clocks differ by
//! 2 s: instance 1 runs 2 s ahead of instance 0 and of the store (checked
//! from their `Date` headers). Buyers enter on both, each buyer once, from
//! [`OPEN_FOR`] before the close until [`PAST_CLOSE`] after it.
//!
//! Checks:
//! - every entry answered 201 is in the store's frozen set and in the
//!   published order, and the published order is exactly those entries,
//!   by their stored positions, with the stored digest (recomputed by
//!   `scripts/verify-draw --digest`);
//! - every entry refused 409 `entries_closed` left no entry in the store;
//! - any other answer is a violation;
//! - the first `STOCK` entries won, one order each, and nothing else was
//!   sold (the draw checks of `draw_scenario`).
//!
//! Not vacuous: each instance answered both 201s and `entries_closed`, and
//! the instance ahead answered 201 to entries its own clock dated after
//! the close (its `Date` header): the store's clock decided, not the
//! instance's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

use super::{check_frozen, connect, frozen};
use crate::api;
use crate::cluster::Cluster;
use crate::draw_scenario::calls::{self, Entries};
use crate::draw_scenario::{checks, fail, wait_drawn};
use crate::flags::Engine;
use crate::history::Answer;
use crate::skew;

/// The instance on the store's clock, and the one set ahead of it.
const PLAIN: usize = 0;
const AHEAD: usize = 1;
/// How far ahead.
const SKEW: Duration = Duration::from_secs(2);
/// The draw's stock: fewer than the entries, so some wait.
const STOCK: u64 = 25;
/// Longer than the test, so no hold lapses and rolls down.
const HOLD_SECONDS: u64 = 60;
/// How long after the sale's creation entries close (more than the skew,
/// so the instance ahead sees its own close while the store is open).
const OPEN_FOR: TimeDelta = TimeDelta::milliseconds(3_500);
/// How long buyers keep entering after the close.
const PAST_CLOSE: Duration = Duration::from_millis(1_500);
/// Buyers entering at once on each of the two instances, and the pause
/// between one buyer's answer and the next buyer.
const WORKERS: usize = 3;
const PAUSE: Duration = Duration::from_millis(15);

/// One entry as the buyer met it.
#[derive(Debug)]
struct Attempt {
    buyer: String,
    instance: usize,
    answer: Answer,
    /// The answering instance's clock (its `Date` header).
    date: Option<DateTime<Utc>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn entries_racing_the_close_on_instances_whose_clocks_differ_by_2_s() {
    let started = Instant::now();
    let env = skew::ahead(SKEW);
    let cluster = Cluster::start_with_env(Engine::Redis, &[], None, |index| {
        if index == AHEAD {
            env.clone()
        } else {
            Vec::new()
        }
    })
    .await;
    let offset = skew::clock_offset(&cluster, PLAIN, AHEAD).await;
    assert_eq!(
        offset,
        SKEW.as_secs() as i64,
        "instance {AHEAD} should run {} s ahead of instance {PLAIN} (libfaketime); \
         their Date headers differ by {offset} s",
        SKEW.as_secs()
    );
    let db = connect(&cluster).await;
    let sale = "draw-close-race";
    let now = Utc::now();
    let close = now + OPEN_FOR;
    let commitment = calls::create(
        &cluster,
        sale,
        STOCK,
        HOLD_SECONDS,
        (now - TimeDelta::seconds(1), close),
    )
    .await;
    let until = Instant::now() + (close - Utc::now()).to_std().unwrap() + PAST_CLOSE;
    let attempts = race(&cluster, sale, until).await;
    let (entries, refused, mut violations) = judge(&attempts, close);
    eprintln!(
        "close race: {} entries answered 201, {} refused entries_closed, {} other answers",
        entries.by_buyer.len(),
        refused.len(),
        violations.len()
    );
    let draws = match wait_drawn(&cluster, sale).await {
        Ok(draws) => draws,
        Err(why) => fail(&cluster, 1, sale, "close race", vec![why]),
    };
    let (published_violations, published) =
        checks::check_published(&draws, &commitment, STOCK, &entries);
    violations.extend(published_violations);
    let Some(published) = published else {
        fail(&cluster, 1, sale, "close race", violations);
    };
    violations.extend(check_frozen(
        &frozen(&db, sale).await,
        &published.order,
        published.digest.as_deref(),
    ));
    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT user_id FROM draw_entries WHERE sale_id = $1 AND user_id = ANY($2)",
    )
    .bind(sale)
    .bind(&refused)
    .fetch_all(&db)
    .await
    .expect("read the refused buyers' entries");
    for buyer in stored {
        violations.push(format!(
            "{buyer} was refused entries_closed but has an entry"
        ));
    }
    let (buyer_violations, winners) =
        checks::check_buyers(&cluster, sale, 1, &entries, &published).await;
    violations.extend(buyer_violations);
    violations.extend(checks::check_store(&cluster, sale, STOCK, &winners).await);
    if !violations.is_empty() {
        fail(&cluster, 1, sale, "close race", violations);
    }
    eprintln!(
        "close race: {} entries drawn, {} won; every check holds ({:.1} s)",
        published.order.len(),
        winners.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Buyers enter on both instances, [`WORKERS`] at a time on each, until
/// `until`; every attempt as met.
async fn race(cluster: &Cluster, sale: &str, until: Instant) -> Vec<Attempt> {
    let attempts: Arc<Mutex<Vec<Attempt>>> = Arc::default();
    let workers: Vec<_> = [PLAIN, AHEAD]
        .into_iter()
        .flat_map(|instance| (0..WORKERS).map(move |worker| (instance, worker)))
        .map(|(instance, worker)| {
            let client = cluster.client().clone();
            let base = cluster.endpoints().get(instance);
            let (sale, attempts) = (sale.to_owned(), Arc::clone(&attempts));
            tokio::spawn(async move {
                let mut n = 0;
                while Instant::now() < until {
                    let buyer = format!("i{instance}-w{worker}-{n}");
                    let sent = client
                        .post(format!("{base}/v1/sales/{sale}/entries"))
                        .json(&json!({"user_id": buyer}))
                        .send()
                        .await;
                    let date = sent.as_ref().ok().and_then(skew::date_of);
                    let answer = api::answer(sent).await;
                    attempts.lock().unwrap().push(Attempt {
                        buyer,
                        instance,
                        answer,
                        date,
                    });
                    n += 1;
                    tokio::time::sleep(PAUSE).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("an entering buyer panicked");
    }
    std::mem::take(&mut *attempts.lock().unwrap())
}

/// The entries answered 201, the buyers refused `entries_closed`, and the
/// violations: any other answer, or a race that did not race (an instance
/// without both answers, or the instance ahead never entering a buyer
/// after the close on its own clock).
fn judge(attempts: &[Attempt], close: DateTime<Utc>) -> (Entries, Vec<String>, Vec<String>) {
    let mut entries = Entries::default();
    let mut refused = Vec::new();
    let mut violations = Vec::new();
    // Per instance: 201s, refusals, 201s dated (by the instance) at or
    // after the close.
    let mut seen: BTreeMap<usize, (usize, usize, usize)> = BTreeMap::new();
    // The first whole second at or after the close: a Date at or past it
    // was written with the instance's clock past the close.
    let rounded_up = close.timestamp() + i64::from(close.timestamp_subsec_nanos() > 0);
    let closed_second = DateTime::from_timestamp(rounded_up, 0).expect("a time");
    for attempt in attempts {
        let tally = seen.entry(attempt.instance).or_default();
        let id = attempt.answer.body()["entry_id"].as_str();
        match (attempt.answer.status(), attempt.answer.code(), id) {
            (Some(201), _, Some(id)) => {
                entries
                    .by_buyer
                    .insert(attempt.buyer.clone(), id.to_owned());
                tally.0 += 1;
                if attempt.date.is_some_and(|date| date >= closed_second) {
                    tally.2 += 1;
                }
            }
            (Some(409), Some("entries_closed"), _) => {
                refused.push(attempt.buyer.clone());
                tally.1 += 1;
            }
            _ => violations.push(format!(
                "{} on instance {}: {} (expected 201 or 409 entries_closed)",
                attempt.buyer,
                attempt.instance,
                attempt.answer.describe()
            )),
        }
    }
    for instance in [PLAIN, AHEAD] {
        let (entered, closed, late) = seen.get(&instance).copied().unwrap_or_default();
        eprintln!(
            "close race: instance {instance}: {entered} entered ({late} dated by it at or after \
             the close), {closed} refused entries_closed"
        );
        if entered == 0 || closed == 0 {
            violations.push(format!(
                "harness: instance {instance} answered {entered} entries and {closed} \
                 entries_closed; the race needs both on both instances"
            ));
        }
        if instance == AHEAD && late == 0 {
            violations.push(format!(
                "harness: instance {AHEAD} (2 s ahead) entered nobody once its own clock passed \
                 the close at {close}: the race did not cover the skew"
            ));
        }
    }
    (entries, refused, violations)
}
