//! Draw sales on every engine (memory + SQLite, Redis + PostgreSQL, the
//! PostgreSQL engine), on a manual clock: entries during the window, once
//! per buyer; purchases refused; the draw made within a tick of the close,
//! published so that an outside auditor (`scripts/verify-draw`, Python's
//! standard library alone) gets the same order from the seed; winners'
//! held orders; unpaid holds rolling down to the waitlisted in the draw's
//! order; a draw an instance died in the middle of, finished by another
//! with the same orders; and the settled draw.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use serde_json::{Value, json};
use stockade_core::draw::{Seed, draw_order};
use stockade_core::{Clock, ManualClock, Purchase, SaleId};
use stockade_server::purchase::{Attempt, Purchases};
use stockade_server::waiting_room::door::AdmissionToken;
use stockade_store::draws::Freeze;

const SETUPS: [Setup; 3] = [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres];
const BUYERS: usize = 12;
const STOCK: usize = 5;

async fn server(setup: Setup, clock: &ManualClock) -> TestServer {
    TestServer::start_with_clock(setup, Timing::default(), Arc::new(clock.clone())).await
}

/// A draw sale of `STOCK` items with a minute's payment hold, entries open
/// from `now - 1 s` to `now + 10 s`.
async fn draw_sale(server: &TestServer, id: &str, now: DateTime<Utc>) -> Value {
    let (status, sale) = server
        .create_sale(json!({
            "id": id, "stock": STOCK, "hold_seconds": 60, "allocation": "draw",
            "entries_open_at": now - TimeDelta::seconds(1),
            "entries_close_at": now + TimeDelta::seconds(10),
        }))
        .await;
    assert_eq!(status, 201, "{sale}");
    sale
}

