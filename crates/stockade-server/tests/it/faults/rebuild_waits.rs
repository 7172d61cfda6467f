//! A rebuild (Redis restarted, failed over, or out of line) advances the
//! sale's epoch, after which the store voids every order decided under the
//! old one. Orders a live instance has named to buyers (202 `pending`, 503
//! with an `order_id`) and not committed yet must not be voided by it: the
//! rebuild waits until every live instance's writer has none of the sale's
//! orders left, its own and the others' (their once-a-second reports).

use std::time::{Duration, Instant};

use crate::faults::helpers::{named_uncommitted, until_not_503};
use crate::instances::{Backends, Instance};
use serde_json::json;
use sqlx::Connection;

/// How long a buyer retries a 503 (the sale rebuilding).
const PATIENCE: Duration = Duration::from_secs(30);

/// Makes every insert into `orders` fail (or stops doing so): the writers'
/// commits fail as if the store were unreachable, while everything else in
/// the store works, so a rebuild can advance the epoch meanwhile.
async fn refuse_order_inserts(database_url: &str, refuse: bool) {
    let mut conn = sqlx::PgConnection::connect(database_url).await.unwrap();
    let statements: &[&str] = if refuse {
        &[
            "CREATE OR REPLACE FUNCTION test_refuse_orders() RETURNS trigger
               LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
            "CREATE TRIGGER test_refuse_orders BEFORE INSERT ON orders
               FOR EACH ROW EXECUTE FUNCTION test_refuse_orders()",
        ]
    } else {
        &["DROP TRIGGER test_refuse_orders ON orders"]
    };
    for statement in statements {
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
}

/// Instance A names orders whose commits fail; Redis then restarts empty,
/// so both instances' reconcilers rebuild the sale (whichever takes the
/// rebuild lock). Once the store takes orders again, every order A named
/// commits: the rebuild waited for A's writer instead of advancing the
/// epoch under it. Before the wait, the rebuild advanced within a second
/// of the restart and the store voided all of them (`stale_epoch`). Two
/// rounds, so either instance may be the one rebuilding.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_waits_for_the_orders_live_instances_have_named() {
    let mut backends = Backends::start(false).await;
    let short_deadline = |c: &mut stockade_server::config::RawConfig| {
        c.purchases.commit_deadline_ms = Some(300);
        // Far longer than the test: no reconciler commits the orders from
        // an outbox (Redis's restart empties it anyway).
        c.purchases.outbox_grace_ms = Some(120_000);
    };
    let a = Instance::start(&backends, short_deadline).await;
    let b = Instance::start(&backends, short_deadline).await;
    let database_url = backends.database_url.clone();
    for round in 1..=2 {
        let sale = format!("named-then-rebuilt-{round}");
        let (status, body) = a.create_sale(json!({"id": sale, "stock": 50})).await;
        assert_eq!(status, 201, "{body}");
        for (instance, buyer) in [(&a, "warm-a"), (&b, "warm-b")] {
            let (status, body) = until_not_503(PATIENCE, async || {
                instance.buy(&sale, buyer, Some(buyer)).await
            })
            .await;
            assert_eq!(status, 201, "round {round}: {body}");
        }

        refuse_order_inserts(&database_url, true).await;
        let mut named = Vec::new();
        for i in 0..5 {
            let (user, key) = (format!("b{i}"), format!("k{round}-{i}"));
            let (status, body) = a.buy(&sale, &user, Some(&key)).await;
            let id = named_uncommitted(status, &body, &format!("round {round}"));
            named.push((user, key, id));
        }

        // Redis loses everything: the reconcilers see the new run id within
        // a second and rebuild; the old code had advanced the epoch well
        // within this pause.
        backends.redis.restart().unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        refuse_order_inserts(&database_url, false).await;

        for (_, _, id) in &named {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (status, body) = a.get(&format!("/v1/orders/{id}")).await;
                if status == 200 && body["status"] == "confirmed" {
                    break;
                }
                assert!(
                    status == 200 && body["status"] == "pending"
                        || status == 404 && body["error"]["code"] == "unknown_order",
                    "round {round}: order {id}, named to its buyer, is {status} {body}"
                );
                assert!(
                    Instant::now() < deadline,
                    "round {round}: order {id} is still not committed: {status} {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // A keyed replay names the same order, on either instance, once the
        // sale sells again; nothing else was sold.
        for (index, (user, key, id)) in named.iter().enumerate() {
            let instance = if index % 2 == 0 { &a } else { &b };
            let (status, body) = until_not_503(PATIENCE, async || {
                instance.buy(&sale, user, Some(key)).await
            })
            .await;
            assert_eq!(
                (status, body["order_id"].as_str()),
                (200, Some(id.as_str())),
                "round {round}: the replay of {key} named another order: {body}"
            );
        }
        let orders = a.orders(&sale).await;
        let confirmed = orders.iter().filter(|o| o["status"] == "confirmed").count();
        assert_eq!(confirmed, 2 + named.len(), "round {round}: {orders:?}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, snapshot) = b.get(&format!("/v1/sales/{sale}")).await;
            if status == 200 && snapshot["remaining"] == 50 - confirmed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the engine never came back in line: {status} {snapshot}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Without a rebuild lock (Sentinel, Cluster), instances rebuild a sale
/// side by side. One that finds the epoch advanced since it saw the
/// trouble, while the engine is still being rebuilt under the new epoch by
/// another instance, waits for that rebuild instead of closing the engine
/// under it and rebuilding again: before, each late close started another
/// rebuild (and another wait for the writers), and a Sentinel failover
/// kept a sale at 503 `rebuilding` for 6 to 9 s instead of about 1.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_already_under_way_elsewhere_is_waited_for_not_redone() {
    use stockade_core::SaleId;
    use stockade_server::recovery::{Rebuild, rebuild_sale};
    use stockade_store::authority::{Advance, Authority};

    let backends = Backends::start(false).await;
    let a = Instance::start(&backends, |_| {}).await;
    let (status, body) = a
        .create_sale(json!({"id": "side-by-side", "stock": 10}))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = a.buy("side-by-side", "early", Some("early")).await;
    assert_eq!(status, 201, "{body}");
    let sale = SaleId::new("side-by-side").unwrap();
    let (store, engine) = (a.state.store().clone(), a.state.engine().clone());
    let seen = store.sale_state(&sale).await.unwrap().unwrap().epoch;

    // "Another instance" has advanced the epoch and is rebuilding: the
    // engine gets the new epoch 1.5 s later.
    let Advance::Advanced(next) = store
        .advance_epoch(&sale, seen, Authority::Primary)
        .await
        .unwrap()
    else {
        panic!("the epoch did not advance");
    };
    let other = tokio::spawn({
        let (store, engine, sale) = (store.clone(), engine.clone(), sale.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let spec = store.sale_state(&sale).await.unwrap().unwrap().spec;
            let orders = store.all_orders(&sale).await.unwrap();
            engine.rebuild(&spec, next, &orders).await
        }
    });

    // This instance saw the trouble under the old epoch.
    let rebuilt = rebuild_sale(&a.state, &sale, seen, "test").await.unwrap();
    other
        .await
        .unwrap()
        .expect("the other instance's rebuild was undone");
    assert_eq!(rebuilt, Rebuild::InLine);
    assert_eq!(store.sale_state(&sale).await.unwrap().unwrap().epoch, next);
    assert_eq!(engine.epoch(&sale).await.unwrap(), Some(next));
    let (status, body) = a.buy("side-by-side", "later", Some("later")).await;
    assert_eq!(status, 201, "{body}");
}
