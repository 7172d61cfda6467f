//! Sharded sales on the Redis engine (issue 21, item 2), beyond the
//! conformance suite (which runs every scenario with its sales split over
//! three shards): buyers crowding one shard still buy the whole stock,
//! what a purchase reports left, transfers stranded by a dead or stalled
//! giver, and a three-primary Cluster holding one shard on each primary.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use stockade_core::{
    Engine, Epoch, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock, UserId,
};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_test_support::{RedisCluster, RedisServer};

const PREFIX: &str = "stockade:";

async fn connect(url: &str) -> RedisEngine {
    RedisEngine::connect(
        &RedisEngineConfig::from_url(url).unwrap(),
        Arc::new(SystemClock),
    )
    .await
    .expect("connect to redis")
}

fn sharded(id: &str, stock: u32, limit: u32, shards: u16) -> SaleSpec {
    SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .shards(shards)
        .unwrap()
        .build()
        .unwrap()
}

/// `n` buyers whose purchases all meet shard `shard` of `spec`.
fn buyers_of_shard(spec: &SaleSpec, shard: u16, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("buyer-{i}"))
        .filter(|user| spec.shard_of(&UserId::new(user.as_str()).unwrap()) == shard)
        .take(n)
        .collect()
}

async fn buy(engine: &RedisEngine, sale: &str, user: &str, quantity: u32) -> PurchaseOutcome {
    engine
        .purchase(&Purchase::new(sale, user, quantity).unwrap())
        .await
        .unwrap()
}

