//! The crash test of the HTTP service: 2,000 concurrent buyers for 500
//! items, the `stockade serve` process SIGKILLed mid-sale and restarted on
//! the same data. Every 201 must be a committed, confirmed order; sold must
//! equal the committed orders and never exceed 500; remaining must be
//! 500 − sold. Run on the embedded default and on Redis + PostgreSQL.
//!
//! And a cancel whose engine release failed (Redis frozen) survives the
//! SIGKILL of the instance that took it: another instance applies it.

use std::collections::HashSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use stockade_test_support::{PostgresServer, RedisServer, ServeProcess};

const TOKEN: &str = "crash-test-admin-token-0123";
const STOCK: u64 = 500;
const BUYERS: usize = 2_000;

/// How long `stockade serve` may take to print its URL.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// A `stockade serve` child process.
struct Serve {
    server: ServeProcess,
    url: String,
}

impl Serve {
    fn start(data_dir: &std::path::Path, redis: Option<&str>, database: Option<&str>) -> Self {
        Self::start_with(data_dir, redis, database, &[])
    }

    fn start_with(
        data_dir: &std::path::Path,
        redis: Option<&str>,
        database: Option<&str>,
        env: &[(&str, &str)],
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("STOCKADE_ADMIN_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied());
        if let Some(url) = redis {
            command.args(["--engine", "redis", "--redis-url", url]);
        }
        if let Some(url) = database {
            command.args(["--database-url", url]);
        }
        let server = ServeProcess::start(command, &data_dir.with_extension("log"), START_TIMEOUT)
            .unwrap_or_else(|e| panic!("stockade serve did not start: {e}"));
        let url = server.url().to_owned();
        Self { server, url }
    }

    fn kill(&mut self) {
        self.server.process().kill(); // SIGKILL
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.server.process().kill();
    }
}

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Sends buyers until told to stop; returns the order ids answered 201.
async fn crowd(
    client: reqwest::Client,
    url: String,
    next: Arc<AtomicUsize>,
    acknowledged: Arc<std::sync::Mutex<HashSet<String>>>,
) {
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= BUYERS {
            return;
        }
        let response = client
            .post(format!("{url}/v1/sales/crash/purchases"))
            .header("Idempotency-Key", format!("key-{i}"))
            .json(&json!({"user_id": format!("buyer-{i}")}))
            .send()
            .await;
        let Ok(response) = response else {
            // The server died under us: this buyer got no answer.
            return;
        };
        let (status, body) = json_of(response).await;
        if status == 201 {
            acknowledged
                .lock()
                .unwrap()
                .insert(body["order_id"].as_str().unwrap().to_owned());
        }
    }
}

