//! Rejections that cost nothing (issue 9, item 2): sold-out, not-started,
//! ended and unknown sales are answered by the instance itself, without a
//! Redis command or a store read, and stock that comes back through
//! another instance is sold again within the documented bound (1 s).
//! Real Redis and PostgreSQL servers; Redis work is counted with INFO
//! commandstats, store work with pg_stat_statements.

use crate::common;
use crate::instances;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer};
use instances::{Backends, Instance};
use serde_json::{Value, json};
use stockade_core::ManualClock;

/// The documented bound on how long another instance may keep answering
/// sold_out or unknown_sale after stock came back or the sale was created.
const BOUND: Duration = Duration::from_secs(1);

/// How many purchases of a crowd are in flight at once.
const CROWD_AT_ONCE: usize = 16;

/// `count` purchases of `sale` by distinct buyers (no key),
/// [`CROWD_AT_ONCE`] at a time.
async fn crowd(
    instance: &Arc<Instance>,
    sale: &str,
    prefix: &str,
    count: usize,
) -> Vec<(u16, Value)> {
    let mut answers = Vec::new();
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..count {
        let instance = Arc::clone(instance);
        let sale = sale.to_owned();
        let user = format!("{prefix}-{i}");
        pending.spawn(async move { instance.buy(&sale, &user, None).await });
        if pending.len() >= CROWD_AT_ONCE {
            answers.push(pending.join_next().await.unwrap().unwrap());
        }
    }
    while let Some(answer) = pending.join_next().await {
        answers.push(answer.unwrap());
    }
    answers
}