/// A plain connection to look at and meddle with the keys.
async fn raw(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn query<T: redis::FromRedisValue>(redis: &RedisServer, args: &[&str]) -> T {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(&mut raw(redis).await).await.unwrap()
}

/// Every shard's sale hash, in key order.
async fn shard_hashes(redis: &RedisServer, sale: &str) -> Vec<HashMap<String, String>> {
    let mut keys: Vec<String> = query(redis, &["KEYS", &format!("{PREFIX}{{{sale}*:sale")]).await;
    keys.sort_unstable();
    let mut hashes = Vec::new();
    for key in keys {
        hashes.push(query(redis, &["HGETALL", &key]).await);
    }
    hashes
}

fn remaining_of(hash: &HashMap<String, String>) -> u32 {
    hash["remaining"].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn buyers_crowding_one_shard_buy_the_whole_stock_and_no_more() {
    let redis = RedisServer::start().unwrap();
    let engine = Arc::new(connect(&redis.url()).await);
    let spec = sharded("crowded", 300, 1, 3);
    engine.create_sale(&spec).await.unwrap();
    let shares: Vec<u32> = shard_hashes(&redis, "crowded")
        .await
        .iter()
        .map(remaining_of)
        .collect();
    assert_eq!(shares, vec![100, 100, 100], "the stock split evenly");
    // 1,000 buyers, every one of them decided by shard 0.
    let buyers = buyers_of_shard(&spec, 0, 1_000);
    let outcomes = join_all(buyers.iter().map(|user| {
        let engine = Arc::clone(&engine);
        let user = user.clone();
        async move { buy(&engine, "crowded", &user, 1).await }
    }))
    .await;
    let bought = outcomes
        .iter()
        .filter(|o| matches!(o, PurchaseOutcome::Purchased { .. }))
        .count();
    assert_eq!(bought, 300, "shard 0 pulled its siblings' stock");
    assert!(
        outcomes.iter().all(|o| matches!(
            o,
            PurchaseOutcome::Purchased { .. } | PurchaseOutcome::SoldOut
        )),
        "{outcomes:?}"
    );
    let snapshot = engine
        .snapshot(&SaleId::new("crowded").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snapshot.remaining, snapshot.sold), (0, 300));
    let hashes = shard_hashes(&redis, "crowded").await;
    assert!(hashes.iter().all(|h| remaining_of(h) == 0), "{hashes:?}");
    let outbox = engine
        .outbox(&SaleId::new("crowded").unwrap())
        .await
        .unwrap();
    assert_eq!(outbox.len(), 300);
    let users: HashSet<&UserId> = outbox.iter().map(|o| &o.user_id).collect();
    assert_eq!(users.len(), 300, "no buyer twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_purchase_reports_its_shards_stock_and_nothing_left_only_when_every_shard_is_empty() {
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url()).await;
    let spec = sharded("bound", 6, 10, 3);
    engine.create_sale(&spec).await.unwrap();
    let user = &buyers_of_shard(&spec, 1, 1)[0];
    let mut reported = Vec::new();
    for _ in 0..6 {
        let PurchaseOutcome::Purchased { remaining, .. } = buy(&engine, "bound", user, 1).await
        else {
            panic!("six items, a limit of ten");
        };
        let whole = engine
            .snapshot(&SaleId::new("bound").unwrap())
            .await
            .unwrap()
            .unwrap()
            .remaining;
        assert!(remaining <= whole, "{remaining} reported, {whole} left");
        assert_eq!(
            remaining == 0,
            whole == 0,
            "{remaining} reported, {whole} left"
        );
        reported.push(remaining);
    }
    assert_eq!(reported.last(), Some(&0));
    assert_eq!(
        buy(&engine, "bound", user, 1).await,
        PurchaseOutcome::SoldOut
    );
    // The per-user limit is exact: it lives in the buyer's one shard.
    assert_eq!(
        engine
            .purchased_by(
                &SaleId::new("bound").unwrap(),
                &UserId::new(user.as_str()).unwrap()
            )
            .await
            .unwrap(),
        6
    );
}

/// Waits until `check` holds of the shards' hashes, at most 10 s.
async fn eventually(
    redis: &RedisServer,
    sale: &str,
    check: impl Fn(&[HashMap<String, String>]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let hashes = shard_hashes(redis, sale).await;
        if check(&hashes) {
            return;
        }
        assert!(Instant::now() < deadline, "never: {hashes:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn redis_ms(redis: &RedisServer) -> i64 {
    let (seconds, micros): (i64, i64) = query(redis, &["TIME"]).await;
    seconds * 1000 + micros / 1000
}

/// The sale hash key of shard `shard` of `sale`: the sale's own tag for
/// shard 0, `<sale>.<shard>.<n>` for the others.
async fn shard_key(redis: &RedisServer, sale: &str, shard: u16) -> String {
    let tag = if shard == 0 {
        format!("{{{sale}}}")
    } else {
        format!("{{{sale}.{shard}.")
    };
    let keys: Vec<String> = query(redis, &["KEYS", &format!("{PREFIX}{{{sale}*:sale")]).await;
    keys.into_iter().find(|k| k.contains(&tag)).unwrap()
}

async fn hash_of(redis: &RedisServer, key: &str) -> HashMap<String, String> {
    query(redis, &["HGETALL", key]).await
}

/// A giver's give.lua, late: transfer `id` of `items` taken at `taken_at`
/// (ms), epoch 1, the engine's 60 s horizon. Its answer code.
async fn give(redis: &RedisServer, receiver: &str, id: &str, items: u32, taken_at: i64) -> i64 {
    let (code, _): (i64, i64) = query(
        redis,
        &[
            "EVAL",
            include_str!("../lua/give.lua"),
            "1",
            receiver,
            "1",
            id,
            &items.to_string(),
            &taken_at.to_string(),
            "60000",
        ],
    )
    .await;
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transfer_left_by_a_dead_giver_is_given_and_one_left_by_a_stalled_giver_is_put_back() {
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url()).await;
    let spec = sharded("stranded", 30, 1, 3);
    engine.create_sale(&spec).await.unwrap();
    // A purchase makes the sale one the background pass looks after.
    let user = &buyers_of_shard(&spec, 0, 1)[0];
    assert!(matches!(
        buy(&engine, "stranded", user, 1).await,
        PurchaseOutcome::Purchased { .. }
    ));
    let giver = shard_key(&redis, "stranded", 1).await;
    let receiver = shard_key(&redis, "stranded", 2).await;
    let giver_before = remaining_of(&hash_of(&redis, &giver).await);
    let receiver_before = remaining_of(&hash_of(&redis, &receiver).await);
    let now = redis_ms(&redis).await;
    // A giver that died 6 s ago, after taking 4 items from shard 1 for
    // shard 2 (as take.lua does).
    let _: i64 = query(&redis, &["HINCRBY", &giver, "remaining", "-4"]).await;
    let _: i64 = query(
        &redis,
        &["HSET", &giver, "xout:dead", &format!("2:4:{}", now - 6_000)],
    )
    .await;
    // One that stalled 70 s ago (past the horizon) with 3 items.
    let _: i64 = query(&redis, &["HINCRBY", &giver, "remaining", "-3"]).await;
    let _: i64 = query(
        &redis,
        &[
            "HSET",
            &giver,
            "xout:stalled",
            &format!("2:3:{}", now - 70_000),
        ],
    )
    .await;
    // The snapshot counts items in flight as left.
    let sale = SaleId::new("stranded").unwrap();
    assert_eq!(engine.snapshot(&sale).await.unwrap().unwrap().remaining, 29);
    eventually(&redis, "stranded", |hashes| {
        hashes
            .iter()
            .all(|h| !h.keys().any(|k| k.starts_with("xout:")))
    })
    .await;
    let (giver_hash, receiver_hash) = (
        hash_of(&redis, &giver).await,
        hash_of(&redis, &receiver).await,
    );
    assert_eq!(
        remaining_of(&receiver_hash),
        receiver_before + 4,
        "given once"
    );
    assert!(receiver_hash.contains_key("xin:dead"), "{receiver_hash:?}");
    assert!(
        !receiver_hash.contains_key("xin:stalled"),
        "too old to give"
    );
    assert_eq!(
        remaining_of(&giver_hash),
        giver_before - 4,
        "the stalled 3 put back"
    );
    assert_eq!(engine.snapshot(&sale).await.unwrap().unwrap().remaining, 29);
    // The stalled giver wakes up and gives: refused, nothing doubled.
    let given = give(&redis, &receiver, "stalled", 3, now - 70_000).await;
    assert_eq!(given, 2, "too old");
    // And the dead one's give, replayed, is given once only.
    let replayed = give(&redis, &receiver, "dead", 4, now - 6_000).await;
    assert_eq!(replayed, 1, "given before");
    assert_eq!(
        remaining_of(&hash_of(&redis, &receiver).await),
        receiver_before + 4
    );
    assert_eq!(engine.snapshot(&sale).await.unwrap().unwrap().remaining, 29);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_three_primary_cluster_each_shard_lives_on_its_own_primary() {
    let cluster = RedisCluster::start().unwrap();
    let engine = Arc::new(connect(&cluster.url()).await);
    let spec = sharded("spread-hot", 900, 1, 3);
    engine.create_sale(&spec).await.unwrap();
    let mut owners = HashSet::new();
    for port in cluster.ports() {
        let node = cluster.node(port).unwrap();
        let here: Vec<String> = query(node, &["KEYS", "stockade:{spread-hot*:sale"]).await;
        assert_eq!(here.len(), 1, "primary {port} holds {here:?}");
        owners.insert(port);
    }
    assert_eq!(owners.len(), 3);
    let outcomes = join_all((0..1_200).map(|n| {
        let engine = Arc::clone(&engine);
        async move { buy(&engine, "spread-hot", &format!("buyer-{n}"), 1).await }
    }))
    .await;
    let bought = outcomes
        .iter()
        .filter(|o| matches!(o, PurchaseOutcome::Purchased { .. }))
        .count();
    assert_eq!(bought, 900);
    let sale = SaleId::new("spread-hot").unwrap();
    assert_eq!(engine.snapshot(&sale).await.unwrap().unwrap().remaining, 0);
    assert_eq!(engine.outbox(&sale).await.unwrap().len(), 900);
    assert_eq!(engine.epoch(&sale).await.unwrap(), Some(Epoch::FIRST));
}
