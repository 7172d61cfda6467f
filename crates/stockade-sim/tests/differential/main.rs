//! SimRedis against a real redis-server (7, started by
//! stockade-test-support): the same commands to both, every reply
//! compared, then the whole keyspace (every key's type, contents and
//! whether it has a deadline).
//!
//! Replies are compared exactly, errors by their full text, after making
//! uniform only what two correct servers may answer differently: the
//! order of SMEMBERS and KEYS (sorted), the time left of a deadline
//! (PTTL clamped to -2, -1 or 1), and in the Functions flow the stream
//! ids each server takes from its own clock.

mod compare;
mod generate;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::aio::MultiplexedConnection;
use stockade_core::{Engine, Epoch, ManualClock, Purchase, PurchaseOutcome, SaleSpec};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_sim::redis::SimRedis;
use stockade_test_support::RedisServer;

use compare::{keyspace, normalize, send};

/// The seeds of the random runs: each is one fixed sequence.
const SEEDS: &[u64] = &[1, 2, 3, 7, 42, 99, 100, 106, 1234, 2026];
/// Commands (or scripts) per seed.
const STEPS: usize = 500;

/// A real server and a simulated one, a connection to each.
struct Both {
    _server: RedisServer,
    real: MultiplexedConnection,
    sim: MultiplexedConnection,
    /// Stream ids the simulated server gave → the real one's for the same
    /// entry: a replayed command naming an entry names the real one's.
    ids: BTreeMap<Vec<u8>, Vec<u8>>,
}

async fn both(sim: &SimRedis) -> Both {
    let server = RedisServer::start().expect("start redis-server");
    let real = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis-server");
    Both {
        _server: server,
        real,
        sim: sim.connect().await.expect("connect to the simulated redis"),
        ids: BTreeMap::new(),
    }
}

impl Both {
    /// Sends `args` to both; panics with `context` if the answers differ.
    async fn same(&mut self, args: &[Vec<u8>], ids: bool, context: &str) {
        let name = String::from_utf8_lossy(&args[0]).into_owned();
        let real_args: Vec<Vec<u8>> = args
            .iter()
            .map(|a| self.ids.get(a).cloned().unwrap_or_else(|| a.clone()))
            .collect();
        let real = send(&mut self.real, &real_args).await;
        let sim = send(&mut self.sim, args).await;
        if let (Ok(sim), Ok(real)) = (&sim, &real) {
            compare::pair_ids(sim, real, &mut self.ids);
        }
        let real = normalize(&name, real, ids);
        let sim = normalize(&name, sim, ids);
        let shown: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            sim, real,
            "{context}: {shown:?} (left: simulated, right: real)"
        );
    }

    async fn same_keyspace(&mut self, ids: bool, context: &str) {
        let real = keyspace(&mut self.real, ids).await;
        let sim = keyspace(&mut self.sim, ids).await;
        assert_eq!(
            sim, real,
            "{context}: the keyspaces differ (left: simulated, right: real)"
        );
    }
}

fn bytes(words: &[String]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn random_commands_and_scripts_answer_as_redis_does() {
    let sim = SimRedis::new("differential", Arc::new(ManualClock::new(Utc::now())));
    let mut pair = both(&sim).await;
    for &seed in SEEDS {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut stream = 0;
        for args in [&["FLUSHALL"][..], &["SCRIPT", "FLUSH"]] {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            pair.same(&bytes(&args), false, "reset").await;
        }
        for step in 0..STEPS {
            let key = generate::KEYS[rng.random_range(0..generate::KEYS.len())];
            let args = if rng.random_bool(0.2) {
                let body = generate::script(&mut rng, &mut stream);
                let other = generate::KEYS[rng.random_range(0..generate::KEYS.len())];
                let how = if rng.random_bool(0.5) {
                    "EVAL"
                } else {
                    "EVALSHA"
                };
                if how == "EVALSHA" {
                    pair.same(
                        &bytes(&["SCRIPT".into(), "LOAD".into(), body.clone()]),
                        false,
                        "load",
                    )
                    .await;
                }
                let target = if how == "EVAL" {
                    body
                } else {
                    sha1_smol::Sha1::from(&body).digest().to_string()
                };
                vec![how.into(), target, "2".into(), key.into(), other.into()]
            } else {
                generate::command(&mut rng, key, &mut stream)
            };
            pair.same(&bytes(&args), false, &format!("seed {seed}, step {step}"))
                .await;
        }
        pair.same_keyspace(false, &format!("seed {seed}, at the end"))
            .await;
    }
}

/// The engine's own traffic (its real Functions library, a sale, buyers
/// until sold out, a release, the outbox, a rebuild), recorded on a
/// SimRedis, then replayed to a fresh SimRedis and a real server.
#[tokio::test(flavor = "current_thread")]
async fn the_engine_library_answers_as_on_redis() {
    let clock = ManualClock::new(Utc::now());
    let recorder = SimRedis::new("recorder", Arc::new(clock.clone()));
    recorder.record(true);
    let engine = RedisEngine::connect(
        &RedisEngineConfig::connected(Arc::new(recorder.clone())),
        Arc::new(clock.clone()),
    )
    .await
    .expect("the engine connects to the simulated redis");
    let spec = SaleSpec::builder("diff", 4).unwrap().build().unwrap();
    engine.create_sale(&spec).await.unwrap();
    let mut first = None;
    for user in 0..6 {
        let outcome = engine
            .purchase(&Purchase::new("diff", format!("u{user}"), 1).unwrap())
            .await
            .unwrap();
        if let PurchaseOutcome::Purchased { order_id, .. } = outcome {
            first.get_or_insert(order_id);
        }
    }
    let first = first.expect("someone bought");
    engine
        .release(spec.id(), first, Epoch::FIRST)
        .await
        .unwrap();
    let outcome = engine
        .purchase(&Purchase::new("diff", "late", 1).unwrap())
        .await
        .unwrap();
    assert!(
        matches!(outcome, PurchaseOutcome::Purchased { remaining: 0, .. }),
        "{outcome:?}"
    );
    let orders = engine.outbox(spec.id()).await.unwrap();
    engine.rebuild(&spec, Epoch::FIRST, &orders).await.unwrap();
    engine.snapshot(spec.id()).await.unwrap();
    let traffic = recorder.recorded();
    assert!(
        traffic.iter().any(|c| c[0].eq_ignore_ascii_case(b"FCALL")),
        "the library ran"
    );

    let replay = SimRedis::new("replay", Arc::new(clock.clone()));
    let mut pair = both(&replay).await;
    for (step, args) in traffic.iter().enumerate() {
        // Who the server is (INFO) and client bookkeeping differ by design.
        if args[0].eq_ignore_ascii_case(b"INFO") || args[0].eq_ignore_ascii_case(b"CLIENT") {
            continue;
        }
        pair.same(args, true, &format!("engine traffic, step {step}"))
            .await;
    }
    pair.same_keyspace(true, "after the engine's traffic").await;
}
