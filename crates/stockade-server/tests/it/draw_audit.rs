//! A draw nobody can read early and anyone can check (issue 35, item 2):
//! the store holds no seed, nor anything it follows from, while entries
//! are open (its draw row read directly); the seed published with the draw
//! is the one committed to at the sale's creation; a PostgreSQL store with
//! no draw key refuses draw sales; and `scripts/verify-draw` recomputes a
//! real draw's winners (SKUs, a members' reserve, quantities) from the
//! published sale and draw alone, and refuses a draw whose published
//! result was changed.

use crate::common;

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{Column, Connection, Row};
use stockade_core::draw::Nonce;
use stockade_core::{Clock, ManualClock, SaleId};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/verify-draw");

async fn server(setup: Setup, clock: &ManualClock) -> TestServer {
    TestServer::start_with_clock(setup, Timing::default(), Arc::new(clock.clone())).await
}

async fn draw_when(server: &TestServer, sale: &str, want: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, draw) = server
            .get(&format!("/v1/sales/{sale}/draw?limit=10000"))
            .await;
        assert_eq!(status, 200, "{draw}");
        if draw["state"] == want {
            return draw;
        }
        assert!(std::time::Instant::now() < deadline, "never {want}: {draw}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The store's draw row of `sale`, read directly: every column as text
/// (numbers and NULLs left out).
async fn draw_row(server: &TestServer, sale: &str) -> Vec<(String, String)> {
    sqlx::any::install_default_drivers();
    let url = server.database_url.clone().unwrap_or_else(|| {
        format!(
            "sqlite://{}?mode=ro",
            server.data_dir.join("orders.db").display()
        )
    });
    let mut connection = sqlx::AnyConnection::connect(&url).await.unwrap();
    let row = sqlx::query("SELECT * FROM draws WHERE sale_id = $1")
        .bind(sale)
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let values = row
        .columns()
        .iter()
        .filter_map(|column| {
            let value: Option<String> = row.try_get(column.ordinal()).ok()?;
            Some((column.name().to_owned(), value?))
        })
        .collect();
    connection.close().await.unwrap();
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_seed_is_not_in_the_store_until_the_entries_close() {
    for setup in [Setup::Embedded, Setup::Postgres] {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        let (status, sale) = server
            .create_sale(json!({
                "id": "sealed", "stock": 2, "allocation": "draw",
                "entries_open_at": opened - TimeDelta::seconds(1),
                "entries_close_at": opened + TimeDelta::seconds(10),
            }))
            .await;
        assert_eq!(status, 201, "{sale}");
        let commitment = sale["draw"]["seed_commitment"].as_str().unwrap().to_owned();
        for b in 0..4 {
            let (status, entry) = server
                .enter("sealed", json!({"user_id": format!("b{b}")}))
                .await;
            assert_eq!(status, 201, "{entry}");
        }
        // While entries are open: what anyone who reads the store sees.
        let open_row = draw_row(&server, "sealed").await;
        server
            .move_to(&clock, opened + TimeDelta::seconds(10))
            .await;
        let draw = draw_when(&server, "sealed", "drawn").await;
        let seed = draw["seed"].as_str().unwrap().to_owned();
        // The seed published is the one committed to at creation.
        assert_eq!(draw["seed_commitment"], commitment.as_str());
        assert_eq!(
            hex::encode(Sha256::digest(hex::decode(&seed).unwrap())),
            commitment,
            "{setup:?}"
        );
        for (column, value) in &open_row {
            assert!(
                !value.to_lowercase().contains(&seed),
                "{setup:?}: the store's draws.{column} held the seed while entries were open"
            );
        }
        // Nor does it follow from what the store held: the nonce gives it
        // only with the draw key, which the store does not hold.
        let nonce = open_row.iter().find(|(c, _)| c == "nonce").map(|(_, v)| v);
        let nonce = Nonce::from_hex(nonce.expect("the store keeps the draw's nonce")).unwrap();
        let key = server.state().draw_key().unwrap();
        let sale_id = SaleId::new("sealed").unwrap();
        assert_eq!(key.seed(&sale_id, &nonce).to_hex(), seed);
        let key_text = String::from_utf8_lossy(key.expose()).to_lowercase();
        assert!(
            open_row
                .iter()
                .all(|(_, v)| !v.to_lowercase().contains(&key_text)),
            "{setup:?}: the store holds the draw key"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgresql_store_without_a_draw_key_refuses_draw_sales() {
    let server = TestServer::start_adjusted(
        Setup::Postgres,
        Timing::default(),
        Arc::new(stockade_core::SystemClock),
        |raw| raw.access.draw_key = None,
    )
    .await;
    let now = Utc::now();
    let (status, body) = server
        .create_sale(json!({
            "id": "unkeyed", "stock": 2, "allocation": "draw",
            "entries_open_at": now, "entries_close_at": now + TimeDelta::minutes(1),
        }))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("STOCKADE_DRAW_KEY"),
        "{body}"
    );
    assert_eq!(server.get("/v1/sales/unkeyed").await.0, 404);
    // A sale sold to the fastest needs no key.
    assert_eq!(
        server
            .create_sale(json!({"id": "raced", "stock": 2}))
            .await
            .0,
        201
    );
}

fn verify(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(SCRIPT)
        .args(args)
        .output()
        .expect("python3 runs scripts/verify-draw")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verify_draw_recomputes_the_winners_and_refuses_a_changed_result() {
    for setup in [Setup::Embedded, Setup::RedisPostgres] {
        let clock = ManualClock::new(Utc::now());
        let server = server(setup, &clock).await;
        let opened = clock.now();
        // Two SKUs, a members' reserve of `a`, members may take 3.
        let (status, sale) = server
            .create_sale(json!({
                "id": "audited", "allocation": "draw", "hold_seconds": 60,
                "skus": [{"id": "a", "stock": 5}, {"id": "b", "stock": 3}],
                "per_user_limit": 2,
                "tiers": [{"name": "members", "reserved": {"a": 3}, "per_user_limit": 3}],
                "entries_open_at": opened - TimeDelta::seconds(1),
                "entries_close_at": opened + TimeDelta::seconds(10),
            }))
            .await;
        assert_eq!(status, 201, "{sale}");
        for b in 0..24 {
            let mut body = json!({
                "user_id": format!("b{b}"),
                "sku": if b % 3 == 2 { "b" } else { "a" },
                "quantity": 1 + b % 2,
            });
            if b % 4 == 0 {
                body["tier"] = json!("members");
                body["quantity"] = json!(1 + b % 3);
            }
            let (status, entry) = server.enter("audited", body).await;
            assert_eq!(status, 201, "{setup:?}: {entry}");
        }
        server
            .move_to(&clock, opened + TimeDelta::seconds(10))
            .await;
        let draw = draw_when(&server, "audited", "drawn").await;
        let url = server.at("/v1/sales/audited");
        let output = verify(&["--url", &url]);
        let said = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{setup:?}: {said}\n{draw}");
        assert!(said.contains("winners recomputed"), "{said}");

        // The same draw with one published result changed: refused.
        let (_, sale) = server.get("/v1/sales/audited").await;
        let dir = tempfile::tempdir().unwrap();
        let sale_file = dir.path().join("sale.json");
        std::fs::write(&sale_file, sale.to_string()).unwrap();
        let draw_file = dir.path().join("draw.json");
        std::fs::write(&draw_file, draw.to_string()).unwrap();
        let files = |draw: &std::path::Path| {
            verify(&[
                "--sale",
                sale_file.to_str().unwrap(),
                "--draw",
                draw.to_str().unwrap(),
            ])
        };
        assert!(files(&draw_file).status.success(), "{setup:?}");
        let mut changed = draw.clone();
        let order = changed["order"].as_array_mut().unwrap();
        let first_waiting = order
            .iter()
            .position(|e| e["drawn_result"] == "waitlisted")
            .expect("the draw waitlists someone");
        order[first_waiting]["drawn_result"] = json!("won");
        let changed_file = dir.path().join("changed.json");
        std::fs::write(&changed_file, changed.to_string()).unwrap();
        let output = files(&changed_file);
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{setup:?}: {said}");
        assert!(
            said.contains(&format!("(position {first_waiting}) was drawn won")),
            "{said}"
        );
    }
}