async fn my_entry(server: &TestServer, sale: &str, user: &str) -> Value {
    let (status, body) = server
        .get(&format!("/v1/sales/{sale}/entries/me?user_id={user}"))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The published draw, once its state is `want` (the instances' draw job
/// runs every 500 ms).
async fn draw_when(server: &TestServer, sale: &str, want: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, draw) = server.get(&format!("/v1/sales/{sale}/draw")).await;
        assert_eq!(status, 200, "{draw}");
        if draw["state"] == want {
            return draw;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the draw never became {want}: {draw}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What an outside auditor does: checks the seed against the commitment
/// published at creation, the entries against the published digest of the
/// drawn set, and recomputes the order with the Python script.
fn audit(seed: &str, commitment: &str, digest: &str, ids: &[String]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/verify-draw");
    let mut child = Command::new("python3")
        .args([
            script,
            "--seed",
            seed,
            "--commitment",
            commitment,
            "--digest",
            digest,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(ids.join("\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "verify-draw refused the draw");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn entry_ids(draw: &Value) -> Vec<String> {
    draw["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entry_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draw_sale_is_entered_drawn_published_and_rolled_down() {
    for setup in SETUPS {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        let sale = draw_sale(&server, "drop", opened).await;
        assert_eq!(sale["allocation"], "draw");
        let commitment = sale["draw"]["seed_commitment"].as_str().unwrap().to_owned();
        assert_eq!(commitment.len(), 64);

        // Entries: once per buyer; nobody buys.
        let mut entries = Vec::new();
        for b in 0..BUYERS {
            let (status, entry) = server
                .enter("drop", json!({"user_id": format!("b{b}")}))
                .await;
            assert_eq!(status, 201, "{setup:?}: {entry}");
            assert_eq!(entry["result"], "entered");
            entries.push(entry);
        }
        let (status, again) = server.enter("drop", json!({"user_id": "b0"})).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["entry_id"], entries[0]["entry_id"]);
        let (status, refused) = server.buy_with("drop", json!({"user_id": "b0"})).await;
        assert_eq!(status, 409, "{refused}");
        assert_eq!(refused["error"]["code"], "draw_sale");
        let (status, refused) = server
            .enter("drop", json!({"user_id": "x", "quantity": 2}))
            .await;
        assert_eq!(status, 409, "{refused}");
        assert_eq!(refused["error"]["code"], "limit_exceeded");
        let draw = draw_when(&server, "drop", "entries_open").await;
        assert!(
            draw["seed"].is_null(),
            "the seed is secret until the draw: {draw}"
        );
        assert_eq!(draw["entry_count"], BUYERS);

        // Entries close: the draw is made within a tick.
        server
            .move_to(&clock, opened + TimeDelta::seconds(10))
            .await;
        let (status, late) = server.enter("drop", json!({"user_id": "late"})).await;
        assert_eq!(status, 409, "{late}");
        assert_eq!(late["error"]["code"], "entries_closed");
        let draw = draw_when(&server, "drop", "drawn").await;
        let seed = draw["seed"].as_str().unwrap();
        assert!(Seed::from_hex(seed).unwrap().matches(&commitment));
        let order = entry_ids(&draw);
        let ids: Vec<String> = entries
            .iter()
            .map(|e| e["entry_id"].as_str().unwrap().to_owned())
            .collect();
        // Recomputed in Rust and by the auditor's script, from the
        // published data alone.
        assert_eq!(
            order,
            draw_order(&Seed::from_hex(seed).unwrap(), &ids).unwrap()
        );
        let digest = draw["entry_digest"].as_str().unwrap();
        assert_eq!(order, audit(seed, &commitment, digest, &ids));
        let results: Vec<&str> = draw["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["result"].as_str().unwrap())
            .collect();
        assert_eq!(results[..STOCK], ["won"; STOCK], "{setup:?}: {draw}");
        assert!(
            results[STOCK..].iter().all(|r| *r == "waitlisted"),
            "{draw}"
        );

        // Each winner has a held order; its buyer reads it.
        let buyer_of = |entry_id: &str| {
            entries.iter().find(|e| e["entry_id"] == entry_id).unwrap()["user_id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let winners: Vec<String> = order[..STOCK].iter().map(|id| buyer_of(id)).collect();
        let mut orders = Vec::new();
        for winner in &winners {
            let mine = my_entry(&server, "drop", winner).await;
            assert_eq!(mine["result"], "won");
            let (status, order) = server
                .get(&format!(
                    "/v1/orders/{}",
                    mine["order_id"].as_str().unwrap()
                ))
                .await;
            assert_eq!(status, 200, "{order}");
            assert_eq!(order["status"], "held");
            orders.push(order["order_id"].as_str().unwrap().to_owned());
        }
        let (_, sale) = server.get("/v1/sales/drop").await;
        assert_eq!(sale["remaining"], 0, "{sale}");

        // Three winners pay; two let their holds lapse: the next two in
        // the draw's order get orders.
        for order in &orders[..3] {
            assert_eq!(server.confirm(order).await.0, 200);
        }
        server
            .move_to(&clock, opened + TimeDelta::seconds(75))
            .await;
        stockade_server::holds::expire_due(server.state())
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let draw = draw_when(&server, "drop", "drawn").await;
            let rolled: Vec<&str> = draw["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["result"].as_str().unwrap())
                .collect();
            // A pass that read the holds before they expired may give the
            // stock to the waitlisted first and mark the lapsed winners
            // lost on the next pass.
            if rolled[STOCK..STOCK + 2] == ["won", "won"] && rolled[3..STOCK] == ["lost", "lost"] {
                assert!(rolled[STOCK + 2..].iter().all(|r| *r == "waitlisted"));
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no roll-down: {draw}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The two rolled-down winners pay: no hold is left, the draw
        // settles and the rest of the list has lost.
        for id in &order[STOCK..STOCK + 2] {
            let mine = my_entry(&server, "drop", &buyer_of(id)).await;
            assert_eq!(
                server.confirm(mine["order_id"].as_str().unwrap()).await.0,
                200
            );
        }
        let settled = draw_when(&server, "drop", "settled").await;
        let last = my_entry(&server, "drop", &buyer_of(&order[BUYERS - 1])).await;
        assert_eq!(last["result"], "lost", "{settled}");
        let (_, sale) = server.get("/v1/sales/drop").await;
        assert_eq!(sale["sold"], STOCK, "{sale}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draw_an_instance_died_in_is_finished_by_another_with_the_same_orders() {
    let clock = ManualClock::new(Utc::now());
    let server = server(Setup::RedisPostgres, &clock).await;
    let opened = clock.now();
    draw_sale(&server, "taken-over", opened).await;
    for b in 0..BUYERS {
        assert_eq!(
            server
                .enter("taken-over", json!({"user_id": format!("b{b}")}))
                .await
                .0,
            201
        );
    }
    server
        .move_to(&clock, opened + TimeDelta::seconds(10))
        .await;
    let sale = SaleId::new("taken-over").unwrap();
    let store = server.state().store();
    // A dead instance holds the lease, froze the entry set and had bought
    // for the first two entries of the order before it died.
    let lease = stockade_server::draws::LEASE;
    assert!(store.claim_draw(&sale, "dead", lease).await.unwrap());
    assert!(matches!(
        store
            .freeze_draw(&sale, "dead", server.state().draw_key())
            .await
            .unwrap(),
        Freeze::Frozen { .. }
    ));
    let record = store.draw(&sale).await.unwrap().unwrap();
    let ids: Vec<String> = store
        .entries(&sale)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    let order = draw_order(&record.seed().unwrap().unwrap(), &ids).unwrap();
    // The stored places are the draw's order.
    assert_eq!(ids, order);
    let mut early = Vec::new();
    for id in &order[..2] {
        let entry = store
            .entries(&sale)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.id.as_str() == id)
            .unwrap();
        // Buyers cannot buy, whatever they send: only the draw does.
        let (status, _) = server
            .buy_with("taken-over", json!({"user_id": entry.user_id.as_str()}))
            .await;
        assert_eq!(status, 409);
        // The dead instance's own purchase for the entry, as its draw made
        // it (keyed by the entry), before it died.
        let purchase = Purchase::new("taken-over", entry.user_id.as_str(), 1)
            .unwrap()
            .with_idempotency_key(format!("draw-{}", entry.id))
            .unwrap();
        let decision = Purchases::new(server.state())
            .decide(Attempt {
                purchase,
                respond_async: false,
                admission: AdmissionToken::Drawn,
            })
            .await
            .unwrap();
        early.push((entry, decision.order_id()));
    }
    // While the dead instance's lease lasts, nobody draws.
    stockade_server::draws::run_due(server.state())
        .await
        .unwrap();
    assert!(store.draw(&sale).await.unwrap().unwrap().drawn_at.is_none());
    // Its lease runs out: this instance makes the draw.
    server
        .move_to(&clock, clock.now() + lease + TimeDelta::milliseconds(1))
        .await;
    let draw = draw_when(&server, "taken-over", "drawn").await;
    assert_eq!(entry_ids(&draw), order);
    let winners: Vec<&Value> = draw["order"].as_array().unwrap()[..STOCK].iter().collect();
    assert!(winners.iter().all(|w| w["result"] == "won"), "{draw}");
    // Made once: running again changes nothing.
    stockade_server::draws::run_due(server.state())
        .await
        .unwrap();
    let again = draw_when(&server, "taken-over", "drawn").await;
    assert_eq!(again["order"], draw["order"]);
    let (_, sale_view) = server.get("/v1/sales/taken-over").await;
    assert_eq!(sale_view["sold"], STOCK, "{sale_view}");
    // The orders the dead instance made are the winners' orders: no
    // second order for them, and the stock sold exactly once.
    for (entry, order_id) in early {
        let mine = my_entry(&server, "taken-over", entry.user_id.as_str()).await;
        assert_eq!(mine["result"], "won", "{mine}");
        assert_eq!(mine["order_id"], order_id.to_string(), "{mine}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn draw_settings_that_cannot_work_are_refused_at_creation() {
    let clock = ManualClock::new(Utc::now());
    let server = server(Setup::Embedded, &clock).await;
    let now = clock.now();
    for (body, field) in [
        (
            json!({"id": "d", "stock": 5, "allocation": "draw"}),
            "entries_close_at",
        ),
        (
            json!({"id": "d", "stock": 5, "entries_open_at": now}),
            "entries_open_at",
        ),
        (
            json!({"id": "d", "stock": 5, "allocation": "draw", "entries_open_at": now, "entries_close_at": now}),
            "entries_close_at",
        ),
        (
            json!({"id": "d", "stock": 5, "allocation": "draw", "entries_open_at": now,
                   "entries_close_at": now + TimeDelta::seconds(5), "ends_at": now + TimeDelta::seconds(5)}),
            "entries_close_at",
        ),
        (
            json!({"id": "d", "stock": 5, "allocation": "draw", "entries_open_at": now,
                   "entries_close_at": now + TimeDelta::seconds(5),
                   "waiting_room": {"admit_per_second": 5, "admission_ttl_seconds": 60}}),
            "waiting_room",
        ),
    ] {
        let (status, answer) = server.create_sale(body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{body}: {answer}");
    }
    assert_eq!(server.get("/v1/sales/d").await.0, 404);
    // A race sale has no draw and takes no entries.
    server.create_sale(json!({"id": "race", "stock": 5})).await;
    let (status, answer) = server.enter("race", json!({"user_id": "u"})).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "not_a_draw");
    assert_eq!(server.get("/v1/sales/race/draw").await.0, 409);
    let (status, _) = server.get("/v1/sales/nope/draw").await;
    assert_eq!(status, 404);
}
