//! The instance making a draw SIGKILLed between the freeze and the
//! purchases, deterministically: a trigger the test adds to the store
//! holds the runner's first lease renewal after the freeze (the one
//! before its first purchase) on an advisory lock the test holds. Once a
//! backend waits on that lock the test reads the frozen set, kills the
//! lease's holder, then lets the lock go (the dead process's statement
//! completes, as PostgreSQL would complete it). Another instance takes
//! the draw over when the dead one's lease runs out (10 s).
//!
//! Checks, before the kill: the set is frozen (every entry placed, the
//! digest stored), no order of the sale exists, the draw is not recorded
//! and the engine still has the whole stock; after: the published order
//! is exactly the positions read before the kill, with the same digest;
//! the seed is published and matches its commitment (`scripts/verify-draw
//! --digest` agrees); the first `STOCK` entries won, one order each, no
//! other order, the stock exact (`draw_scenario::checks`).

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use sqlx::{Connection, PgConnection, PgPool};

use super::{check_frozen, connect, frozen, orders_of};
use crate::api;
use crate::cluster::{Cluster, INSTANCES};
use crate::draw_scenario::{calls, checks, fail, wait_drawn};
use crate::flags::Engine;

const SALE: &str = "draw-freeze-kill";
/// Fewer than the buyers, so some wait.
const STOCK: u64 = 12;
const BUYERS: usize = 40;
/// Longer than the test, so no hold lapses and rolls down.
const HOLD_SECONDS: u64 = 60;
/// How long entries stay open after the sale is made.
const OPEN_FOR: TimeDelta = TimeDelta::seconds(3);
/// The advisory lock the test holds and the trigger waits on.
const LOCK: i64 = 35_035;
/// How long after the close a runner must be held after its freeze.
const HELD_TIMEOUT: Duration = Duration::from_secs(10);