/// How many engine calls the reconcilers and the ttl may account for in
/// `elapsed`: a few per second, far below one per purchase.
fn background_allowance(elapsed: Duration, per_second: u64) -> u64 {
    per_second * (elapsed.as_secs() + 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_sell_out_further_purchases_cost_no_redis_command() {
    let backends = Backends::start(false).await;
    let instance =
        Arc::new(Instance::start(&backends, |c| c.purchases.rejection_ttl_ms = Some(1_000)).await);
    let (status, _) = instance.create_sale(json!({"id": "hot", "stock": 5})).await;
    assert_eq!(status, 201);
    for i in 0..5 {
        let (status, body) = instance.buy("hot", &format!("early-{i}"), None).await;
        assert_eq!(status, 201, "{body}");
    }
    // The engine says so once; that answer is the model of every other.
    let (status, engine_made, retry_after) =
        instance.buy_with_headers("hot", "late-engine", None).await;
    assert_eq!(status, 409);
    assert_eq!(engine_made["error"]["code"], "sold_out");
    assert_eq!(retry_after, None);

    let before = backends.redis_commands();
    let cached_before = instance
        .metric("stockade_rejections_cached_total{reason=\"sold_out\"}")
        .await;
    let started = Instant::now();
    let answers = crowd(&instance, "hot", "late", 1_000).await;
    let elapsed = started.elapsed();
    let commands = backends.redis_commands() - before;
    for (status, body) in &answers {
        assert_eq!(*status, 409, "{body}");
        assert_eq!(body, &engine_made, "a cached answer is the engine's answer");
    }
    let cached = instance
        .metric("stockade_rejections_cached_total{reason=\"sold_out\"}")
        .await
        - cached_before;
    eprintln!(
        "1000 sold-out purchases in {elapsed:?}: {commands} Redis commands, {cached} answered from the cache"
    );
    assert!(
        commands <= background_allowance(elapsed, 20),
        "{commands} Redis commands for 1000 sold-out purchases in {elapsed:?}"
    );
    assert!(cached >= 900.0, "only {cached} answered from the cache");
    // Nothing was sold meanwhile.
    let (_, sale) = instance.get("/v1/sales/hot").await;
    assert_eq!(sale["remaining"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_cancelled_on_one_instance_is_sold_on_another_within_the_bound() {
    let backends = Backends::start(false).await;
    let a = Instance::start(&backends, |_| {}).await;
    let b = Instance::start(&backends, |_| {}).await;
    let (status, _) = a.create_sale(json!({"id": "one", "stock": 1})).await;
    assert_eq!(status, 201);
    let (status, mut holder) = b.buy("one", "first", None).await;
    assert_eq!(status, 201, "{holder}");
    for round in 0..5 {
        // B learns from the engine that the sale is sold out, and then
        // answers so itself.
        let (status, body) = b.buy("one", &format!("learner-{round}"), None).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("sold_out")),
            "{body}"
        );
        let cached_before = b
            .metric("stockade_rejections_cached_total{reason=\"sold_out\"}")
            .await;
        let (status, _) = b.buy("one", &format!("cached-{round}"), None).await;
        assert_eq!(status, 409);
        assert!(
            b.metric("stockade_rejections_cached_total{reason=\"sold_out\"}")
                .await
                > cached_before,
            "B did not answer from what it knew"
        );
        // A gives the item back.
        let order = holder["order_id"].as_str().unwrap().to_owned();
        let (status, body) = a.cancel(&order).await;
        assert_eq!(status, 200, "{body}");
        let returned = Instant::now();
        let mut attempt = 0;
        holder = loop {
            attempt += 1;
            let (status, body) = b
                .buy("one", &format!("after-{round}-{attempt}"), None)
                .await;
            if status == 201 {
                break body;
            }
            assert_eq!(status, 409, "{body}");
            assert!(
                returned.elapsed() < BOUND + Duration::from_millis(500),
                "round {round}: B still refuses {:?} after the cancel on A",
                returned.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let waited = returned.elapsed();
        eprintln!(
            "round {round}: sold again on B {waited:?} after the cancel on A ({attempt} attempts)"
        );
        assert!(
            waited <= BOUND,
            "round {round}: {waited:?} is over the bound"
        );
    }
    // A cancel on B itself is seen by B at once.
    let (status, _) = b.buy("one", "learner-last", None).await;
    assert_eq!(status, 409);
    let (status, _) = b.buy("one", "cached-last", None).await;
    assert_eq!(status, 409);
    let (status, body) = b.cancel(holder["order_id"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = b.buy("one", "right-after", None).await;
    assert_eq!(
        status, 201,
        "a cancel on B is not seen by B at once: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unknown_sale_flood_reads_the_store_a_few_times_and_a_creation_elsewhere_is_seen_within_the_bound()
 {
    let backends = Backends::start(true).await;
    let a = Instance::start(&backends, |_| {}).await;
    let b =
        Arc::new(Instance::start(&backends, |c| c.purchases.rejection_ttl_ms = Some(1_000)).await);
    let before = backends.statements().await;
    let started = Instant::now();
    let answers = crowd(&b, "ghost", "curious", 1_000).await;
    let elapsed = started.elapsed();
    let statements = backends.statements().await - before;
    for (status, body) in &answers {
        assert_eq!(*status, 404, "{body}");
        assert_eq!(body["error"]["code"], "unknown_sale");
    }
    eprintln!("1000 purchases of an unknown sale in {elapsed:?}: {statements} store statements");
    // Two reconcilers read the store a few times a second each, and each
    // purchase of the first wave may read it before the first answer is
    // learned (no single flight): on a loaded machine 28 statements in
    // 0.85 s, over the 24 the background alone is allowed.
    assert!(
        statements <= (background_allowance(elapsed, 12) + CROWD_AT_ONCE as u64) as i64,
        "{statements} store statements for 1000 purchases of an unknown sale in {elapsed:?}"
    );

    // B has just cached "ghost" as unknown; A creates it.
    let (status, _) = b.buy("ghost", "just-before", None).await;
    assert_eq!(status, 404);
    let (status, body) = a.create_sale(json!({"id": "ghost", "stock": 10})).await;
    assert_eq!(status, 201, "{body}");
    let created = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (status, body) = b.buy("ghost", &format!("eager-{attempt}"), None).await;
        if status == 201 {
            break;
        }
        assert_eq!(status, 404, "{body}");
        assert!(
            created.elapsed() < BOUND + Duration::from_millis(500),
            "B still says unknown {:?} after the creation on A",
            created.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waited = created.elapsed();
    eprintln!("sale created on A bought on B after {waited:?} ({attempt} attempts)");
    assert!(waited <= BOUND, "{waited:?} is over the bound");
    // A creation on the same instance is seen at once.
    let (status, _) = b.buy("ghost-2", "early", None).await;
    assert_eq!(status, 404);
    let (status, _) = b.create_sale(json!({"id": "ghost-2", "stock": 1})).await;
    assert_eq!(status, 201);
    let (status, body) = b.buy("ghost-2", "early", None).await;
    assert_eq!(status, 201, "{body}");
}

/// Store reads of one sale by id: the route's (`sale_state`) and the
/// waiting room's (`sale_with_room`), the reads a purchase makes of a sale
/// its instance does not know yet (not the commits' locking reads).
async fn cold_reads(backends: &Backends) -> i64 {
    backends
        .statements_like("%undrained_epoch FROM sales WHERE id IN ($1)")
        .await
        + backends
            .statements_like("%LEFT JOIN waiting_rooms w ON w.sale_id%")
            .await
}

/// `count` purchases of `sale` by distinct buyers, all sent while the
/// store's `sales` table is locked, so that every one of them that reads
/// the sale waits for the read together; the lock goes after a moment.
async fn burst_on_a_slow_store(
    backends: &Backends,
    instance: &Arc<Instance>,
    sale: &str,
    count: usize,
) -> Vec<(u16, Value)> {
    use sqlx::Connection as _;
    let mut locker = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    let mut lock = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE sales IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..count {
        let instance = Arc::clone(instance);
        let sale = sale.to_owned();
        pending.spawn(async move { instance.buy(&sale, &format!("burst-{i}"), None).await });
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    lock.rollback().await.unwrap();
    pending.join_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_for_a_sale_an_instance_has_not_read_yet_reads_it_from_the_store_once() {
    let backends = Backends::start(true).await;
    let a = Instance::start(&backends, |_| {}).await;
    let b =
        Arc::new(Instance::start(&backends, |c| c.purchases.rejection_ttl_ms = Some(1_000)).await);
    // Created on A: B has never read it.
    let (status, body) = a.create_sale(json!({"id": "cold", "stock": 1000})).await;
    assert_eq!(status, 201, "{body}");
    for (sale, expected) in [("cold", 201), ("never-created", 404)] {
        let before = cold_reads(&backends).await;
        let answers = burst_on_a_slow_store(&backends, &b, sale, 100).await;
        let reads = cold_reads(&backends).await - before;
        for (status, body) in &answers {
            assert_eq!(*status, expected, "{sale}: {body}");
        }
        eprintln!("100 purchases at once of {sale}, unread on B: {reads} store reads of it");
        // One read of its waiting room and one of its route, and a spare
        // for a reconciler pass that looks the sale up meanwhile.
        assert!(
            reads <= 3,
            "{reads} store reads of {sale} for one burst of 100 purchases"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sale_window_is_answered_locally_and_opens_exactly_at_its_start() {
    let backends = Backends::start(false).await;
    let clock = ManualClock::new(Utc::now());
    let start = clock_now(&clock) + TimeDelta::minutes(10);
    let end = start + TimeDelta::minutes(10);
    let instance =
        Arc::new(Instance::start_with_clock(&backends, Arc::new(clock.clone()), |_| {}).await);
    let (status, body) = instance
        .create_sale(json!({"id": "later", "stock": 100, "starts_at": start, "ends_at": end}))
        .await;
    assert_eq!(status, 201, "{body}");
    // The first purchase learns the sale (a store read, maybe the engine).
    let (status, model) = instance.buy("later", "first", None).await;
    assert_eq!(
        (status, &model["error"]["code"]),
        (409, &json!("not_started"))
    );

    let before = backends.redis_commands();
    let started = Instant::now();
    let answers = crowd(&instance, "later", "early", 300).await;
    let elapsed = started.elapsed();
    for (status, body) in &answers {
        assert_eq!((*status, body), (409, &model));
    }
    let commands = backends.redis_commands() - before;
    assert!(
        commands <= background_allowance(elapsed, 5),
        "{commands} Redis commands for 300 purchases before the start, in {elapsed:?}"
    );

    // At its start, not a moment later, it sells.
    clock.set(start - TimeDelta::milliseconds(1));
    let (status, _) = instance.buy("later", "almost", None).await;
    assert_eq!(status, 409);
    clock.set(start);
    let (status, bought) = instance.buy("later", "on-time", Some("k-on-time")).await;
    assert_eq!(status, 201, "{bought}");

    // At its end it stops, answered locally again.
    clock.set(end);
    let (status, ended) = instance.buy("later", "too-late", None).await;
    assert_eq!((status, &ended["error"]["code"]), (409, &json!("ended")));
    let before = backends.redis_commands();
    let started = Instant::now();
    let answers = crowd(&instance, "later", "late", 300).await;
    let elapsed = started.elapsed();
    for (status, body) in &answers {
        assert_eq!((*status, body), (409, &ended));
    }
    let commands = backends.redis_commands() - before;
    assert!(
        commands <= background_allowance(elapsed, 5),
        "{commands} Redis commands for 300 purchases after the end, in {elapsed:?}"
    );
    // A keyed replay after the end still gets its order.
    let (status, replay) = instance.buy("later", "on-time", Some("k-on-time")).await;
    assert!(status == 200 || status == 202, "{status}: {replay}");
    assert_eq!(replay["order_id"], bought["order_id"]);
}

fn clock_now(clock: &ManualClock) -> chrono::DateTime<Utc> {
    use stockade_core::Clock;
    clock.now()
}

/// A purchase with an Idempotency-Key that names an order already made is
/// answered with that order, even when this instance knows the sale is
/// sold out; a new keyed purchase is still refused.
async fn keyed_replay_on_a_sold_out_sale(server: TestServer) {
    let (status, _) = server
        .create_sale(json!({"id": "last-one", "stock": 1}))
        .await;
    assert_eq!(status, 201);
    let (status, original) = server.buy("last-one", "lucky", 1, Some("lucky-key")).await;
    assert_eq!(status, 201, "{original}");
    // Sold out, and known to be.
    for i in 0..3 {
        let (status, body) = server.buy("last-one", &format!("other-{i}"), 1, None).await;
        assert_eq!((status, &body["error"]["code"]), (409, &json!("sold_out")));
    }
    let (status, replay) = server.buy("last-one", "lucky", 1, Some("lucky-key")).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["order_id"], original["order_id"]);
    let (status, body) = server.buy("last-one", "unlucky", 1, Some("new-key")).await;
    assert_eq!((status, &body["error"]["code"]), (409, &json!("sold_out")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_replay_on_a_sold_out_sale_embedded() {
    keyed_replay_on_a_sold_out_sale(TestServer::start(Setup::Embedded).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_replay_on_a_sold_out_sale_redis_postgres() {
    keyed_replay_on_a_sold_out_sale(TestServer::start(Setup::RedisPostgres).await).await;
}
