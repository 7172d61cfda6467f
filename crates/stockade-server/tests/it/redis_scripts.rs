//! `--redis-scripts` (issue 21, item 3): on Redis 7 the service's scripts,
//! the engine's and the rate limiter's, run as versioned Functions
//! libraries (FCALL); `STOCKADE_REDIS_SCRIPTS=eval` keeps every one on
//! EVALSHA and loads no library.

use crate::common;

use std::sync::Arc;

use common::{Setup, TestServer};
use serde_json::json;
use stockade_core::SystemClock;
use stockade_server::config::RawConfig;
use stockade_test_support::RedisServer;

/// How many times Redis ran `command` (`fcall`, `evalsha`).
fn calls(redis: &RedisServer, command: &str) -> u64 {
    let stats = redis.command(&["INFO", "commandstats"]).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A Redis-backed service with a buyer rate limit, given `vars`; a sale
/// created and two purchases made (each checked by the limiter first).
async fn serve_and_buy(vars: &[(&str, &str)]) -> TestServer {
    let limits = RawConfig::from_pairs(&[("rate_limit_buyer", "600/m")])
        .unwrap()
        .limits;
    let server = TestServer::start_with_env(
        Setup::RedisPostgres,
        Arc::new(SystemClock),
        vars,
        move |c: &mut RawConfig| c.limits = limits,
    )
    .await;
    let (status, body) = server
        .create_sale(json!({"id": "scripts", "stock": 10, "per_user_limit": 1}))
        .await;
    assert_eq!(status, 201, "{body}");
    for user in ["a", "b"] {
        let (status, body) = server.buy("scripts", user, 1, None).await;
        assert_eq!(status, 201, "{body}");
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_7_the_engine_and_the_rate_limiter_call_their_functions() {
    let server = serve_and_buy(&[]).await;
    let redis = server.redis.as_ref().unwrap();
    let listed = redis
        .command(&["FUNCTION", "LIST", "LIBRARYNAME", "stockade_*"])
        .unwrap();
    for library in ["stockade_engine_", "stockade_rate_limit_"] {
        assert!(listed.contains(library), "{library} in {listed}");
    }
    assert!(
        calls(redis, "fcall") >= 5,
        "create, 2 limit checks, 2 purchases"
    );
    assert_eq!(calls(redis, "evalsha"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_scripts_eval_keeps_every_script_on_evalsha() {
    let server = serve_and_buy(&[("STOCKADE_REDIS_SCRIPTS", "eval")]).await;
    let redis = server.redis.as_ref().unwrap();
    let listed = redis.command(&["FUNCTION", "LIST"]).unwrap();
    assert!(!listed.contains("stockade_"), "no library loaded: {listed}");
    assert_eq!(calls(redis, "fcall"), 0);
    assert!(
        calls(redis, "evalsha") >= 5,
        "create, 2 limit checks, 2 purchases"
    );
}