/// Holds a renewal of the sale's draw lease by the same owner after the
/// set is frozen and before the draw is recorded: the runner's check
/// before its first purchase. Other updates (the claim before the freeze,
/// the freeze itself, a takeover's claim, the record) pass.
fn trigger() -> String {
    format!(
        "CREATE FUNCTION test_hold_after_freeze() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF OLD.frozen_at_ms IS NOT NULL AND NEW.drawn_at_ms IS NULL
              AND NEW.lease_owner IS NOT DISTINCT FROM OLD.lease_owner THEN
             PERFORM pg_advisory_xact_lock_shared({LOCK});
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER test_hold_after_freeze BEFORE UPDATE ON draws FOR EACH ROW
           WHEN (OLD.sale_id = '{SALE}') EXECUTE FUNCTION test_hold_after_freeze();"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_killed_between_the_freeze_and_the_purchases() {
    let started = Instant::now();
    let cluster = Cluster::start(Engine::Redis, &[], None).await;
    let db = connect(&cluster).await;
    let mut holder = PgConnection::connect(cluster.database_url())
        .await
        .expect("the test's own connection");
    let now = Utc::now();
    let window = (now - TimeDelta::seconds(1), now + OPEN_FOR);
    let commitment = calls::create(&cluster, SALE, STOCK, HOLD_SECONDS, window).await;
    sqlx::raw_sql(&trigger())
        .execute(&db)
        .await
        .expect("add the trigger");
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(LOCK)
        .execute(&mut holder)
        .await
        .expect("take the advisory lock");
    let entries = calls::enter_all(&cluster, SALE, BUYERS).await;
    assert!(entries.violations.is_empty(), "{:?}", entries.violations);
    let held = held_runner(&db, (window.1 - Utc::now()).to_std().unwrap_or_default()).await;
    // Between the freeze and the purchases: read what the store holds.
    let before = frozen(&db, SALE).await;
    let (owner, drawn): (Option<String>, Option<i64>) =
        sqlx::query_as("SELECT lease_owner, drawn_at_ms FROM draws WHERE sale_id = $1")
            .bind(SALE)
            .fetch_one(&db)
            .await
            .expect("read the lease");
    let owner = owner.expect("a lease holder while its renewal waits");
    let victim = cluster
        .instance_named(&owner)
        .unwrap_or_else(|| panic!("the lease holder {owner} is no instance of the cluster"));
    let mut violations = Vec::new();
    if before.at_ms.is_none() || before.digest.is_none() || before.unplaced > 0 {
        violations.push(format!(
            "harness: backend {held} waits, but the set is not frozen: {before:?}"
        ));
    }
    if before.ids.len() != entries.by_buyer.len() {
        violations.push(format!(
            "the frozen set has {} entries; {} buyers were answered an entry",
            before.ids.len(),
            entries.by_buyer.len()
        ));
    }
    let orders = orders_of(&db, SALE).await;
    if orders != 0 || drawn.is_some() {
        violations.push(format!(
            "harness: before the kill the sale already has {orders} orders (drawn: {drawn:?}): \
             the kill is not before the purchases"
        ));
    }
    let other = (victim + 1) % INSTANCES;
    let view = api::get_sale(cluster.client(), &cluster.endpoints().get(other), SALE).await;
    if view.body()["remaining"].as_u64() != Some(STOCK) {
        violations.push(format!(
            "harness: before the kill the engine sold already: {}",
            view.describe()
        ));
    }
    cluster.kill_instance(victim).await;
    let killed_at = Instant::now();
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(LOCK)
        .execute(&mut holder)
        .await
        .expect("let the advisory lock go");
    let killed = format!(
        "instance {victim} ({owner}) SIGKILLed {:.1} s into the test, after the freeze of {} \
         entries and before any order",
        started.elapsed().as_secs_f64(),
        before.ids.len()
    );
    eprintln!("freeze kill: {killed}");
    if !violations.is_empty() {
        fail(&cluster, 1, SALE, &killed, violations);
    }
    cluster.restart_instance(victim).await;
    let draws = match wait_drawn(&cluster, SALE).await {
        Ok(draws) => draws,
        Err(why) => fail(&cluster, 1, SALE, &killed, vec![why]),
    };
    // The dead instance's lease (10 s) ran out first.
    let drawn_after = killed_at.elapsed();
    let (published_violations, published) =
        checks::check_published(&draws, &commitment, STOCK, &entries);
    violations.extend(published_violations);
    let Some(published) = published else {
        fail(&cluster, 1, SALE, &killed, violations);
    };
    // The positions frozen before the kill, and the set as it is now.
    violations.extend(check_frozen(
        &before,
        &published.order,
        published.digest.as_deref(),
    ));
    violations.extend(check_frozen(
        &frozen(&db, SALE).await,
        &published.order,
        published.digest.as_deref(),
    ));
    let (buyer_violations, winners) =
        checks::check_buyers(&cluster, SALE, 1, &entries, &published).await;
    violations.extend(buyer_violations);
    violations.extend(checks::check_store(&cluster, SALE, STOCK, &winners).await);
    if !violations.is_empty() {
        fail(&cluster, 1, SALE, &killed, violations);
    }
    eprintln!(
        "freeze kill: drawn by another instance from the stored positions {:.1} s after the \
         kill, {} won; every check holds ({:.1} s)",
        drawn_after.as_secs_f64(),
        winners.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Waits (up to `until_close` and [`HELD_TIMEOUT`] more) for a backend
/// waiting on the test's advisory lock: a runner held after its freeze.
/// Its process id.
async fn held_runner(db: &PgPool, until_close: Duration) -> i32 {
    let deadline = Instant::now() + until_close + HELD_TIMEOUT;
    loop {
        let waiting: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_locks
              WHERE locktype = 'advisory' AND objid::bigint = $1 AND NOT granted LIMIT 1",
        )
        .bind(LOCK)
        .fetch_optional(db)
        .await
        .expect("read pg_locks");
        if let Some(pid) = waiting {
            return pid;
        }
        let (drawn, orders) = (
            sqlx::query_scalar::<_, Option<i64>>(
                "SELECT drawn_at_ms FROM draws WHERE sale_id = $1",
            )
            .bind(SALE)
            .fetch_one(db)
            .await
            .expect("read the draw"),
            orders_of(db, SALE).await,
        );
        assert!(
            drawn.is_none() && orders == 0 && Instant::now() < deadline,
            "no draw runner was held between the freeze and its first purchase within {} s of \
             the close (drawn: {drawn:?}, {orders} orders): the test expects the runner to \
             renew its lease (an UPDATE of draws) after the freeze and before each purchase",
            HELD_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
