//! How the Redis engine's scripts run: as one versioned Functions library
//! on Redis 7 (FCALL), reloaded after `FUNCTION FLUSH`, side by side with
//! another version's library; with EVALSHA when forced, on a server
//! without Functions (Redis 7 with them renamed away), on a real Redis 6,
//! and from the moment a Redis 6 takes the server's place. Each test starts
//! its own throwaway servers.

mod functions_support;

use std::sync::Arc;
use std::time::Duration;

use functions_support::{buy, calls, connect, has_library, spec};
use stockade_core::{Engine, OrderId, PurchaseOutcome, SaleId, SystemClock, UserId};
use stockade_engine::redis::Library;
use stockade_engine::{RedisEngine, RedisEngineConfig, ScriptsMode};
use stockade_test_support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_7_the_scripts_run_as_one_versioned_functions_library() {
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    assert!(engine.connection().scripts().functions());
    engine.create_sale(&spec("f", 10)).await.unwrap();
    for user in ["a", "b", "c"] {
        assert!(matches!(
            buy(&engine, "f", user).await.unwrap(),
            PurchaseOutcome::Purchased { .. }
        ));
    }
    let name = RedisEngine::library().name();
    let version = name.strip_prefix("stockade_engine_").unwrap();
    assert_eq!(version.len(), 12, "{name}");
    assert!(version.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    let listed = redis.command(&["FUNCTION", "LIST"]).unwrap();
    assert!(has_library(&redis, name), "{listed}");
    for script in ["create_sale", "purchase", "release_many", "close", "retire"] {
        let function = format!("{name}_{script}");
        assert!(listed.contains(&function), "{function} in {listed}");
    }
    assert!(calls(&redis, "fcall") >= 4, "create_sale and 3 purchases");
    assert_eq!(calls(&redis, "evalsha"), 0);
    assert_eq!(calls(&redis, "eval"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_library_versions_run_side_by_side_on_one_redis() {
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    engine.create_sale(&spec("side", 10)).await.unwrap();
    buy(&engine, "side", "old-1").await.unwrap();
    // The next release's purchase script: another source, another version.
    let next_source = [
        include_str!("../lua/purchase.lua"),
        "\n-- the next release\n",
    ]
    .concat();
    let next = Library::new("stockade_engine", &[("purchase", &next_source)]);
    let current = RedisEngine::library();
    assert_ne!(next.name(), current.name());
    let mut connection = engine.connection();
    next.load(&mut connection).await.unwrap();
    assert!(has_library(&redis, current.name()));
    assert!(has_library(&redis, next.name()));

    // The next version buys from the same sale through its own function.
    let sale = SaleId::new("side").unwrap();
    let epoch = engine.epoch(&sale).await.unwrap().unwrap();
    let order = OrderId::generate();
    let purchase = next.script("purchase");
    let mut invocation = purchase.prepare_invoke();
    for key in engine.keys(&sale).all() {
        invocation.key(key);
    }
    invocation
        .arg(chrono::Utc::now().timestamp_millis())
        .arg(1)
        .arg(epoch.get())
        .arg("new-1")
        .arg(1)
        .arg("")
        .arg(order.to_string());
    let reply: Vec<redis::Value> = invocation.invoke_async(&mut connection).await.unwrap();
    assert_eq!(reply.len(), 3, "{reply:?}");
    // And the current version goes on beside it.
    buy(&engine, "side", "old-2").await.unwrap();
    let snapshot = engine.snapshot(&sale).await.unwrap().unwrap();
    assert_eq!(snapshot.remaining, 7, "three purchases, one by each call");
    let buyer = UserId::new("new-1").unwrap();
    assert_eq!(engine.purchased_by(&sale, &buyer).await.unwrap(), 1);
    assert_eq!(calls(&redis, "evalsha"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_function_flush_between_purchases_is_reloaded_and_nothing_counts_twice() {
    const STOCK: u32 = 400;
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    engine.create_sale(&spec("flush", STOCK)).await.unwrap();
    let buyers: Vec<_> = (0..4)
        .map(|worker| {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                let mut bought = 0;
                for n in 0..STOCK / 4 {
                    match buy(&engine, "flush", &format!("w{worker}-{n}")).await {
                        Ok(PurchaseOutcome::Purchased { .. }) => bought += 1,
                        other => panic!("a purchase during FUNCTION FLUSH: {other:?}"),
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                bought
            })
        })
        .collect();
    let mut flushes = 0;
    while !buyers.iter().all(|b| b.is_finished()) && flushes < 8 {
        tokio::time::sleep(Duration::from_millis(15)).await;
        let reply = tokio::task::block_in_place(|| redis.command(&["FUNCTION", "FLUSH"]));
        assert!(reply.unwrap().starts_with("+OK"));
        flushes += 1;
    }
    let mut bought = 0;
    for buyer in buyers {
        bought += buyer.await.unwrap();
    }
    assert_eq!(bought, STOCK);
    assert!(flushes >= 2, "the library was flushed while buyers ran");
    let sale = SaleId::new("flush").unwrap();
    let snapshot = engine.snapshot(&sale).await.unwrap().unwrap();
    assert_eq!(snapshot.remaining, 0);
    let orders = engine.outbox(&sale).await.unwrap();
    assert_eq!(orders.len(), STOCK as usize, "one order per purchase");
    assert!(
        calls(&redis, "function|load") >= 2,
        "loaded at the first call and again after a flush"
    );
    assert!(has_library(&redis, RedisEngine::library().name()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_forced_runs_every_script_with_evalsha_and_loads_no_library() {
    let redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url(), ScriptsMode::Eval).await;
    assert!(!engine.connection().scripts().functions());
    engine.create_sale(&spec("e", 5)).await.unwrap();
    buy(&engine, "e", "a").await.unwrap();
    // EVALSHA reloads after SCRIPT FLUSH, as it always did.
    assert!(
        redis
            .command(&["SCRIPT", "FLUSH"])
            .unwrap()
            .starts_with("+OK")
    );
    buy(&engine, "e", "b").await.unwrap();
    assert!(calls(&redis, "evalsha") >= 3);
    assert_eq!(calls(&redis, "fcall"), 0);
    assert!(!has_library(&redis, "stockade_engine"));
}

/// Redis 7 with its Functions renamed away answers as Redis 6 does:
/// `ERR unknown command 'FUNCTION'`.
fn server_without_functions() -> RedisServer {
    RedisServer::start_with(&[
        "--rename-command",
        "FUNCTION",
        "",
        "--rename-command",
        "FCALL",
        "",
    ])
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_functions_is_detected_and_gets_evalsha() {
    let redis = server_without_functions();
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    assert!(!engine.connection().scripts().functions());
    engine.create_sale(&spec("old", 5)).await.unwrap();
    assert!(matches!(
        buy(&engine, "old", "a").await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 4, .. }
    ));
    assert!(calls(&redis, "evalsha") >= 2);

    let forced = functions_refused(&redis).await;
    assert!(forced.contains("--redis-scripts functions"), "{forced}");
    assert!(forced.contains("Redis 7"), "{forced}");
}

/// The error of connecting to `redis` with Functions forced.
async fn functions_refused(redis: &RedisServer) -> String {
    RedisEngine::connect(
        &RedisEngineConfig::new(redis.url()).scripts(ScriptsMode::Functions),
        Arc::new(SystemClock),
    )
    .await
    .unwrap_err()
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_redis_6_the_scripts_run_with_evalsha() {
    let redis = RedisServer::start_redis6().unwrap();
    let info = redis.command(&["INFO", "server"]).unwrap();
    assert!(info.contains("redis_version:6."), "{info}");
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    assert!(!engine.connection().scripts().functions());
    engine.create_sale(&spec("six", 3)).await.unwrap();
    for (user, left) in [("a", 2), ("b", 1), ("c", 0)] {
        match buy(&engine, "six", user).await.unwrap() {
            PurchaseOutcome::Purchased { remaining, .. } => assert_eq!(remaining, left),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        buy(&engine, "six", "d").await.unwrap(),
        PurchaseOutcome::SoldOut
    ));
    let sale = SaleId::new("six").unwrap();
    let orders = engine.outbox(&sale).await.unwrap();
    let released = engine.release(&sale, orders[0].id, orders[0].epoch).await;
    assert!(released.is_ok(), "{released:?}");
    assert!(calls(&redis, "evalsha") >= 5);

    let forced = functions_refused(&redis).await;
    assert!(forced.contains("--redis-scripts"), "{forced}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_replaced_by_redis_6_turns_the_connection_to_evalsha() {
    let mut redis = RedisServer::start().unwrap();
    let engine = connect(&redis.url(), ScriptsMode::Auto).await;
    let forced = connect(&redis.url(), ScriptsMode::Functions).await;
    engine.create_sale(&spec("down", 5)).await.unwrap();
    assert!(engine.connection().scripts().functions());

    tokio::task::block_in_place(|| redis.replace_with_redis6().unwrap());
    // The server came back empty: the sale is created again, once the
    // connection is back, and FCALL's `unknown command` turns it to EVALSHA.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let created = loop {
        match engine.create_sale(&spec("down", 5)).await {
            Ok(outcome) => break outcome,
            Err(error) => assert!(error.is_retryable(), "{error}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis 6 never answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(created, stockade_core::CreateOutcome::Created);
    assert!(!engine.connection().scripts().functions());
    assert!(matches!(
        buy(&engine, "down", "a").await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 4, .. }
    ));
    assert!(calls(&redis, "evalsha") >= 2);
    // Functions forced: the error is the caller's to see, nothing falls back.
    let refused = loop {
        match buy(&forced, "down", "b").await {
            Err(error) if error.is_retryable() => {}
            other => break other,
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis 6 never answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let refused = refused.unwrap_err().to_string();
    assert!(refused.contains("unknown command"), "{refused}");
    assert!(forced.connection().scripts().functions());
}
