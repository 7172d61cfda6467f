//! The fences of a draw (issue 35), each made deterministic with a manual
//! instance clock, the store's clock moved by hand and store calls made
//! directly: entries close on the store's clock and never join a frozen
//! set; a key that names a void order lapses its entry instead of stopping
//! the draw; a runner whose lease ran out on the store's clock stops
//! before its first purchase.

use crate::common;

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use serde_json::{Value, json};
use stockade_core::draw::{EntryResult, Seed, draw_order, entry_digest};
use stockade_core::{
    Clock, Epoch, IdempotencyKey, Item, ManualClock, Order, OrderId, OrderStatus, SaleId,
};
use stockade_server::draws::{LEASE, draw, roll_down, run_due};
use stockade_store::arbiter::Verdict;
use stockade_store::draws::{DrawRecord, EntryUpdate};

/// A SQLite store and a PostgreSQL one.
const SETUPS: [Setup; 2] = [Setup::Embedded, Setup::Postgres];
const STOCK: usize = 5;

async fn server(setup: Setup, clock: &ManualClock) -> TestServer {
    TestServer::start_with_clock(setup, Timing::default(), Arc::new(clock.clone())).await
}

/// A draw sale of `STOCK` items, entries open from `now - 1 s` to
/// `now + close_in` seconds, and `buyers` entries.
async fn entered(server: &TestServer, id: &str, now: DateTime<Utc>, close_in: i64, buyers: usize) {
    let (status, sale) = server
        .create_sale(json!({
            "id": id, "stock": STOCK, "hold_seconds": 60, "allocation": "draw",
            "entries_open_at": now - TimeDelta::seconds(1),
            "entries_close_at": now + TimeDelta::seconds(close_in),
        }))
        .await;
    assert_eq!(status, 201, "{sale}");
    for b in 0..buyers {
        let (status, entry) = server.enter(id, json!({"user_id": format!("b{b}")})).await;
        assert_eq!(status, 201, "{entry}");
    }
}