async fn crash_mid_sale(redis: Option<&str>, database: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Serve::start(dir.path(), redis, database);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (status, body) = json_of(
        client
            .post(format!("{}/v1/sales", server.url))
            .bearer_auth(TOKEN)
            .json(&json!({"id": "crash", "stock": STOCK}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let next = Arc::new(AtomicUsize::new(0));
    let acknowledged = Arc::new(std::sync::Mutex::new(HashSet::new()));
    let workers: Vec<_> = (0..64)
        .map(|_| {
            tokio::spawn(crowd(
                client.clone(),
                server.url.clone(),
                Arc::clone(&next),
                Arc::clone(&acknowledged),
            ))
        })
        .collect();
    // Kill the server once a third of the stock is acknowledged.
    while acknowledged.lock().unwrap().len() < (STOCK / 3) as usize {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill();
    for worker in workers {
        worker.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(!acknowledged.is_empty());

    let server = Serve::start(dir.path(), redis, database);
    for id in &acknowledged {
        let (status, order) = json_of(
            client
                .get(format!("{}/v1/orders/{id}", server.url))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 200, "acknowledged order {id} is lost: {order}");
        assert_eq!(order["status"], "confirmed", "{order}");
    }
    let mut committed = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) = json_of(
            client
                .get(format!(
                    "{}/v1/sales/crash/orders?limit=1000&after={after}",
                    server.url
                ))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        committed.extend(page["orders"].as_array().unwrap().iter().cloned());
        match page["next_after"].as_str() {
            Some(next) => after = next.to_owned(),
            None => break,
        }
    }
    let live = committed
        .iter()
        .filter(|o| o["status"] == "confirmed")
        .count() as u64;
    let (status, sale) = json_of(
        client
            .get(format!("{}/v1/sales/crash", server.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{sale}");
    let sold = sale["sold"].as_u64().unwrap();
    assert!(sold <= STOCK);
    assert_eq!(sold, live, "sold equals the committed orders");
    assert_eq!(sale["remaining"].as_u64().unwrap(), STOCK - sold);
    let buyers: HashSet<&str> = committed
        .iter()
        .map(|o| o["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(buyers.len(), committed.len(), "no buyer twice");
    eprintln!(
        "killed after {} acknowledged; after restart {sold} sold, {} committed orders",
        acknowledged.len(),
        committed.len()
    );

    // The restarted service sells exactly the rest, no more.
    let mut sold_after = 0;
    for i in BUYERS..BUYERS + STOCK as usize {
        let (status, body) = json_of(
            client
                .post(format!("{}/v1/sales/crash/purchases", server.url))
                .json(&json!({"user_id": format!("late-{i}")}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        match status {
            201 => sold_after += 1,
            409 => assert_eq!(body["error"]["code"], "sold_out", "{body}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(sold + sold_after, STOCK, "the sale ends exactly sold out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_sale_on_the_embedded_default() {
    crash_mid_sale(None, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_sale_on_redis_and_postgres() {
    let redis = RedisServer::start().unwrap();
    let postgres = PostgresServer::start().unwrap();
    let database = postgres.fresh_database().await.unwrap();
    crash_mid_sale(Some(&redis.url()), Some(&database)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_whose_release_failed_survives_the_instance_that_took_it() {
    let redis = RedisServer::start().unwrap();
    let pg = PostgresServer::start().unwrap();
    let database = pg.fresh_database().await.unwrap();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let start = |dir: &tempfile::TempDir| {
        Serve::start_with(
            dir.path(),
            Some(&redis.url()),
            Some(&database),
            // Give up on Redis quickly, so the cancel answers while frozen.
            &[("STOCKADE_COMMIT_DEADLINE_MS", "2000")],
        )
    };
    let mut taker = start(&dirs[0]);
    let other = start(&dirs[1]);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let post = |url: String, body: Value| {
        let client = client.clone();
        async move {
            json_of(
                client
                    .post(url)
                    .bearer_auth(TOKEN)
                    .json(&body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let (status, body) = post(
        format!("{}/v1/sales", taker.url),
        json!({"id": "owed", "stock": 1}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Both instances start together: one may still be running its start-up
    // recovery over the new sale, and then answers 503 `rebuilding`
    // (nothing sold, retry), as a client is told to.
    let purchase = |url: String, buyer: &'static str| async move {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (status, body) = post(url.clone(), json!({"user_id": buyer})).await;
            if status != 503 || body["error"]["code"] != "rebuilding" {
                return (status, body);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still rebuilding: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (status, order) = purchase(format!("{}/v1/sales/owed/purchases", taker.url), "alice").await;
    assert_eq!(status, 201, "{order}");
    let id = order["order_id"].as_str().unwrap().to_owned();

    // The store cancels; the engine, frozen, cannot take the item back.
    redis.pause();
    let (status, cancelled) = post(format!("{}/v1/orders/{id}/cancel", taker.url), json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    // The instance that owes the release dies before Redis is back.
    taker.kill();
    redis.resume();

    // The other instance finds the release in the store and applies it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, sale) = json_of(
            client
                .get(format!("{}/v1/sales/owed", other.url))
                .send()
                .await
                .unwrap(),
        )
        .await;
        if status == 200 && sale["remaining"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled item never came back: {sale}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = purchase(format!("{}/v1/sales/owed/purchases", other.url), "bob").await;
    assert_eq!(status, 201, "the item sells again: {body}");
}

/// The embedded default names orders before their commit too (202 with
/// `Prefer: respond-async`, or past the commit deadline): those must
/// survive a SIGKILL although the memory engine's outbox dies with the
/// process. Here the SQLite store is write-locked by another process's
/// transaction, so nothing commits, ten asynchronous purchases are answered
/// 202, the service is SIGKILLed, the lock released, and the service
/// started again: every named order must read `confirmed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orders_named_202_on_the_embedded_default_survive_a_sigkill() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let mut serve = Serve::start(dir.path(), None, None);
    let created = client
        .post(format!("{}/v1/sales", serve.url))
        .bearer_auth(TOKEN)
        .json(&json!({"id": "journal", "stock": 100, "per_user_limit": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);

    // Another process's write transaction: the service's commits wait.
    let database = format!("sqlite://{}", dir.path().join("orders.db").display());
    let mut locker = sqlx::SqliteConnection::connect(&database).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();

    let mut named = Vec::new();
    for i in 0..10 {
        let (status, body) = json_of(
            client
                .post(format!("{}/v1/sales/journal/purchases", serve.url))
                .header("Prefer", "respond-async")
                .header("Idempotency-Key", format!("k{i}"))
                .json(&json!({"user_id": format!("buyer-{i}")}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 202, "purchase {i}: {body}");
        named.push(body["order_id"].as_str().unwrap().to_owned());
    }
    serve.kill();
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    drop(locker);

    let serve = Serve::start(dir.path(), None, None);
    for id in &named {
        let (status, order) = json_of(
            client
                .get(format!("{}/v1/orders/{id}", serve.url))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            status, 200,
            "order {id} named 202 before the SIGKILL: {order}"
        );
        assert_eq!(order["status"], "confirmed", "{order}");
    }
    let (_, sale) = json_of(
        client
            .get(format!("{}/v1/sales/journal", serve.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(sale["remaining"], 90, "{sale}");
}
