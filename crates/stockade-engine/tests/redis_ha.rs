//! The Redis engine on highly available Redis: the primary of a Sentinel
//! group, followed across a failover, and a three-primary Redis Cluster,
//! with a sale's slot migrated while buyers run. Each test starts its own
//! throwaway servers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stockade_core::{
    Engine, EngineError, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock,
};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_test_support::{RedisCluster, RedisSentinelGroup};

async fn connect(url: &str) -> Arc<RedisEngine> {
    let config = RedisEngineConfig::from_url(url).unwrap();
    Arc::new(
        RedisEngine::connect(&config, Arc::new(SystemClock))
            .await
            .unwrap(),
    )
}

fn spec(id: &str, stock: u32) -> SaleSpec {
    SaleSpec::builder(id, stock).unwrap().build().unwrap()
}

async fn buy(engine: &RedisEngine, sale: &str, user: &str) -> Result<PurchaseOutcome, EngineError> {
    engine
        .purchase(&Purchase::new(sale, user, 1).unwrap())
        .await
}

/// The `run_id` of the group's server on `port`.
fn run_id_on(group: &RedisSentinelGroup, port: u16) -> String {
    let info = group
        .server(port)
        .expect("a server of the group")
        .command(&["INFO", "server"])
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .expect("INFO server names the run id")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_the_primary_across_a_sentinel_failover() {
    let group = RedisSentinelGroup::start().unwrap();
    let old = group.primary_port().unwrap();
    let engine = connect(&group.url()).await;
    engine.create_sale(&spec("ha", 1_000)).await.unwrap();
    for user in ["a", "b", "c"] {
        assert!(matches!(
            buy(&engine, "ha", user).await.unwrap(),
            PurchaseOutcome::Purchased { .. }
        ));
    }
    let before = engine.server_run_id().await.unwrap();
    assert_eq!(before, run_id_on(&group, old));
    // Let the replica catch up, so the promoted one holds the sale.
    let primary = group.server(old).unwrap();
    assert!(
        primary
            .command(&["WAIT", "1", "5000"])
            .unwrap()
            .starts_with(":1")
    );

    let new = tokio::task::block_in_place(|| group.failover().unwrap());

    // Purchases fail transiently (503 in the service) until the engine
    // switches to the new primary, then succeed there.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        n += 1;
        match buy(&engine, "ha", &format!("after{n}")).await {
            Ok(PurchaseOutcome::Purchased { .. }) => break,
            Ok(other) => panic!("a purchase after the failover: {other:?}"),
            Err(error) => assert!(
                error.is_retryable(),
                "a failover must only cause retryable errors: {error}"
            ),
        }
        assert!(
            Instant::now() < deadline,
            "no purchase succeeded within 30 s of the failover"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = engine.server_run_id().await.unwrap();
    assert_eq!(
        after,
        run_id_on(&group, new),
        "the engine talks to the new primary, and its run id says so"
    );
    assert_ne!(after, before);
    let held = group
        .server(new)
        .unwrap()
        .command(&["HGET", "stockade:{ha}:sale", "remaining"])
        .unwrap();
    assert!(held.contains(&(1_000 - 3 - 1).to_string()), "{held}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_id_follows_a_failover_without_a_failed_request() {
    let group = RedisSentinelGroup::start().unwrap();
    let engine = connect(&group.url()).await;
    let before = engine.server_run_id().await.unwrap();
    let new = tokio::task::block_in_place(|| group.failover().unwrap());
    // The reconciler's once-a-second identity check alone finds the new
    // primary (it asks the sentinels), even with no request failing.
    let after = engine.server_run_id().await.unwrap();
    assert_ne!(after, before);
    assert_eq!(after, run_id_on(&group, new));
}

#[tokio::test]
async fn a_sentinel_url_naming_an_unknown_service_fails_clearly() {
    let group = RedisSentinelGroup::start().unwrap();
    let url = group
        .url()
        .replace("/mymaster", "/nosuch")
        .replace("redis+sentinel://", "redis+sentinel://:pw-s3cret@");
    let error = RedisEngine::connect(
        &RedisEngineConfig::from_url(&url).unwrap(),
        Arc::new(SystemClock),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("\"nosuch\""), "{error}");
    assert!(error.contains("Redis Sentinel at 127.0.0.1:"), "{error}");
    assert!(!error.contains("s3cret"), "{error}");
}

/// A sale id whose keys live on the primary listening on `port`.
fn sale_on(cluster: &RedisCluster, port: u16, base: &str) -> String {
    (0..1_000)
        .map(|n| format!("{base}{n}"))
        .find(|sale| {
            cluster
                .owner_of(cluster.slot_of(&format!("{{{sale}}}")).unwrap())
                .unwrap()
                == port
        })
        .expect("one of 1,000 ids hashes to each primary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sells_on_every_primary_of_a_cluster_and_through_a_slot_migration() {
    let cluster = RedisCluster::start().unwrap();
    let engine = connect(&cluster.url()).await;
    // One sale on each primary, each sold out exactly.
    let ports = cluster.ports();
    let sales: Vec<String> = ports
        .iter()
        .map(|p| sale_on(&cluster, *p, "spread"))
        .collect();
    for sale in &sales {
        engine.create_sale(&spec(sale, 20)).await.unwrap();
        let mut purchased = 0;
        for user in 0..25 {
            if let PurchaseOutcome::Purchased { .. } =
                buy(&engine, sale, &format!("u{user}")).await.unwrap()
            {
                purchased += 1;
            }
        }
        assert_eq!(purchased, 20, "sale {sale}");
    }
    let owners: Vec<u16> = sales
        .iter()
        .map(|s| {
            cluster
                .owner_of(cluster.slot_of(&format!("{{{s}}}")).unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(owners, ports, "one sale per primary");

    // The data set's identity names every primary, and a slot migration
    // does not change it (no rebuild is needed: the keys move intact).
    let identity = engine.server_run_id().await.unwrap();
    for port in &ports {
        assert!(identity.contains(&format!(":{port}=")), "{identity}");
    }

    // A sale whose slot moves, key by key, while buyers run.
    let sale = sale_on(&cluster, ports[0], "moving");
    engine.create_sale(&spec(&sale, 100_000)).await.unwrap();
    let buyers_done = Arc::new(AtomicBool::new(false));
    let buyers: Vec<_> = (0..4)
        .map(|worker| {
            let (engine, sale, done) =
                (Arc::clone(&engine), sale.clone(), Arc::clone(&buyers_done));
            tokio::spawn(async move {
                let (mut purchased, mut retried) = (0u32, 0u32);
                let mut n = 0;
                while !done.load(Ordering::Relaxed) {
                    n += 1;
                    match buy(&engine, &sale, &format!("w{worker}-{n}")).await {
                        Ok(PurchaseOutcome::Purchased { .. }) => purchased += 1,
                        Ok(PurchaseOutcome::SoldOut) => break,
                        Ok(other) => panic!("unexpected outcome {other:?}"),
                        Err(error) => {
                            assert!(
                                error.is_retryable(),
                                "a slot migration must only cause retryable errors: {error}"
                            );
                            retried += 1;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (purchased, retried)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let slot = cluster.slot_of(&format!("{{{sale}}}")).unwrap();
    let moved = tokio::task::block_in_place(|| {
        cluster
            .migrate_slot(slot, ports[1], Duration::from_millis(200))
            .unwrap()
    });
    assert!(moved >= 3, "the sale's keys moved ({moved})");
    assert_eq!(cluster.owner_of(slot).unwrap(), ports[1]);
    assert_eq!(engine.server_run_id().await.unwrap(), identity);
    // Let the buyers go on on the new owner for a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    buyers_done.store(true, Ordering::Relaxed);
    let (mut purchased, mut retried) = (0, 0);
    for buyer in buyers {
        let (bought, refused) = buyer.await.unwrap();
        purchased += bought;
        retried += refused;
    }
    assert!(retried > 0, "the buyers met the slot half-migrated");
    let snapshot = engine
        .snapshot(&SaleId::new(&sale).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        snapshot.remaining,
        100_000 - purchased,
        "every purchase and nothing else took stock"
    );
    assert!(purchased > 0);
}