/// The draw once made: this instance's draw job (every 500 ms) and calls
/// of `run_due` race for its lease; either makes it.
async fn drawn(server: &TestServer, sale: &SaleId) -> Option<DrawRecord> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        run_due(server.state()).await.unwrap();
        let record = server.state().store().draw(sale).await.unwrap().unwrap();
        if record.drawn_at.is_some() {
            return Some(record);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn ids_of(draw: &Value) -> Vec<String> {
    draw["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entry_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_entry_after_the_close_on_the_stores_clock_never_joins_the_draw() {
    for setup in SETUPS {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        entered(&server, "late", opened, 10, 6).await;
        let sale = SaleId::new("late").unwrap();
        let ids: Vec<String> = server
            .state()
            .store()
            .entries(&sale)
            .await
            .unwrap()
            .iter()
            .map(|e| e.id.to_string())
            .collect();
        // Entries close on the store's clock; the draw is made.
        server
            .move_to(&clock, opened + TimeDelta::seconds(10))
            .await;
        assert!(
            drawn(&server, &sale).await.is_some(),
            "{setup:?}: never drawn"
        );
        // An instance whose clock is 2 s behind still thinks entries are
        // open: the store refuses the entry all the same.
        clock.set(opened + TimeDelta::seconds(8));
        let (status, late) = server.enter("late", json!({"user_id": "slow"})).await;
        assert_eq!(status, 409, "{setup:?}: the late entry: {late}");
        assert_eq!(late["error"]["code"], "entries_closed", "{late}");
        // The published order is exactly the frozen set, and recomputes.
        let (_, published) = server.get("/v1/sales/late/draw").await;
        assert_eq!(published["state"], "drawn", "{published}");
        assert_eq!(published["entry_count"], 6, "{published}");
        assert_eq!(published["entry_digest"], entry_digest(&ids), "{published}");
        let seed = Seed::from_hex(published["seed"].as_str().unwrap()).unwrap();
        assert_eq!(ids_of(&published), draw_order(&seed, &ids).unwrap());
        let results: Vec<&str> = published["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["result"].as_str().unwrap())
            .collect();
        assert_eq!(
            results,
            ["won", "won", "won", "won", "won", "waitlisted"],
            "{published}"
        );
        // A page at a time: one indexed read each, never the whole set.
        let (_, first) = server.get("/v1/sales/late/draw?limit=4").await;
        assert_eq!(ids_of(&first), ids_of(&published)[..4], "{first}");
        assert_eq!(first["next_after"], 3, "{first}");
        let (_, rest) = server.get("/v1/sales/late/draw?limit=4&after=3").await;
        assert_eq!(ids_of(&rest), ids_of(&published)[4..], "{rest}");
        assert!(rest["next_after"].is_null(), "{rest}");
        for bad in ["limit=0", "limit=10001", "after=x"] {
            let (status, answer) = server.get(&format!("/v1/sales/late/draw?{bad}")).await;
            assert_eq!(status, 422, "{bad}: {answer}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draw_purchase_the_store_voided_lapses_and_the_draw_goes_on() {
    for setup in SETUPS {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        entered(&server, "voided", opened, 10, 3).await;
        let sale = SaleId::new("voided").unwrap();
        let store = server.state().store();
        let victim = store.entries(&sale).await.unwrap().remove(0);
        // An earlier run's purchase for the entry, refused by the store
        // (more than the stock): its key names a void order.
        let items: Vec<Item> = victim
            .items
            .iter()
            .map(|item| Item {
                sku: item.sku.clone(),
                quantity: 1_000,
            })
            .collect();
        let void = Order {
            id: OrderId::generate(),
            sale_id: sale.clone(),
            user_id: victim.user_id.clone(),
            quantity: items.iter().map(|i| i.quantity).sum(),
            items,
            tier: None,
            idempotency_key: Some(IdempotencyKey::new(format!("draw-{}", victim.id)).unwrap()),
            status: OrderStatus::Confirmed,
            created_at: clock.now(),
            expires_at: None,
            epoch: Epoch::FIRST,
        };
        let verdicts = store.commit(&[void]).await.unwrap();
        assert!(matches!(verdicts[..], [Verdict::Void(_)]), "{verdicts:?}");
        server
            .move_to(&clock, opened + TimeDelta::seconds(10))
            .await;
        let record = drawn(&server, &sale).await;
        assert!(
            record.is_some_and(|r| r.published_seed().is_some()),
            "{setup:?}: the draw stopped on the void order: {:?}",
            store.draw(&sale).await
        );
        for entry in store.entries(&sale).await.unwrap() {
            let want = if entry.id == victim.id { "lost" } else { "won" };
            assert_eq!(entry.result.as_str(), want, "{entry:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runner_whose_lease_ran_out_on_the_stores_clock_buys_nothing() {
    for setup in SETUPS {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        entered(&server, "fenced", opened, 15, 8).await;
        let sale = SaleId::new("fenced").unwrap();
        let store = server.state().store();
        // a takes the lease before the close (nobody else runs a draw
        // that is not due). The store's clock passes a's lease while a's
        // own clock stands still; b takes the lease over, and holds it
        // past the close.
        assert!(store.claim_draw(&sale, "a", LEASE).await.unwrap());
        store.shift_clock(LEASE + TimeDelta::milliseconds(1));
        assert!(store.claim_draw(&sale, "b", LEASE).await.unwrap());
        server.move_store_to(opened + TimeDelta::seconds(15)).await;
        let stopped = draw(server.state(), &sale, "a").await;
        assert!(stopped.is_err(), "{setup:?}: a ran without its lease");
        let (_, view) = server.get("/v1/sales/fenced").await;
        assert_eq!(
            view["sold"], 0,
            "{setup:?}: a bought without its lease: {view}"
        );
        assert!(store.draw(&sale).await.unwrap().unwrap().drawn_at.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_entry_that_could_never_win_is_refused_with_the_reason() {
    let clock = ManualClock::new(Utc::now());
    let server = server(Setup::Embedded, &clock).await;
    let now = clock.now();
    let (status, sale) = server
        .create_sale(json!({
            "id": "never", "skus": [{"id": "a", "stock": 2}, {"id": "b", "stock": 5}],
            "per_user_limit": 10, "per_sku_limit": 4, "allocation": "draw",
            "entries_open_at": now - TimeDelta::seconds(1),
            "entries_close_at": now + TimeDelta::seconds(10),
        }))
        .await;
    assert_eq!(status, 201, "{sale}");
    for (sku, quantity, code) in [("a", 3, "insufficient_stock"), ("b", 5, "limit_exceeded")] {
        let response = server
            .client
            .post(server.at("/v1/sales/never/entries"))
            .json(&json!({"user_id": "u", "sku": sku, "quantity": quantity}))
            .send()
            .await
            .unwrap();
        let (status, answer) = common::split(response).await;
        assert_eq!(status, 409, "{sku} x{quantity}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["error"]["sku"], sku, "{answer}");
    }
    // Nothing was entered.
    let (_, draw) = server.get("/v1/sales/never/draw").await;
    assert_eq!(draw["entry_count"], 0, "{draw}");
}

/// Runs one roll-down pass of `sale` as `owner`, once this instance's own
/// draw job lets the lease go.
async fn roll_down_once(server: &TestServer, sale: &SaleId, owner: &str) {
    let store = server.state().store();
    while !store.claim_draw(sale, owner, LEASE).await.unwrap() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    roll_down(server.state(), sale, owner).await.unwrap();
    store.release_draw(sale, owner).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_on_its_way_to_the_engine_keeps_the_draw_from_settling() {
    let clock = ManualClock::new(Utc::now());
    let server = server(Setup::Embedded, &clock).await;
    let opened = clock.now();
    entered(&server, "owed", opened, 10, STOCK + 1).await;
    let sale = SaleId::new("owed").unwrap();
    let store = server.state().store();
    server
        .move_to(&clock, opened + TimeDelta::seconds(10))
        .await;
    assert!(drawn(&server, &sale).await.is_some(), "never drawn");
    let entries = store.entries(&sale).await.unwrap();
    let orders: Vec<OrderId> = entries[..STOCK]
        .iter()
        .map(|e| e.order_id.unwrap())
        .collect();
    for order in &orders[..STOCK - 1] {
        assert_eq!(server.confirm(order).await.0, 200);
    }
    // The last winner's hold expires in the store (called directly: the
    // instance's clock stays, so its own sweeper leaves it alone); the
    // release has not reached the engine when the roll-down pass runs.
    let expired = store
        .expire_holds(
            &sale,
            &orders[STOCK - 1..],
            opened + TimeDelta::seconds(75),
            true,
        )
        .await
        .unwrap();
    assert_eq!(expired.orders.len(), 1);
    roll_down_once(&server, &sale, "test").await;
    let waiting = store
        .entry_of(&sale, &entries[STOCK].user_id)
        .await
        .unwrap();
    let record = store.draw(&sale).await.unwrap().unwrap();
    assert!(
        record.settled_at.is_none(),
        "settled with a release owed to the engine: {waiting:?}"
    );
    // Once the release reaches the engine, the stock rolls down.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let waiting = store
            .entry_of(&sale, &entries[STOCK].user_id)
            .await
            .unwrap()
            .unwrap();
        if waiting.result.as_str() == "won" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no roll-down: {waiting:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_winner_whose_order_was_voided_lapses_and_the_draw_settles() {
    let clock = ManualClock::new(Utc::now());
    let server = server(Setup::Embedded, &clock).await;
    let opened = clock.now();
    entered(&server, "lapsed", opened, 10, 2).await;
    let sale = SaleId::new("lapsed").unwrap();
    let store = server.state().store();
    server
        .move_to(&clock, opened + TimeDelta::seconds(10))
        .await;
    assert!(drawn(&server, &sale).await.is_some(), "never drawn");
    let entries = store.entries(&sale).await.unwrap();
    assert!(entries.iter().all(|e| e.result.as_str() == "won"));
    let paid = entries[0].order_id.unwrap();
    assert_eq!(server.confirm(paid).await.0, 200);
    // The other winner names an order the store voided (as a draw
    // purchase answered pending, then refused by the store).
    let void = Order {
        id: OrderId::generate(),
        sale_id: sale.clone(),
        user_id: entries[1].user_id.clone(),
        quantity: 1_000,
        items: vec![Item {
            sku: entries[1].items[0].sku.clone(),
            quantity: 1_000,
        }],
        tier: None,
        idempotency_key: None,
        status: OrderStatus::Confirmed,
        created_at: clock.now(),
        expires_at: None,
        epoch: Epoch::FIRST,
    };
    let void_id = void.id;
    assert!(matches!(
        store.commit(&[void]).await.unwrap()[..],
        [Verdict::Void(_)]
    ));
    while !store.claim_draw(&sale, "test", LEASE).await.unwrap() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let named = EntryUpdate {
        id: entries[1].id.clone(),
        result: EntryResult::Won,
        order_id: Some(void_id),
    };
    assert!(
        store
            .record_draw(&sale, "test", false, &[named], false)
            .await
            .unwrap()
    );
    roll_down(server.state(), &sale, "test").await.unwrap();
    store.release_draw(&sale, "test").await.unwrap();
    let lapsed = store
        .entry_of(&sale, &entries[1].user_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lapsed.result.as_str(), "lost", "{lapsed:?}");
    let record = store.draw(&sale).await.unwrap().unwrap();
    assert!(record.settled_at.is_some(), "never settled: {record:?}");
}
