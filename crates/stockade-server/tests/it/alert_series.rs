//! The series behind the alert rules move when their fault happens (issue
//! 12, item 2): the outbox's oldest entry ages past the grace period while
//! PostgreSQL is down (and goes back to zero once it returns), and the
//! engine offering more than the store has left shows as drift and a
//! rebuild. Real Redis and PostgreSQL.

use crate::common;
use crate::scrape;

use std::time::{Duration, Instant};

use common::{Setup, TestServer, Timing};
use scrape::{Scrape, scrape};
use serde_json::json;

/// Polls `/metrics` until `check` holds; panics with `what` after 60 s.
async fn wait_for(server: &TestServer, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let scrape = scrape(server).await;
        if check(&scrape) {
            return scrape;
        }
        assert!(Instant::now() < deadline, "{what}:\n{}", scrape.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_oldest_outbox_entry_ages_past_the_grace_while_the_store_is_down() {
    let timing = Timing {
        commit_deadline_ms: 500,
        outbox_grace_ms: 2_000,
    };
    let mut server = TestServer::start_with(Setup::RedisPostgres, timing).await;
    let mut postgres = server.postgres.take().unwrap();
    let (status, _) = server.create_sale(json!({"id": "kept", "stock": 50})).await;
    assert_eq!(status, 201);
    assert_eq!(server.buy("kept", "first", 1, None).await.0, 201);
    let oldest = |s: &Scrape| s.value("stockade_outbox_oldest_entry_seconds", &[]);
    let grace = scrape(&server).await;
    assert_eq!(grace.value("stockade_outbox_grace_seconds", &[]), Some(2.0));
    // Let the reconciler list the sale once before the store goes.
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    postgres.stop();
    let mut kept = 0;
    for i in 0..5 {
        let (status, body) = server.buy("kept", &format!("down-{i}"), 1, None).await;
        assert!([202, 503].contains(&status), "{status}: {body}");
        kept += 1;
    }
    assert_eq!(kept, 5);
    wait_for(
        &server,
        "the outbox entries never aged past the grace",
        |s| oldest(s).is_some_and(|age| age > 2.0),
    )
    .await;

    postgres.start_again().unwrap();
    wait_for(
        &server,
        "the outbox never emptied once the store was back",
        |s| oldest(s) == Some(0.0),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_engine_offering_more_than_the_store_shows_as_drift_and_a_rebuild() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let redis = server.redis.take().unwrap();
    let (status, _) = server.create_sale(json!({"id": "stale", "stock": 3})).await;
    assert_eq!(status, 201);
    for user in ["a", "b", "c"] {
        assert_eq!(server.buy("stale", user, 1, None).await.0, 201);
    }
    let drift_rebuilds = |s: &Scrape| {
        s.value("stockade_rebuilds_total", &[("reason", "drift")])
            .unwrap()
    };
    let before = drift_rebuilds(&scrape(&server).await);
    // Redis now holds an old copy of the stock, as a restored snapshot would.
    let reply = redis
        .command(&["HSET", "stockade:{stale}:sale", "remaining", "3"])
        .unwrap();
    assert!(reply.starts_with(':'), "{reply}");
    wait_for(&server, "the drift never showed", |s| {
        s.value("stockade_engine_store_drift_sales", &[]) == Some(1.0)
    })
    .await;
    wait_for(&server, "no rebuild for drift, or the drift stayed", |s| {
        drift_rebuilds(s) > before && s.value("stockade_engine_store_drift_sales", &[]) == Some(0.0)
    })
    .await;
}
