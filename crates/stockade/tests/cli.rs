//! The `stockade` binary as a user runs it.

use std::process::Command;

use serde_json::Value;

fn stockade(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_stockade"))
        .args(args)
        .env_remove("STOCKADE_REDIS_URL")
        .env_remove("STOCKADE_DATABASE_URL")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

const DEMO_KEYS: [&str; 12] = [
    "engine",
    "buyers",
    "stock",
    "purchased",
    "sold_out",
    "remaining",
    "oversold",
    "duplicate_buyers",
    "elapsed_ms",
    "per_second",
    "p50_us",
    "p99_us",
];

#[test]
fn demo_over_http_sells_exactly_the_stock() {
    let (code, stdout, stderr) = stockade(&["demo", "--buyers", "400", "--stock", "150", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    for key in DEMO_KEYS {
        assert!(!report[key].is_null(), "{key} missing: {report}");
    }
    assert_eq!(report["transport"], "http");
    assert_eq!(report["purchased"], 150);
    assert_eq!(report["sold_out"], 250);
    assert_eq!(report["remaining"], 0);
    assert_eq!(report["oversold"], 0);
    assert_eq!(report["duplicate_buyers"], 0);
    assert_eq!(report["ok"], true);
}

#[test]
fn demo_over_http_on_every_engine() {
    for engine in ["redis", "postgres"] {
        let (code, stdout, stderr) = stockade(&[
            "demo", "--engine", engine, "--buyers", "300", "--stock", "100", "--json",
        ]);
        assert_eq!(code, 0, "{engine}: {stderr}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(report["transport"], "http", "{report}");
        assert_eq!(report["purchased"], 100, "{engine}: {report}");
        assert_eq!(report["remaining"], 0, "{engine}: {report}");
        assert_eq!(report["oversold"], 0, "{engine}: {report}");
        assert_eq!(report["ok"], true, "{engine}: {report}");
    }
}

#[test]
fn demo_direct_on_every_engine() {
    for engine in ["memory", "redis", "postgres"] {
        let (code, stdout, stderr) = stockade(&[
            "demo", "--direct", "--engine", engine, "--buyers", "300", "--stock", "100", "--json",
        ]);
        assert_eq!(code, 0, "{engine}: {stderr}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(report["engine"], engine);
        assert_eq!(report["purchased"], 100, "{report}");
        assert_eq!(report["oversold"], 0);
        assert_eq!(report["ok"], true);
    }
}

#[test]
fn demo_table_by_default() {
    let (code, stdout, _) = stockade(&["demo", "--buyers", "50", "--stock", "10"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("| purchased | 10 |"), "{stdout}");
    assert!(stdout.contains("| invariants | held |"), "{stdout}");
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: [(&[&str], &str); 9] = [
        (&["demo", "--buyers", "0"], "--buyers"),
        (&["demo", "--stock", "0"], "--stock"),
        (&["demo", "--engine", "mysql"], "mysql"),
        (&["serve", "--listen", "nowhere"], "--listen"),
        (
            &["serve", "--engine", "redis", "--redis-url", "http://x"],
            "--redis-url",
        ),
        (
            &["serve", "--engine", "memory", "--redis-url", "redis://x"],
            "add --engine redis",
        ),
        (&["serve", "--engine", "postgres"], "--engine"),
        (&["serve", "--engine", "oracle"], "oracle"),
        (&["serve", "--fallback", "postgres"], "--fallback"),
    ];
    for (args, expected) in cases {
        let (code, stdout, stderr) = stockade(args);
        assert_eq!(code, 2, "{args:?}: {stdout} {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// `--hold-seconds`: unpaid holds expire, their items are sold again, and
/// the store adds up (the demo checks it and exits 1 if not).
#[test]
fn demo_with_holds_sells_the_expired_stock_again() {
    let (code, stdout, stderr) = stockade(&[
        "demo",
        "--buyers",
        "300",
        "--stock",
        "100",
        "--hold-seconds",
        "1",
        "--pay-ratio",
        "0.6",
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["held"], 100, "{report}");
    let number = |field: &str| report[field].as_u64().unwrap();
    // On a loaded machine some buyers pay after their hold ran out: the
    // service refuses them and their items expire too.
    let expired_first = number("expired") - number("resold_late");
    assert!(expired_first > 0, "{report}");
    assert_eq!(number("paid") + expired_first, 100, "{report}");
    assert_eq!(
        number("resold") + number("resold_late"),
        expired_first,
        "{report}"
    );
    assert_eq!(
        (
            &report["confirmed"],
            &report["live_holds"],
            &report["remaining"]
        ),
        (&Value::from(100), &Value::from(0), &Value::from(0))
    );
    assert_eq!(report["problems"], Value::Array(Vec::new()));
}

#[test]
fn demo_refuses_bad_hold_settings_and_says_why() {
    for (args, expected) in [
        (vec!["--hold-seconds", "0"], "hold-seconds"),
        (
            vec!["--hold-seconds", "2", "--pay-ratio", "1.5"],
            "--pay-ratio",
        ),
        (vec!["--pay-ratio", "0.5"], "--hold-seconds"),
        (vec!["--hold-seconds", "2", "--direct"], "--direct"),
    ] {
        let mut all = vec!["demo"];
        all.extend(args.iter());
        let (code, _, stderr) = stockade(&all);
        assert_ne!(code, 0, "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_bad_sentinel_or_cluster_url_is_refused_without_its_password() {
    let cases = [
        (
            "redis+sentinel://:pw-s3cret@10.0.0.1:26379,10.0.0.2",
            "name the monitored service",
        ),
        (
            "redis+cluster://:pw-s3cret@h:7000,,g",
            "list at least one host",
        ),
        ("redis+cluster://:pw-s3cret@h:99999", "is not a port"),
        ("rediss+sentinal://:pw-s3cret@h/m", "unknown scheme"),
    ];
    for (url, expected) in cases {
        let (code, stdout, stderr) = stockade(&["serve", "--engine", "redis", "--redis-url", url]);
        assert_eq!(code, 2, "{url}: {stdout} {stderr}");
        assert!(stderr.contains("--redis-url"), "{url}: {stderr}");
        assert!(stderr.contains(expected), "{url}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{url}: {stderr}");
    }
}

#[test]
fn demo_sells_a_sale_of_several_skus_exactly_on_every_engine() {
    for engine in ["memory", "redis", "postgres"] {
        for direct in [false, true] {
            let mut args = vec![
                "demo", "--engine", engine, "--skus", "7", "--buyers", "600", "--stock", "100",
                "--json",
            ];
            if direct {
                args.push("--direct");
            }
            let (code, stdout, stderr) = stockade(&args);
            assert_eq!(code, 0, "{args:?}: {stderr}");
            let report: Value = serde_json::from_str(stdout.trim()).unwrap();
            assert_eq!(report["skus"], 7, "{report}");
            assert_eq!(report["purchased"], 100, "{args:?}: {report}");
            assert_eq!(report["remaining"], 0, "{args:?}: {report}");
            assert_eq!(report["oversold"], 0, "{args:?}: {report}");
            assert_eq!(report["errors"], 0, "{args:?}: {report}");
            assert_eq!(report["ok"], true, "{args:?}: {report}");
        }
    }
}

#[test]
fn bad_sku_counts_are_refused_before_anything_runs() {
    for (args, says) in [
        (
            &["demo", "--skus", "0"][..],
            "--skus must be between 1 and 100",
        ),
        (
            &["demo", "--skus", "101"][..],
            "--skus must be between 1 and 100",
        ),
        (
            &["demo", "--skus", "20", "--stock", "10"][..],
            "at most --stock (10)",
        ),
        (
            &["demo", "--skus", "2", "--hold-seconds", "5"][..],
            "--skus with --hold-seconds",
        ),
        (
            &[
                "bench",
                "--strategies",
                "stockade-memory",
                "--skus",
                "0",
                "--buyers",
                "5",
                "--stock",
                "5",
            ][..],
            "--skus must be between 1 and 100",
        ),
    ] {
        let (code, stdout, stderr) = stockade(args);
        assert_ne!(code, 0, "{args:?} ran: {stdout}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_splits_the_stock_over_skus_for_stockade_and_says_the_baselines_cannot() {
    let (code, stdout, stderr) = stockade(&[
        "bench",
        "--strategies",
        "redis-decr,stockade-memory",
        "--skus",
        "4",
        "--buyers",
        "300",
        "--stock",
        "40",
        "--json",
    ]);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {stderr} (exit {code})"));
    let results = report["results"].as_array().unwrap();
    let decr = &results[0];
    assert_eq!(decr["strategy"], "redis-decr");
    assert_eq!(decr["ok"], false, "{decr}");
    assert!(
        decr["problems"]
            .to_string()
            .contains("--skus applies to the stockade-* strategies"),
        "{decr}"
    );
    let memory = &results[1];
    assert_eq!(memory["skus"], 4, "{memory}");
    assert_eq!(memory["purchased"], 40, "{memory}");
    assert_eq!(memory["remaining"], 0, "{memory}");
    assert_eq!(memory["ok"], true, "{memory}");
}

#[test]
fn demo_draw_sells_by_a_draw_anyone_can_check_on_every_engine() {
    for (engine, skus) in [("memory", "1"), ("redis", "4"), ("postgres", "1")] {
        let (code, stdout, stderr) = stockade(&[
            "demo", "--draw", "--engine", engine, "--skus", skus, "--buyers", "300", "--stock",
            "40", "--json",
        ]);
        assert_eq!(code, 0, "{engine}: {stderr}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        // A loaded machine may send some entries after the window closed:
        // the service refuses those, rightly.
        let (entered, late) = (report["entered"].as_u64(), report["late"].as_u64());
        assert_eq!(
            entered.zip(late).map(|(e, l)| e + l),
            Some(300),
            "{engine}: {report}"
        );
        assert!(entered.unwrap() > 0, "{engine}: {report}");
        assert_eq!(report["seed_verified"], true, "{report}");
        assert_eq!(report["order_recomputed"], true, "{report}");
        assert_eq!(report["orders"], report["won"], "{report}");
        assert!(
            report["problems"].as_array().unwrap().is_empty(),
            "{report}"
        );
    }
    let (code, _, stderr) = stockade(&["demo", "--draw", "--direct"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("--draw needs the HTTP service"), "{stderr}");
}
