//! The benchmark runs end to end against a throwaway redis-server and
//! reports both libraries. (No assertions on speed: that is what the
//! benchmark itself is for.)

use std::sync::Mutex;
use std::time::Duration;

use stockade_lock_bench::{LockBenchOptions, Progress, run};
use stockade_test_support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_reports_both_libraries() {
    let server = RedisServer::start().expect("starting redis-server");
    let options = LockBenchOptions {
        clients: 2,
        waiters: 8,
        warmup: Duration::from_millis(50),
        duration: Duration::from_millis(300),
        ..LockBenchOptions::default()
    };
    let seen = Mutex::new(Vec::new());
    let report = run(&server.url(), &options, |progress| {
        seen.lock().unwrap().push(progress.to_string());
    })
    .await
    .unwrap();

    let strategies: Vec<_> = report.results.iter().map(|r| r.strategy.as_str()).collect();
    assert_eq!(strategies, ["stockade-lock", "rslock"]);
    for result in &report.results {
        assert!(result.details.rounds >= 1, "{result:?}");
        assert_eq!(result.details.acquisitions, result.details.rounds * 8);
        // Every acquisition of a round is a hand-off (from the gatekeeper or
        // the previous holder).
        assert_eq!(result.details.handoffs, result.details.acquisitions);
        assert!(result.handoff_p50_us > 0.0 && result.handoff_p99_us >= result.handoff_p50_us);
        assert!(result.acquisitions_per_second > 0.0);
        // At least an acquire and a release per acquisition.
        assert!(result.redis_cmds_per_acquisition >= 2.0, "{result:?}");
    }
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.iter()
            .any(|line| line.starts_with("rslock: hand-off p50")),
        "{seen:?}"
    );
    assert!(matches!(
        Progress::WarmingUp { strategy: "x" }.to_string().as_str(),
        "x: warming up"
    ));

    let json = serde_json::to_value(&report).unwrap();
    let fields: Vec<_> = json["results"][0]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        fields,
        [
            "acquisitions_per_second",
            "handoff_p50_us",
            "handoff_p99_us",
            "redis_cmds_per_acquisition",
            "strategy"
        ]
    );
    assert!(report.to_markdown().contains("| stockade-lock |"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_that_cannot_work_are_refused() {
    let options = LockBenchOptions {
        waiters: 1,
        ..LockBenchOptions::default()
    };
    let error = run("redis://127.0.0.1:1", &options, |_| {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("invalid"), "{error}");
}
