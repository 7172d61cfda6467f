//! The report's JSON, table and ratios.

use std::time::Duration;

use super::*;
use crate::scenario::{Overrides, Scenario};
use crate::strategy::Verification;

fn result(kind: StrategyKind, per_second_requests: u64, broken: bool) -> BenchResult {
    result_with_redis_us(kind, per_second_requests, broken, 1_500)
}

/// A run of 150 requests during which Redis spent `redis_us` µs in
/// commands and twice that in CPU.
fn result_with_redis_us(
    kind: StrategyKind,
    per_second_requests: u64,
    broken: bool,
    redis_us: u64,
) -> BenchResult {
    let workload = Workload::new(Some(Scenario::Seed150), &Overrides::default()).unwrap();
    let mut tally = Tally {
        requests: 150,
        buyers: 150,
        purchased: 100,
        sold_out: 50,
        elapsed: Duration::from_secs_f64(150.0 / per_second_requests as f64),
        ..Tally::default()
    };
    tally.latencies.record(Duration::from_micros(300));
    let observed = Observed::new(
        100,
        &tally,
        Ok(Verification {
            remaining: if broken { -1 } else { 0 },
            recorded_orders: Some(100),
            lowest_stock_seen: None,
        }),
    );
    let work = ServerWork {
        redis_commands: kind
            .needs_redis()
            .then(|| BTreeMap::from([("evalsha".to_owned(), 150), ("get".to_owned(), 150)])),
        redis_command_us: kind.needs_redis().then_some(redis_us),
        redis_cpu_us: kind.needs_redis().then_some(2 * redis_us),
        db_transactions: kind.needs_postgres().then_some(300),
        notes: Vec::new(),
    };
    BenchResult::new(kind.as_str(), &workload, &tally, &observed, work)
}

#[test]
fn the_json_has_every_key_the_issue_names() {
    let report = BenchReport {
        results: vec![
            result(StrategyKind::RedisLua, 1_000, false),
            result(StrategyKind::PgForUpdate, 100, false),
        ],
    };
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for key in [
        "strategy",
        "scenario",
        "purchased",
        "sold_out",
        "remaining",
        "oversold",
        "duplicate_buyers",
        "elapsed_ms",
        "per_second",
        "p50_us",
        "p99_us",
        "p999_us",
        "redis_cmds_per_purchase",
        "db_tx_per_purchase",
        "ok",
    ] {
        for result in results {
            assert!(result.get(key).is_some(), "{key} missing from {result}");
        }
    }
    assert_eq!(results[0]["redis_cmds_per_purchase"], 2.0);
    assert!(results[0]["db_tx_per_purchase"].is_null());
    assert_eq!(results[1]["db_tx_per_purchase"], 2.0);
    assert_eq!(results[1]["scenario"], "seed-150");
}

#[test]
fn a_broken_strategy_is_shown_as_broken_with_what_broke() {
    let report = BenchReport {
        results: vec![
            result(StrategyKind::RedisDecr, 1_000, true),
            result(StrategyKind::RedisLua, 1_000, false),
        ],
    };
    assert!(!report.all_ok());
    let table = report.to_markdown();
    assert!(
        table.contains("| redis-decr | 100 | 50 | 0 | -1 |"),
        "{table}"
    );
    assert!(table.contains("**BROKEN**"));
    assert!(
        table.contains("- **redis-decr**: the stored stock is negative: -1"),
        "{table}"
    );
    assert!(table.contains("| redis-lua |"));
}

#[test]
fn the_ratio_to_the_row_lock_is_reported_next_to_the_articles() {
    let report = BenchReport {
        results: vec![
            result(StrategyKind::PgForUpdate, 500, false),
            result(StrategyKind::StockadeRedis, 5_000, false),
        ],
    };
    let ratio = report
        .ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate)
        .unwrap();
    assert!((ratio - 10.0).abs() < 0.01, "{ratio}");
    assert!(
        report
            .to_markdown()
            .contains("10.0× as many requests per second")
    );
    // No ratio for a broken strategy.
    let broken = BenchReport {
        results: vec![
            result(StrategyKind::PgForUpdate, 500, true),
            result(StrategyKind::StockadeRedis, 5_000, false),
        ],
    };
    assert_eq!(
        broken.ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate),
        None
    );
}

#[test]
fn numbers_are_formatted_for_people() {
    assert_eq!(format_us(850), "850 µs");
    assert_eq!(format_us(1_240), "1.24 ms");
    assert_eq!(format_us(2_250_000), "2.25 s");
    assert_eq!(format_rate(1_234_567.4), "1,234,567");
    assert_eq!(format_rate(999.0), "999");
}

#[test]
fn redis_time_per_purchase_is_in_the_table_the_json_and_the_ratios() {
    let report = BenchReport {
        results: vec![
            result_with_redis_us(StrategyKind::PgForUpdate, 500, false, 0),
            result_with_redis_us(StrategyKind::RedisLua, 4_000, false, 600),
            result_with_redis_us(StrategyKind::StockadeRedis, 6_000, false, 150),
        ],
    };
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let lua = &json["results"][1];
    // 600 µs over 150 requests; the CPU time is twice that.
    assert_eq!(lua["redis_us_per_purchase"], 4.0);
    assert_eq!(lua["redis_cpu_us_per_purchase"], 8.0);
    assert!(json["results"][0]["redis_us_per_purchase"].is_null());
    let ratios = &json["ratios"];
    assert_eq!(ratios["stockade_redis_to_redis_lua_per_second"], 1.5);
    assert_eq!(ratios["stockade_redis_to_redis_lua_redis_us"], 0.25);
    assert_eq!(ratios["stockade_redis_to_redis_lua_redis_cpu_us"], 0.25);
    assert_eq!(ratios["stockade_redis_to_pg_for_update_per_second"], 12.0);
    let table = report.to_markdown();
    assert!(
        table.contains("Redis µs/req (cmdstats) | Redis µs/req (cpu)"),
        "{table}"
    );
    assert!(
        table.contains("| 2.00 | 4.00 | 8.00 | – | held |"),
        "{table}"
    );
    assert!(
        table.contains(
            "Ratios: stockade-redis / redis-lua: 1.50× requests/s, \
             0.25× Redis µs per purchase (cmdstats), 0.25× Redis µs per purchase (cpu); \
             stockade-redis / pg-for-update: 12.00× requests/s."
        ),
        "{table}"
    );
    // Without redis-lua, only the ratio to the row lock; without either,
    // no line and null ratios.
    let alone = BenchReport {
        results: vec![report.results[0].clone(), report.results[2].clone()],
    };
    assert!(
        alone
            .to_markdown()
            .contains("Ratios: stockade-redis / pg-for-update: 12.00× requests/s.\n")
    );
    let none = BenchReport {
        results: vec![report.results[1].clone()],
    };
    assert!(!none.to_markdown().contains("Ratios"));
    let json: serde_json::Value = serde_json::from_str(&none.to_json()).unwrap();
    assert!(json["ratios"]["stockade_redis_to_redis_lua_redis_us"].is_null());
}
