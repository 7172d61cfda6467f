//! A draw sale on the three instances (Redis engine), an instance killed
//! mid-draw: each round ~1,500 buyers enter over all three instances (one
//! in seven twice, on two instances), entries close, and the instance
//! holding the draw's lease in the store (`draws.lease_owner`, read from
//! PostgreSQL and matched to an instance by the UUIDv7 it names) is
//! SIGKILLed while it buys the winners' orders, then restarted a second
//! later. Another instance takes the draw over once the dead one's 10 s
//! lease runs out; the draw must still happen exactly once:
//!
//! - round 1: a fake dead owner holds the lease until 3 s after the close
//!   (written in PostgreSQL before the close), so the live instances wait
//!   for it to run out; the first live holder is then killed once 50 of
//!   its winners' orders are committed (two takeovers in one draw, the
//!   second over orders already made);
//! - round 2: the holder is killed as soon as its lease is seen;
//! - round 3: the holder is killed 100 ms after its lease is seen.
//!
//! The suite runs round 1; `scripts/test --long` runs all three.
//!
//! The checks are in `checks`, the HTTP calls and the entries in `calls`.

pub mod calls;
pub mod checks;

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::cluster::{Cluster, INSTANCES};
use crate::flags::Engine;

/// The draw sale's stock: the first 200 entries of the order win.
const STOCK: u64 = 200;
/// Buyers entering each round.
const BUYERS: usize = 1_500;
/// The winners' payment holds: longer than a round, so no hold lapses
/// (and rolls down) before the checks.
const HOLD_SECONDS: u64 = 60;
/// How long entries stay open: the entries take 1.5-3 s on a quiet
/// machine, over 5 s on a busy one.
const ENTRY_WINDOW: TimeDelta = TimeDelta::seconds(10);
/// How long the killed instance stays dead.
const DEAD_FOR: Duration = Duration::from_secs(1);
/// How long after the close (and a fake lease) a live instance must take
/// the draw's lease.
const LEASE_SEEN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after the kill every instance must publish the draw (the dead
/// instance's lease lasts 10 s).
const DRAWN_TIMEOUT: Duration = Duration::from_secs(40);

/// How a round disturbs its draw.
#[derive(Debug, Clone, Copy)]
enum Takeover {
    /// SIGKILL the lease's holder this long after its lease is first seen.
    KillHolder { after: Duration },
    /// A fake dead owner holds the lease until `dead_for` after the close;
    /// then the first live holder is killed once `orders` of the sale's
    /// orders are committed to the store.
    DeadOwnerThenKill { dead_for: TimeDelta, orders: i64 },
}

fn takeover(round: usize) -> Takeover {
    match round % 3 {
        1 => Takeover::DeadOwnerThenKill {
            dead_for: TimeDelta::seconds(3),
            orders: 50,
        },
        2 => Takeover::KillHolder {
            after: Duration::ZERO,
        },
        _ => Takeover::KillHolder {
            after: Duration::from_millis(100),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draw_survives_an_instance_killed_mid_draw() {
    let started = Instant::now();
    let cluster = Cluster::start(Engine::Redis, &[], None).await;
    let db = PgPoolOptions::new()
        .max_connections(2)
        .connect(cluster.database_url())
        .await
        .expect("connect to the instances' PostgreSQL database");
    let rounds = crate::round::rounds();
    for round in 1..=rounds {
        round_of(&cluster, &db, round).await;
    }
    eprintln!(
        "draws: all {rounds} rounds drew once and kept every check ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

async fn round_of(cluster: &Cluster, db: &PgPool, round: usize) {
    let started = Instant::now();
    let sale = format!("draw-r{round}");
    let plan = takeover(round);
    let now = Utc::now();
    let (open, close) = (now - TimeDelta::seconds(1), now + ENTRY_WINDOW);
    let commitment = calls::create(cluster, &sale, STOCK, HOLD_SECONDS, (open, close)).await;
    eprintln!(
        "draws round {round}: sale {sale} (stock {STOCK}, holds {HOLD_SECONDS} s), entries \
         close at {close}, commitment {commitment}; {plan:?}"
    );
    if let Takeover::DeadOwnerThenKill { dead_for, .. } = plan {
        let until = (close + dead_for).timestamp_millis();
        let taken = sqlx::query(
            "UPDATE draws SET lease_owner = 'dead', lease_until_ms = $1 WHERE sale_id = $2",
        )
        .bind(until)
        .bind(sale.as_str())
        .execute(db)
        .await
        .expect("give the draw's lease to a dead owner");
        assert_eq!(taken.rows_affected(), 1, "sale {sale} has no draw row");
    }
    let mut violations = Vec::new();
    let entries = calls::enter_all(cluster, &sale, BUYERS).await;
    let entered_in = started.elapsed();
    eprintln!(
        "draws round {round}: {} buyers entered ({} twice) in {:.1} s, {} entry violations",
        entries.by_buyer.len(),
        entries.twice,
        entered_in.as_secs_f64(),
        entries.violations.len()
    );
    violations.extend(entries.violations.iter().cloned());
    violations.extend(purchases_refused(cluster, &sale).await);
    if let Ok(wait) = (close - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    } else {
        violations.push(format!(
            "harness: the entries outran the {} s window",
            ENTRY_WINDOW.num_seconds()
        ));
    }
    let killed = disturb(cluster, db, &sale, round, plan).await;
    eprintln!("draws round {round}: {killed}");
    let draws = match wait_drawn(cluster, &sale).await {
        Ok(draws) => draws,
        Err(why) => {
            violations.push(why);
            fail(cluster, round, &sale, &killed, violations);
        }
    };
    eprintln!(
        "draws round {round}: drawn on every instance {:.1} s after the close",
        (Utc::now() - close).num_milliseconds() as f64 / 1000.0
    );
    let (published_violations, published) =
        checks::check_published(&draws, &commitment, STOCK, &entries);
    violations.extend(published_violations);
    if let Some(published) = published {
        let (buyer_violations, winners) =
            checks::check_buyers(cluster, &sale, round, &entries, &published).await;
        violations.extend(buyer_violations);
        violations.extend(checks::check_store(cluster, &sale, STOCK, &winners).await);
        eprintln!(
            "draws round {round}: {} entries drawn, {} won (their orders checked in the store)",
            published.order.len(),
            winners.len()
        );
    }
    if !violations.is_empty() {
        fail(cluster, round, &sale, &killed, violations);
    }
    eprintln!(
        "draws round {round}: the draw was made once and every check holds ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

/// Buyers of a draw sale cannot buy: 409 `draw_sale` on every instance.
async fn purchases_refused(cluster: &Cluster, sale: &str) -> Vec<String> {
    let mut violations = Vec::new();
    for index in 0..INSTANCES {
        let url = cluster.endpoints().get(index);
        let answer = crate::api::purchase(cluster.client(), &url, sale, "b1", 1, None, false).await;
        if answer.status() != Some(409) || answer.code() != Some("draw_sale") {
            violations.push(format!(
                "a purchase of the draw sale on instance {index} answered {} \
                 (expected 409 draw_sale)",
                answer.describe()
            ));
        }
    }
    violations
}

/// The draw's lease and whether it was drawn, as the store has them.
async fn lease(db: &PgPool, sale: &str) -> (Option<String>, Option<i64>) {
    sqlx::query_as("SELECT lease_owner, drawn_at_ms FROM draws WHERE sale_id = $1")
        .bind(sale)
        .fetch_one(db)
        .await
        .expect("read the draw's lease")
}

/// The orders of `sale` committed to the store so far.
async fn committed(db: &PgPool, sale: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders WHERE sale_id = $1")
        .bind(sale)
        .fetch_one(db)
        .await
        .expect("count the sale's orders")
}

/// Waits for a live instance to take the draw's lease, SIGKILLs it as
/// `plan` says, and restarts it after [`DEAD_FOR`]; says what happened.
async fn disturb(
    cluster: &Cluster,
    db: &PgPool,
    sale: &str,
    round: usize,
    plan: Takeover,
) -> String {
    let (after, orders, patience) = match plan {
        Takeover::KillHolder { after } => (after, 0, LEASE_SEEN_TIMEOUT),
        Takeover::DeadOwnerThenKill { dead_for, orders } => (
            Duration::ZERO,
            orders,
            LEASE_SEEN_TIMEOUT + dead_for.to_std().unwrap(),
        ),
    };
    let closed = Instant::now();
    let deadline = closed + patience;
    let owner = loop {
        match lease(db, sale).await {
            (_, Some(_)) => break None,
            (Some(owner), None) if owner != "dead" => break Some(owner),
            _ if Instant::now() >= deadline => break None,
            _ => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    };
    let seen_after = closed.elapsed();
    tokio::time::sleep(after).await;
    // Until the holder has made `orders` orders (or the draw is recorded).
    let deadline = Instant::now() + LEASE_SEEN_TIMEOUT;
    while orders > 0 && owner.is_some() && Instant::now() < deadline {
        if committed(db, sale).await >= orders || lease(db, sale).await.1.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let fallback = (round - 1) % INSTANCES;
    let (victim, whom) = match owner.as_deref().map(|o| (o, cluster.instance_named(o))) {
        Some((owner, Some(index))) => (index, format!("the lease holder {owner}")),
        Some((owner, None)) => (
            fallback,
            format!("instance {fallback} (the lease holder {owner} matched no instance)"),
        ),
        None => (
            fallback,
            format!(
                "instance {fallback} (no live lease seen before the draw was recorded or within {} s)",
                patience.as_secs()
            ),
        ),
    };
    let before = committed(db, sale).await;
    let killed_after = closed.elapsed();
    cluster.kill_instance(victim).await;
    let (holder, drawn) = lease(db, sale).await;
    let after_kill = committed(db, sale).await;
    let mid_draw = drawn.is_none() && owner.is_some();
    tokio::time::sleep(DEAD_FOR).await;
    cluster.restart_instance(victim).await;
    format!(
        "SIGKILLed instance {victim}, {whom}, seen {} ms after the close, killed {} ms later ({} orders committed \
         just before, {after_kill} just after; lease now {holder:?}; draw recorded: {}; \
         mid-draw: {mid_draw}); restarted {} ms later",
        seen_after.as_millis(),
        (killed_after - seen_after).as_millis(),
        before,
        drawn.is_some(),
        DEAD_FOR.as_millis()
    )
}

/// Waits until every instance publishes the draw (`drawn`, or `settled`
/// which the checks then judge); the draws in instance order.
pub async fn wait_drawn(cluster: &Cluster, sale: &str) -> Result<Vec<Value>, String> {
    let deadline = Instant::now() + DRAWN_TIMEOUT;
    let mut last = vec![String::from("nothing"); INSTANCES];
    loop {
        let mut draws = Vec::new();
        for (index, seen) in last.iter_mut().enumerate() {
            let url = cluster.endpoints().get(index);
            let answer = calls::get_draw(cluster.client(), &url, sale).await;
            let state = answer.body()["state"].as_str();
            if answer.status() == Some(200) && matches!(state, Some("drawn" | "settled")) {
                draws.push(answer.body().clone());
            } else {
                *seen = answer.describe();
            }
        }
        if draws.len() == INSTANCES {
            return Ok(draws);
        }
        if Instant::now() >= deadline {
            let last: Vec<String> = last
                .iter()
                .enumerate()
                .map(|(i, a)| format!("instance {i}: {}", truncated(a)))
                .collect();
            return Err(format!(
                "the draw was not published as drawn on every instance within {} s of the close (and any kill): {}",
                DRAWN_TIMEOUT.as_secs(),
                last.join("; ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn truncated(text: &str) -> &str {
    match text.char_indices().nth(300) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// Fails the round with all its violations and the instances' log tails.
pub fn fail(
    cluster: &Cluster,
    round: usize,
    sale: &str,
    killed: &str,
    violations: Vec<String>,
) -> ! {
    eprintln!("{}", cluster.log_tails(20));
    let shown: Vec<String> = violations
        .iter()
        .take(60)
        .map(|v| format!("  - {v}"))
        .collect();
    let notes: Vec<String> = cluster
        .exited_instances()
        .iter()
        .map(|n| format!("\n  note: {n}"))
        .collect();
    panic!(
        "draws round {round} (sale {sale}; {killed}): {} violations{}:\n{}{}",
        violations.len(),
        if violations.len() > shown.len() {
            " (first 60)"
        } else {
            ""
        },
        shown.join("\n"),
        notes.concat()
    );
}
