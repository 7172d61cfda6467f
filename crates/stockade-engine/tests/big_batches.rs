//! purchase.lua never writes half a batch (issue 35, item 7): one script
//! call built by hand with 256 purchases of a 20-item bundle, on a sale
//! with a per-SKU limit and on one with a tier, as a Functions library and
//! with EVALSHA. Lua 5.1 unpacks at most about 8,000 values into a call;
//! such a batch names more holdings (per buyer and SKU) and tier counts
//! (per order and item, before they were de-duplicated) than that. Every
//! purchase gets its answer, and per SKU `remaining + sold = stock`.

use std::sync::Arc;

use chrono::Utc;
use stockade_core::{
    Engine, Epoch, Item, ManualClock, OrderId, SaleId, SaleSpec, SkuId, SkuSpec, TierName, TierSpec,
};
use stockade_engine::{RedisEngine, RedisEngineConfig, ScriptsMode};
use stockade_test_support::RedisServer;

const SKUS: usize = 20;
const STOCK: u32 = 200;
const BUYERS: usize = 256;

fn sku(i: usize) -> SkuId {
    SkuId::new(format!("s{i:02}")).unwrap()
}

fn skus() -> Vec<SkuSpec> {
    (0..SKUS)
        .map(|i| SkuSpec {
            id: sku(i),
            stock: STOCK,
        })
        .collect()
}

/// 20 SKUs of 200, a buyer may hold one of each.
fn capped(id: &str) -> SaleSpec {
    SaleSpec::with_skus(id, skus())
        .unwrap()
        .per_user_limit(SKUS as u32)
        .unwrap()
        .per_sku_limit(1)
        .unwrap()
        .build()
        .unwrap()
}

/// 20 SKUs of 200, 50 of each kept for the tier `vip` and 50 for
/// `staff` (the test's clock stays before their release).
fn tiered(id: &str) -> SaleSpec {
    let tier = |name: &str| TierSpec {
        name: TierName::new(name).unwrap(),
        reserved: (0..SKUS)
            .map(|i| Item {
                sku: sku(i),
                quantity: 50,
            })
            .collect(),
        per_user_limit: None,
        starts_at: None,
    };
    SaleSpec::with_skus(id, skus())
        .unwrap()
        .per_user_limit(SKUS as u32)
        .unwrap()
        .tiers(vec![tier("vip"), tier("staff")])
        .release_reserved_at(Utc::now() + chrono::TimeDelta::days(1))
        .build()
        .unwrap()
}

/// One purchase.lua call deciding `BUYERS` bundles of one of each SKU
/// (every buyer a `vip` or `staff` in turn when `tier`); its answer codes.
async fn one_call(engine: &RedisEngine, sale: &SaleId, tier: bool) -> Vec<i64> {
    let bundle = Item::encode_list(
        &(0..SKUS)
            .map(|i| Item {
                sku: sku(i),
                quantity: 1,
            })
            .collect::<Vec<_>>(),
    );
    let script = RedisEngine::library().script("purchase");
    let mut call = script.prepare_invoke();
    for key in engine.keys(sale).all() {
        call.key(key);
    }
    call.arg(Utc::now().timestamp_millis())
        .arg(BUYERS)
        .arg(Epoch::new(1).get());
    for buyer in 0..BUYERS {
        call.arg(format!("buyer-{buyer}"))
            .arg(SKUS)
            .arg("")
            .arg(OrderId::generate().to_string())
            .arg(&bundle)
            .arg(match (tier, buyer % 2) {
                (false, _) => "",
                (true, 0) => "vip",
                (true, _) => "staff",
            });
    }
    let reply: Vec<redis::Value> = call
        .invoke_async(&mut engine.connection())
        .await
        .unwrap_or_else(|error| panic!("the batch failed: {error}"));
    assert_eq!(reply.len(), 1 + 2 * BUYERS, "{reply:?}");
    reply[1..]
        .chunks(2)
        .map(|answer| match answer[0] {
            redis::Value::Int(code) => code,
            ref other => panic!("an answer code that is no number: {other:?}"),
        })
        .collect()
}

async fn a_batch_of_big_bundles_is_decided_whole(scripts: ScriptsMode, spec: SaleSpec, tier: bool) {
    let server = RedisServer::start().expect("start redis-server");
    let engine = RedisEngine::connect(
        &RedisEngineConfig::new(server.url()).scripts(scripts),
        Arc::new(ManualClock::new(Utc::now())),
    )
    .await
    .unwrap();
    engine.create_sale(&spec).await.unwrap();
    let codes = one_call(&engine, spec.id(), tier).await;
    let accepted = codes.iter().filter(|&&code| code == 1).count();
    assert_eq!(
        accepted, STOCK as usize,
        "every SKU sells out, one bundle at a time: {codes:?}"
    );
    assert!(
        codes
            .iter()
            .all(|&code| code == 1 || code == 2 || code == 3),
        "only purchased, sold out or short: {codes:?}"
    );
    let snapshot = engine.snapshot(spec.id()).await.unwrap().unwrap();
    for left in &snapshot.skus {
        assert_eq!(
            left.remaining + accepted as u32,
            STOCK,
            "{scripts}: SKU {} has {} left after {accepted} bundles",
            left.id,
            left.remaining
        );
    }
    let outbox = engine.outbox(spec.id()).await.unwrap();
    assert_eq!(
        outbox.len(),
        accepted,
        "{scripts}: every accepted order waits in the outbox"
    );
    assert!(outbox.iter().all(|order| order.items.len() == SKUS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_per_sku_limit_as_functions() {
    a_batch_of_big_bundles_is_decided_whole(ScriptsMode::Functions, capped("capped"), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_per_sku_limit_with_evalsha() {
    a_batch_of_big_bundles_is_decided_whole(ScriptsMode::Eval, capped("capped"), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tiers_as_functions() {
    a_batch_of_big_bundles_is_decided_whole(ScriptsMode::Functions, tiered("tiered"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tiers_with_evalsha() {
    a_batch_of_big_bundles_is_decided_whole(ScriptsMode::Eval, tiered("tiered"), true).await;
}

/// A call of more purchases than one outbox entry can carry is refused
/// before anything is written (the engine never sends one: it cuts its
/// batches to `MAX_BATCH`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_beyond_the_bound_is_refused_whole() {
    let server = RedisServer::start().expect("start redis-server");
    let engine = RedisEngine::connect(
        &RedisEngineConfig::new(server.url()),
        Arc::new(ManualClock::new(Utc::now())),
    )
    .await
    .unwrap();
    let spec = SaleSpec::builder("plain", 5_000).unwrap().build().unwrap();
    engine.create_sale(&spec).await.unwrap();
    let count = stockade_engine::redis::MAX_BATCH + 1;
    let script = RedisEngine::library().script("purchase");
    let mut call = script.prepare_invoke();
    for key in engine.keys(spec.id()).all() {
        call.key(key);
    }
    call.arg(Utc::now().timestamp_millis()).arg(count).arg(1);
    for buyer in 0..count {
        call.arg(format!("buyer-{buyer}"))
            .arg(1)
            .arg("")
            .arg(OrderId::generate().to_string());
    }
    let refused = call
        .invoke_async::<Vec<redis::Value>>(&mut engine.connection())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("at most 2000"), "{refused}");
    let snapshot = engine.snapshot(spec.id()).await.unwrap().unwrap();
    assert_eq!(snapshot.remaining, 5_000, "nothing was sold");
    assert!(engine.outbox(spec.id()).await.unwrap().is_empty());
}
