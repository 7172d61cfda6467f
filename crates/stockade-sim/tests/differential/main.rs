//! SimRedis against a real redis-server (7, started by
//! stockade-test-support): the same commands to both, every reply
//! compared, then the whole keyspace (every key's type, contents and
//! whether it has a deadline).
//!
//! Replies are compared exactly, errors by their full text, after making
//! uniform only what two correct servers may answer differently: the
//! order of SMEMBERS and KEYS (sorted), of a hash's fields in the final
//! keyspace (Redis keeps them in order only in small hashes), the time
//! left of a deadline
//! (PTTL clamped to -2, -1 or 1), and in the Functions flow the stream
//! ids each server takes from its own clock. After each seed, a replica
//! of the simulated server, fed its write effects, must hold the same.

mod compare;
mod functions;
mod generate;
mod scripts;
mod traffic;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redis::aio::MultiplexedConnection;
use stockade_core::ManualClock;
use stockade_sim::redis::SimRedis;
use stockade_test_support::RedisServer;

use compare::{keyspace, normalize, send};

/// The seeds of the random runs: each is one fixed sequence.
const SEEDS: &[u64] = &[1, 2, 3, 7, 42, 99, 100, 106, 1234, 2026];
/// Commands (or scripts) per seed.
const STEPS: usize = 500;

/// A real server and a simulated one, a connection to each.
pub(crate) struct Both {
    _server: RedisServer,
    real: MultiplexedConnection,
    sim: MultiplexedConnection,
    /// Stream ids the simulated server gave → the real one's for the same
    /// entry: a replayed command naming an entry names the real one's.
    ids: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub(crate) async fn both(sim: &SimRedis) -> Both {
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
    pub(crate) async fn same(&mut self, args: &[Vec<u8>], ids: bool, context: &str) {
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

    pub(crate) async fn same_keyspace(&mut self, ids: bool, context: &str) {
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
    let clock = ManualClock::new(Utc::now());
    let sim = SimRedis::new("differential", Arc::new(clock.clone()));
    let mut pair = both(&sim).await;
    for &seed in SEEDS {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut stream = 0;
        for args in [&["FLUSHALL"][..], &["SCRIPT", "FLUSH"]] {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            pair.same(&bytes(&args), false, "reset").await;
        }
        for step in 0..STEPS {
            // Time moves (a little: deadlines are far), so that a replica
            // replaying a relative deadline later would hold another one.
            clock.advance(chrono::TimeDelta::milliseconds(1));
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
        // Every write replicates: a replica fed the effects holds the same.
        assert!(
            sim.replica_lagging(0).dump() == sim.dump(),
            "seed {seed}: a replica differs from its primary"
        );
    }
}
