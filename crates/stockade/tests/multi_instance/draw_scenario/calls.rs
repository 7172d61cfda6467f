//! The draw sale's HTTP calls; the crowd of entries: every buyer enters
//! once, on an instance of its own, and some enter again on another (they
//! must get their entry back: 200, the same entry id); and the outside
//! auditor's `scripts/verify-draw`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::api::{self, TOKEN};
use crate::cluster::{Cluster, Endpoints, INSTANCES};
use crate::history::Answer;

/// Entries in flight at once.
const IN_FLIGHT: usize = 64;
/// Tries of one entry that met no answer or a 503 (each on the next
/// instance).
const TRIES: usize = 5;

/// `POST /v1/sales` (admin) of a draw sale of one SKU.
pub async fn create_draw_sale(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    stock: u64,
    hold_seconds: u64,
    window: (DateTime<Utc>, DateTime<Utc>),
) -> Answer {
    let body = json!({
        "id": sale, "stock": stock, "hold_seconds": hold_seconds, "allocation": "draw",
        "entries_open_at": window.0, "entries_close_at": window.1,
    });
    let sent = client
        .post(format!("{base}/v1/sales"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await;
    api::answer(sent).await
}

/// `POST /v1/sales/{sale}/entries`.
pub async fn enter(client: &reqwest::Client, base: &str, sale: &str, buyer: &str) -> Answer {
    let sent = client
        .post(format!("{base}/v1/sales/{sale}/entries"))
        .json(&json!({"user_id": buyer}))
        .send()
        .await;
    api::answer(sent).await
}

/// `GET /v1/sales/{sale}/entries/me?user_id={buyer}`.
pub async fn my_entry(client: &reqwest::Client, base: &str, sale: &str, buyer: &str) -> Answer {
    let sent = client
        .get(format!("{base}/v1/sales/{sale}/entries/me"))
        .query(&[("user_id", buyer)])
        .send()
        .await;
    api::answer(sent).await
}

/// `GET /v1/sales/{sale}/draw`, every page of the order followed (a page
/// that does not answer 200 is the answer).
pub async fn get_draw(client: &reqwest::Client, base: &str, sale: &str) -> Answer {
    let url = format!("{base}/v1/sales/{sale}/draw");
    let mut answer = api::answer(client.get(&url).send().await).await;
    loop {
        let Answer::Http {
            status: 200, body, ..
        } = &mut answer
        else {
            return answer;
        };
        let Some(after) = body["next_after"].as_u64() else {
            return answer;
        };
        let page = api::answer(client.get(&url).query(&[("after", after)]).send().await).await;
        let Answer::Http {
            status: 200,
            body: page_body,
            ..
        } = &page
        else {
            return page;
        };
        let rest = page_body["order"].as_array().cloned().unwrap_or_default();
        match body["order"].as_array_mut() {
            Some(order) => order.extend(rest),
            None => return page,
        }
        body["next_after"] = page_body["next_after"].clone();
    }
}

/// Creates the draw sale through the first instance that accepts it
/// (trying for up to 20 s); returns its seed commitment.
pub async fn create(
    cluster: &Cluster,
    sale: &str,
    stock: u64,
    hold_seconds: u64,
    window: (DateTime<Utc>, DateTime<Utc>),
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut attempt = 0;
    loop {
        let index = attempt % INSTANCES;
        let url = cluster.endpoints().get(index);
        let answer =
            create_draw_sale(cluster.client(), &url, sale, stock, hold_seconds, window).await;
        if answer.status() == Some(201) {
            let commitment = answer.body()["draw"]["seed_commitment"].as_str();
            return commitment
                .unwrap_or_else(|| {
                    panic!("sale {sale} created without a seed commitment: {answer:?}")
                })
                .to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "creating draw sale {sale}: no instance accepted it within 20 s; \
             instance {index} last answered {}",
            answer.describe()
        );
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the crowd of entries came to.
#[derive(Debug, Default)]
pub struct Entries {
    /// Each buyer whose entry was answered 201 or 200, with its entry id.
    pub by_buyer: BTreeMap<String, String>,
    /// What went wrong: an entry refused or never answered, a second entry
    /// not answered 200 with the first one's id.
    pub violations: Vec<String>,
    /// Buyers who entered twice.
    pub twice: usize,
}

/// Buyer `n` enters on instance `n % 3`; one in seven enters again, on the
/// next instance.
pub async fn enter_all(cluster: &Cluster, sale: &str, buyers: usize) -> Entries {
    let next = Arc::new(AtomicUsize::new(0));
    let found: Arc<Mutex<Entries>> = Arc::default();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (client, endpoints) = (cluster.client().clone(), cluster.endpoints());
            let (sale, next, found) = (sale.to_owned(), Arc::clone(&next), Arc::clone(&found));
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= buyers {
                        return;
                    }
                    let buyer = format!("b{n}");
                    let first = enter_once(&client, &endpoints, &sale, &buyer, n % INSTANCES).await;
                    let again = if n % 7 == 0 {
                        let other = (n + 1) % INSTANCES;
                        Some((
                            other,
                            enter_once(&client, &endpoints, &sale, &buyer, other).await,
                        ))
                    } else {
                        None
                    };
                    judge(
                        &mut found.lock().unwrap(),
                        &buyer,
                        n % INSTANCES,
                        first,
                        again,
                    );
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("an entry worker panicked");
    }
    let mut entries = std::mem::take(&mut *found.lock().unwrap());
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    let mut shared = Vec::new();
    for (buyer, id) in &entries.by_buyer {
        if let Some(other) = owners.insert(id, buyer) {
            shared.push(format!(
                "buyers {other} and {buyer} got the same entry id {id}"
            ));
        }
    }
    entries.violations.extend(shared);
    entries
}

/// One entry, retried on the next instance while it meets no answer or a
/// 503; the instance that answered last, and its answer.
async fn enter_once(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    sale: &str,
    buyer: &str,
    mut instance: usize,
) -> (usize, Answer) {
    for _ in 1..TRIES {
        let answer = enter(client, &endpoints.get(instance), sale, buyer).await;
        if !matches!(answer.status(), None | Some(503)) {
            return (instance, answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        instance = (instance + 1) % INSTANCES;
    }
    let answer = enter(client, &endpoints.get(instance), sale, buyer).await;
    (instance, answer)
}

fn judge(
    entries: &mut Entries,
    buyer: &str,
    planned: usize,
    (instance, first): (usize, Answer),
    again: Option<(usize, (usize, Answer))>,
) {
    let id = first.body()["entry_id"].as_str().map(str::to_owned);
    let id = match (first.status(), id) {
        // A retry after a lost answer may find the entry made: 200.
        (Some(201), Some(id)) => id,
        (Some(200), Some(id)) if instance != planned => id,
        _ => {
            entries.violations.push(format!(
                "{buyer}: entry (planned on instance {planned}) answered on instance {instance}: {}",
                first.describe()
            ));
            return;
        }
    };
    entries.by_buyer.insert(buyer.to_owned(), id.clone());
    let Some((_, (on, again))) = again else {
        return;
    };
    entries.twice += 1;
    let same = again.body()["entry_id"].as_str() == Some(id.as_str());
    if again.status() != Some(200) || !same {
        entries.violations.push(format!(
            "{buyer}: entered again on instance {on} after entry {id}: {} \
             (expected 200 with the same entry_id)",
            again.describe()
        ));
    }
}

/// What an outside auditor does: `scripts/verify-draw` checks the seed
/// against the commitment and the ids against the entry set's digest
/// (when the draw published one), and recomputes the order from the ids.
pub fn audit(
    seed: &str,
    commitment: &str,
    digest: Option<&str>,
    ids: &[String],
) -> Result<Vec<String>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/verify-draw");
    let mut args = vec![script, "--seed", seed, "--commitment", commitment];
    args.extend(
        digest
            .map(|digest| ["--digest", digest])
            .into_iter()
            .flatten(),
    );
    let mut child = Command::new("python3")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run python3 {script}: {e}"))?;
    let mut stdin = child.stdin.take().expect("a piped stdin");
    stdin
        .write_all(ids.join("\n").as_bytes())
        .map_err(|e| format!("writing the ids: {e}"))?;
    drop(stdin);
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "refused the draw ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}
