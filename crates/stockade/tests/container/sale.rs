//! The deployment's promise with real containers: three containers of the
//! image on one Redis and one PostgreSQL sell a sale out to the
//! multi-instance suite's crowd (about 4,000 purchases, keys replayed on
//! other instances, some cancels), while one container is stopped the way
//! an orchestrator stops it (`podman stop`: the image's SIGTERM) mid-sale
//! and started again. Exactly the stock is sold, every acknowledged order
//! is in the store (the suite's checker, invariants 1-5), and the stopped
//! container exits 0 having committed everything it acknowledged.

use std::time::{Duration, Instant};

use stockade_test_support::{PostgresServer, RedisServer};

use crate::cluster::{Cluster, INSTANCES};
use crate::evidence::{Evidence, Terms};
use crate::history::{Phase, Recorder};
use crate::plan::{self, PER_USER_LIMIT, STOCK};
use crate::{api, checker, crowd, healing, podman};

/// The container stopped mid-sale.
const VICTIM: usize = 1;
/// It is stopped once the crowd has this many 201s (about a fifth of the
/// stock sold): well inside the sale.
const STOP_AFTER_ACKS: usize = 150;
/// The crowd's seed (fixed: a failure replays).
const SEED: u64 = 22;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_containers_sell_a_sale_out_while_one_is_stopped_with_sigterm() {
    let started = Instant::now();
    let image = podman::image().await;
    let redis = RedisServer::start().expect("start redis-server");
    let postgres = PostgresServer::start().expect("start PostgreSQL");
    let database = postgres
        .fresh_database()
        .await
        .expect("a fresh PostgreSQL database");
    let cluster = Cluster::start(&image, &redis.url(), &database).await;
    eprintln!(
        "sale: {INSTANCES} containers of {image} ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let sale = "containers".to_owned();
    let created = api::create_sale(
        cluster.client(),
        &cluster.endpoints().get(0),
        &sale,
        STOCK,
        PER_USER_LIMIT,
        None,
    )
    .await;
    assert_eq!(
        created.status(),
        Some(201),
        "creating the sale: {}",
        created.describe()
    );
    let plan = plan::crowd(SEED);
    eprintln!(
        "sale: {} purchases for {STOCK} items (seed {SEED})",
        plan.len()
    );
    let recorder = Recorder::default();
    let crowd = tokio::spawn(crowd::run(
        cluster.client().clone(),
        cluster.endpoints(),
        sale.clone(),
        plan,
        recorder.clone(),
    ));

    while recorder.acks() < STOP_AFTER_ACKS {
        assert!(
            !recorder.crowd_done(),
            "the crowd ended with {} acks, before the stop at {STOP_AFTER_ACKS}",
            recorder.acks()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let victim = cluster.container(VICTIM);
    // Mid-sale is judged when SIGTERM is sent: the crowd is still buying.
    // The stop's drain may take seconds, and the crowd may well finish
    // meanwhile; that does not make the stop any less mid-sale.
    let acks_at_stop = recorder.acks();
    assert!(
        !recorder.crowd_done() && acks_at_stop < STOCK as usize,
        "the crowd was over ({acks_at_stop} acks) before the stop was sent: not mid-sale"
    );
    eprintln!("sale: podman stop {} at {acks_at_stop} acks", victim.name());
    let (code, took) = victim.stop().await;
    let log = victim.logs(20).await;
    eprintln!(
        "sale: {} exited {code} after {} ms, at {} acks",
        victim.name(),
        took.as_millis(),
        recorder.acks()
    );
    assert_eq!(
        code, 0,
        "the stopped container's exit code; its log:\n{log}"
    );
    assert!(
        log.contains("stopped: every acknowledged order is committed"),
        "the stopped container did not report its orders committed; its log:\n{log}"
    );
    cluster.start_again(VICTIM).await;
    eprintln!(
        "sale: {} ready again at {} acks",
        victim.name(),
        recorder.acks()
    );

    tokio::time::timeout(Duration::from_secs(180), crowd)
        .await
        .expect("the crowd did not finish within 180 s")
        .expect("the crowd panicked");
    eprintln!(
        "sale: crowd done: {}",
        recorder.history().summary(Phase::Crowd)
    );

    let (healing, store) = healing::heal(&cluster, &sale, STOCK, false, &recorder, 1).await;
    let evidence = Evidence {
        terms: Terms {
            sale: sale.clone(),
            stock: STOCK,
            per_user_limit: PER_USER_LIMIT,
            hold_seconds: None,
        },
        history: recorder.history(),
        store,
        healing,
        expiry_counters: None,
    };
    let violations = checker::check(&evidence);
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
        panic!(
            "{} invariant violations:\n{}\n{}",
            violations.len(),
            list.join("\n"),
            cluster.log_tails(15).await
        );
    }
    let sold: u64 = evidence
        .store
        .iter()
        .flatten()
        .filter(|o| o.is_live())
        .map(|o| o.quantity)
        .sum();
    assert_eq!(
        sold, STOCK,
        "the store's live orders hold exactly the stock"
    );
    eprintln!(
        "sale: sold out exactly ({sold} items), every acknowledged order committed ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}
