//! `stockade serve` under hostile clients (issue 12, item 7), the real
//! binary on loopback:
//!
//! - a bounded slowloris: 2,000 connections sending a request head one
//!   header a second for 20 s against a server whose open-file limit is
//!   lowered to 1,024. Purchases on the buyers' keep-alive connections are
//!   answered within their usual latency (measured just before, without the
//!   attack), the process stays under its fd limit, and the slow
//!   connections are cut at the header-read timeout;
//! - SIGTERM with half-sent requests open: the process exits within its
//!   shutdown bound, and every acknowledged order is committed.

use std::collections::HashSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use stockade_test_support::ServeProcess;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "hostile-clients-admin-token-0123";

/// The server's open-file limit in the slowloris test.
const FILE_LIMIT: u64 = 1_024;
const ATTACKERS: usize = 2_000;
const ATTACK: Duration = Duration::from_secs(20);

/// How long `stockade serve` may take to print its URL.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// A `stockade serve` child, killed when dropped.
struct Serve {
    server: ServeProcess,
    url: String,
}

impl Serve {
    /// Starts `stockade serve` with `args`, under `prlimit` when
    /// `file_limit` is given.
    fn start(data_dir: &std::path::Path, file_limit: Option<u64>, args: &[&str]) -> Self {
        let binary = env!("CARGO_BIN_EXE_stockade");
        let mut command = match file_limit {
            Some(limit) => {
                let mut command = Command::new("prlimit");
                command
                    .arg(format!("--nofile={limit}:{limit}"))
                    .arg("--")
                    .arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .env("STOCKADE_ADMIN_TOKEN", TOKEN)
            .env("RUST_LOG", "warn");
        for (name, _) in std::env::vars() {
            if name.starts_with("STOCKADE_") && name != "STOCKADE_ADMIN_TOKEN" {
                command.env_remove(name);
            }
        }
        let server = ServeProcess::start(command, &data_dir.with_extension("log"), START_TIMEOUT)
            .unwrap_or_else(|e| panic!("stockade serve did not start: {e}"));
        let url = server.url().to_owned();
        Self { server, url }
    }

    fn pid(&self) -> u32 {
        self.server.pid().expect("running")
    }

    fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.server.process().kill();
    }
}

fn new_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn create_sale(client: &reqwest::Client, url: &str, id: &str, stock: u64) {
    let response = client
        .post(format!("{url}/v1/sales"))
        .bearer_auth(TOKEN)
        .json(&json!({"id": id, "stock": stock}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        201,
        "{:?}",
        response.text().await
    );
}

/// One purchase; its status, body and latency.
async fn buy(
    client: &reqwest::Client,
    url: &str,
    sale: &str,
    user: &str,
) -> (u16, Value, Duration) {
    let started = Instant::now();
    let response = client
        .post(format!("{url}/v1/sales/{sale}/purchases"))
        .json(&json!({"user_id": user}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("purchase by {user}: {e}"));
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, started.elapsed())
}

/// Purchases by `buyers` concurrent buyers (each on its own keep-alive
/// connection of `client`) until `stop`; their latencies.
async fn purchases_until(
    client: &reqwest::Client,
    url: &str,
    buyers: usize,
    prefix: &str,
    stop: Instant,
) -> Vec<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..buyers)
        .map(|_| {
            let (client, url, next, prefix) = (
                client.clone(),
                url.to_owned(),
                Arc::clone(&next),
                prefix.to_owned(),
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < stop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let (status, body, took) =
                        buy(&client, &url, "steady", &format!("{prefix}-{i}")).await;
                    assert_eq!(status, 201, "{body}");
                    latencies.push(took);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort();
    all
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// What the slow clients saw.
#[derive(Default)]
struct AttackCounts {
    connected: AtomicUsize,
    refused_with_503: AtomicUsize,
    cut_by_the_server: AtomicUsize,
}

/// One slow client until `stop`: connects, sends a request head one header
/// line a second, and connects again a second after the server closes it.
async fn slow_client(address: String, stop: Instant, counts: Arc<AttackCounts>) {
    while Instant::now() < stop {
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&address)).await
        else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        counts.connected.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        let mut sent = stream
            .write_all(b"POST /v1/sales/steady/purchases HTTP/1.1\r\nhost: x\r\n")
            .await
            .is_ok();
        let mut chunk = [0u8; 512];
        while sent && Instant::now() < stop {
            match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 && chunk[..n].starts_with(b"HTTP/1.1 503") => {
                    counts.refused_with_503.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(_) => {
                    if opened.elapsed() >= Duration::from_millis(900) {
                        counts.cut_by_the_server.fetch_add(1, Ordering::Relaxed);
                    }
                    break;
                }
                Err(_) => sent = stream.write_all(b"x-slow: 1\r\n").await.is_ok(),
            }
        }
        drop(stream);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_neither_slows_purchases_nor_exhausts_file_descriptors() {
    let own_limit = stockade_server::listener::raise_open_file_limit();
    assert!(
        own_limit >= ATTACKERS as u64 + 256,
        "this test opens {ATTACKERS} connections and may open only {own_limit} files: raise `ulimit -Hn`"
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Serve::start(
        dir.path(),
        Some(FILE_LIMIT),
        // The attackers and the buyers share one address here: without
        // the per-client cap this tests the global one.
        &[
            "--header-read-timeout-ms",
            "2000",
            "--max-connections-per-client",
            "1000000",
        ],
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(&FILE_LIMIT.to_string())),
        "{limits}"
    );
    let client = new_client();
    create_sale(&client, &server.url, "steady", 1_000_000).await;

    // The usual latency: the same buyers, just before, without the attack.
    let buyers = 4;
    let baseline = purchases_until(
        &client,
        &server.url,
        buyers,
        "calm",
        Instant::now() + Duration::from_secs(5),
    )
    .await;
    let files_before = server.open_files();

    let stop = Instant::now() + ATTACK;
    let counts = Arc::new(AttackCounts::default());
    let address = server.url.trim_start_matches("http://").to_owned();
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|_| tokio::spawn(slow_client(address.clone(), stop, Arc::clone(&counts))))
        .collect();
    // Watch the server's descriptors while the attack lasts.
    let watching = Arc::new(AtomicBool::new(true));
    let peak_files = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (watching, peak_files, pid) =
            (Arc::clone(&watching), Arc::clone(&peak_files), server.pid());
        std::thread::spawn(move || {
            while watching.load(Ordering::Relaxed) {
                let open = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
                peak_files.fetch_max(open, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // Let the attack take hold, then buy through it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let attacked = purchases_until(&client, &server.url, buyers, "attacked", stop).await;
    for attacker in attackers {
        attacker.await.unwrap();
    }
    watching.store(false, Ordering::Relaxed);
    watcher.join().unwrap();

    let (calm_p50, calm_p99) = (percentile(&baseline, 0.5), percentile(&baseline, 0.99));
    let (attack_p50, attack_p99) = (percentile(&attacked, 0.5), percentile(&attacked, 0.99));
    let peak = peak_files.load(Ordering::Relaxed);
    let connected = counts.connected.load(Ordering::Relaxed);
    let refused = counts.refused_with_503.load(Ordering::Relaxed);
    let cut = counts.cut_by_the_server.load(Ordering::Relaxed);
    eprintln!(
        "slowloris: {} purchases before (p50 {calm_p50:?}, p99 {calm_p99:?}), {} during (p50 {attack_p50:?}, p99 {attack_p99:?}); \
         {connected} slow connections, {refused} refused with 503, {cut} cut by the header timeout; \
         server files {files_before} before, peak {peak} of {FILE_LIMIT}",
        baseline.len(),
        attacked.len()
    );
    assert!(attacked.len() >= 100, "too few purchases during the attack");
    assert!(
        attack_p50 <= (calm_p50 * 4).max(calm_p50 + Duration::from_millis(50)),
        "purchases slowed down under the attack: p50 {attack_p50:?} against {calm_p50:?}"
    );
    assert!(
        attack_p99 <= (calm_p99 * 10).max(Duration::from_secs(1)),
        "purchases stalled under the attack: p99 {attack_p99:?} against {calm_p99:?}"
    );
    assert!(
        peak < FILE_LIMIT as usize - 32,
        "the server reached {peak} open files of its {FILE_LIMIT}"
    );
    assert!(
        peak >= 600,
        "the attack never held many connections (peak {peak} files): not a test"
    );
    assert!(
        cut >= ATTACKERS / 2,
        "slow heads were not cut at the header timeout ({cut} cut)"
    );
    assert!(refused > 0, "the connection cap was never reached");

    // Afterwards: descriptors given back, new clients served at once.
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.open_files() > files_before + 16 {
        assert!(
            Instant::now() < deadline,
            "{} files still open after the attack ({files_before} before)",
            server.open_files()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fresh = new_client();
    let response = fresh
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

/// Sends half a request head, or a whole head and part of its body.
async fn half_sent(address: &str, with_head: bool) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let bytes: &[u8] = if with_head {
        b"POST /v1/sales/drain/purchases HTTP/1.1\r\nhost: x\r\n\
          content-type: application/json\r\ncontent-length: 64\r\n\r\n{\"user_id\":"
    } else {
        b"POST /v1/sales/drain/purchases HTTP/1.1\r\nhost: x\r\ncontent-"
    };
    stream.write_all(bytes).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_half_sent_requests_exits_within_the_bound_with_every_acknowledged_order_committed()
 {
    const SHUTDOWN_MS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let mut server = Serve::start(
        dir.path(),
        None,
        &[
            "--shutdown-timeout-ms",
            &SHUTDOWN_MS.to_string(),
            "--commit-deadline-ms",
            "1000",
            "--header-read-timeout-ms",
            "60000",
        ],
    );
    let client = new_client();
    create_sale(&client, &server.url, "drain", 100_000).await;
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut half = Vec::new();
    for i in 0..20 {
        half.push(half_sent(&address, i % 4 == 0).await);
    }

    // A crowd buying until the server goes away.
    let acknowledged = Arc::new(std::sync::Mutex::new(HashSet::new()));
    let next = Arc::new(AtomicUsize::new(0));
    let crowd: Vec<_> = (0..16)
        .map(|_| {
            let (client, url, next, acknowledged) = (
                client.clone(),
                server.url.clone(),
                Arc::clone(&next),
                Arc::clone(&acknowledged),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Ok(response) = client
                        .post(format!("{url}/v1/sales/drain/purchases"))
                        .json(&json!({"user_id": format!("buyer-{i}")}))
                        .send()
                        .await
                    else {
                        return;
                    };
                    if response.status().as_u16() == 201 {
                        let body: Value = response.json().await.unwrap();
                        let id = body["order_id"].as_str().unwrap().to_owned();
                        acknowledged.lock().unwrap().insert(id);
                    }
                }
            })
        })
        .collect();
    while acknowledged.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let signalled = Instant::now();
    kill(Pid::from_raw(server.pid() as i32), Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(status) = server.server.process().exit_status() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(30),
            "still running 30 s after SIGTERM (bound {SHUTDOWN_MS} ms)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = signalled.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_millis(SHUTDOWN_MS) + Duration::from_secs(5),
        "exited {took:?} after SIGTERM (bound {SHUTDOWN_MS} ms)"
    );
    for buyer in crowd {
        buyer.await.unwrap();
    }
    drop(half);

    // Every 201 is a committed, confirmed order after a restart on the
    // same data.
    let acknowledged = acknowledged.lock().unwrap().clone();
    let restarted = Serve::start(dir.path(), None, &[]);
    for id in &acknowledged {
        let response = client
            .get(format!("{}/v1/orders/{id}", restarted.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "order {id} lost");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    eprintln!(
        "SIGTERM: exited {took:?} after the signal with 20 half-sent requests open; {} acknowledged orders all committed",
        acknowledged.len()
    );
}
