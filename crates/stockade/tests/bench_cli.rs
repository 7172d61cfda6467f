//! `stockade bench` as a user runs it: named servers that cannot be
//! reached, and `stockade bench http` end to end on the embedded setup.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// How long the bench may take to give up on a server that is not there.
const GIVE_UP_WITHIN: Duration = Duration::from_secs(15);

fn stockade() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
    command
        .env_remove("STOCKADE_REDIS_URL")
        .env_remove("STOCKADE_DATABASE_URL");
    command
}

/// Runs `args`, killing the run if it takes more than `limit`: (exit code,
/// stdout, stderr, time taken).
fn run_within(args: &[&str], limit: Duration) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let mut child = stockade()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "{args:?} still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let taken = started.elapsed();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        taken,
    )
}

/// A port nothing listens on (taken from the kernel, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn an_unreachable_database_fails_within_seconds_without_showing_the_password() {
    let port = closed_port();
    let url = format!("postgres://shop:s3cret-pw@127.0.0.1:{port}/sales");
    let (code, stdout, stderr, taken) = run_within(
        &[
            "bench",
            "--strategies",
            "pg-for-update",
            "--database-url",
            &url,
        ],
        GIVE_UP_WITHIN,
    );
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("postgres://shop:***@"), "{stderr}");
    assert!(
        !stderr.contains("s3cret-pw") && !stdout.contains("s3cret-pw"),
        "{stderr}"
    );
    assert!(taken < GIVE_UP_WITHIN, "{taken:?}");
}

#[test]
fn an_unreachable_redis_fails_within_seconds_without_showing_the_password() {
    let port = closed_port();
    let url = format!("redis://:s3cret-pw@127.0.0.1:{port}");
    let (code, stdout, stderr, _) = run_within(
        &["bench", "--strategies", "redis-lua", "--redis-url", &url],
        GIVE_UP_WITHIN,
    );
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(
        !stderr.contains("s3cret-pw") && !stdout.contains("s3cret-pw"),
        "{stderr}"
    );
}

#[test]
fn bench_http_compares_the_embedded_service_with_the_baseline() {
    let (code, stdout, stderr, _) = run_within(
        &[
            "bench",
            "http",
            "--duration",
            "1s",
            "--connections",
            "16",
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // Each phase announced itself.
    for announced in [
        "[1/4] baseline: committed",
        "[2/4] embedded: committed",
        "[3/4] baseline: sold-out",
        "[4/4] embedded: sold-out",
    ] {
        assert!(stderr.contains(announced), "{announced}: {stderr}");
    }
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let results = report["results"].as_array().unwrap();
    let runs: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r["target"].as_str().unwrap(), r["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(
        runs,
        [
            ("baseline", "committed"),
            ("embedded", "committed"),
            ("baseline", "sold-out"),
            ("embedded", "sold-out"),
        ]
    );
    for r in results {
        assert_eq!(r["ok"], true, "{r}");
        assert!(r["requests"].as_u64().unwrap() > 0, "{r}");
        assert!(
            r["p99_us"].as_u64().unwrap() >= r["p50_us"].as_u64().unwrap(),
            "{r}"
        );
    }
    // Every committed purchase was answered 201 (or 202) and is in the
    // store (the run's own check); the counts add up.
    let committed = &results[1];
    let statuses = committed["statuses"].as_object().unwrap();
    let acknowledged = statuses.get("201").and_then(Value::as_u64).unwrap_or(0)
        + statuses.get("202").and_then(Value::as_u64).unwrap_or(0);
    assert!(acknowledged > 0, "{committed}");
    assert_eq!(
        acknowledged,
        committed["requests"].as_u64().unwrap(),
        "{committed}"
    );
    let sold_out = &results[3];
    assert_eq!(
        sold_out["statuses"]["409 sold_out"].as_u64(),
        sold_out["requests"].as_u64(),
        "{sold_out}"
    );
    assert_eq!(
        results[0]["statuses"]["201"].as_u64(),
        results[0]["requests"].as_u64()
    );
    // Ratios to the baseline run just before each.
    for (i, phase) in [(1, "committed"), (3, "sold-out")] {
        let ratio = report["ratios"]["embedded"][phase].as_f64().unwrap();
        let expected = results[i]["per_second"].as_f64().unwrap()
            / results[i - 1]["per_second"].as_f64().unwrap();
        assert!(
            (ratio - expected).abs() < 1e-9,
            "{phase}: {ratio} vs {expected}"
        );
    }
}

#[test]
fn bench_http_prints_a_table_with_the_ratios() {
    let (code, stdout, stderr, _) = run_within(
        &["bench", "http", "--duration", "300ms", "--connections", "8"],
        Duration::from_secs(120),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("| baseline | committed |"), "{stdout}");
    assert!(stdout.contains("| embedded | sold-out |"), "{stdout}");
    assert!(
        stdout.contains("Ratios to the bare axum baseline (requests/s): embedded: committed "),
        "{stdout}"
    );
}

#[test]
fn bench_http_refuses_bad_input() {
    for (args, expected) in [
        (
            &["bench", "http", "--connections", "0"][..],
            "--connections",
        ),
        (&["bench", "http", "--duration", "0s"][..], "--duration"),
        (&["bench", "http", "--targets", "mysql"][..], "mysql"),
    ] {
        let (code, _, stderr, _) = run_within(args, GIVE_UP_WITHIN);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_shards_refuses_bad_input() {
    for (args, expected) in [
        (&["bench", "shards", "--shards", "1"][..], "--shards"),
        (&["bench", "shards", "--buyers", "2"][..], "--shards"),
        (&["bench", "shards", "--rounds", "0"][..], "--rounds"),
        (&["bench", "shards", "--rate", "0"][..], "--rate"),
    ] {
        let (code, _, stderr, _) = run_within(args, GIVE_UP_WITHIN);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_shards_sells_a_whole_and_a_sharded_sale_on_a_cluster() {
    let (code, stdout, stderr, _) = run_within(
        &[
            "bench",
            "shards",
            "--buyers",
            "600",
            "--concurrency",
            "32",
            "--rounds",
            "1",
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{report}");
    for run in runs {
        assert!(run["per_second"].as_f64().unwrap() > 0.0, "{run}");
        assert_eq!(
            run["cpu_us_per_purchase"].as_array().unwrap().len(),
            3,
            "{run}"
        );
    }
    // The sharded sale spread its work: no primary idle.
    let sharded = runs.iter().find(|r| r["shards"] == 3).unwrap();
    assert!(
        sharded["script_us_per_purchase"]
            .as_array()
            .unwrap()
            .iter()
            .all(|us| us.as_f64().unwrap() > 0.0),
        "{sharded}"
    );
    assert!(stderr.contains("round 1, 3 shard(s)"), "{stderr}");
}

/// The child processes of `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if parent == Some(pid) {
            children.push(child);
        }
    }
    children
}

fn alive(pid: u32) -> bool {
    // A zombie has exited; only its entry is left until it is reaped.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s != "Z"))
        })
        .unwrap_or(false)
}

#[test]
fn an_interrupted_bench_http_stops_its_servers() {
    let mut bench = stockade()
        .args(["bench", "http", "--duration", "60s", "--connections", "4"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(bench.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the bench ended: {seen}"
        );
        seen.push_str(&line);
        if line.contains("[1/4]") {
            break;
        }
    }
    let servers = children_of(bench.id());
    // The baseline and stockade serve.
    assert_eq!(servers.len(), 2, "{servers:?}: {seen}");
    kill(Pid::from_raw(bench.id() as i32), Signal::SIGINT).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = bench.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the bench did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    for server in servers {
        assert!(!alive(server), "server {server} outlived the bench");
    }
}

/// `stockade bench servers` (what scripts/capacity starts): ready servers
/// described on one line, and every one stopped once stdin closes.
#[test]
fn bench_servers_describes_its_servers_and_stops_them_when_stdin_closes() {
    let mut servers = stockade()
        .args(["bench", "servers", "--redis", "single", "--postgres"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(servers.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let described: Value = serde_json::from_str(&line).unwrap();
    let port = described["redis_ports"][0].as_u64().unwrap() as u16;
    let postgres = described["postgres_pid"].as_u64().unwrap() as u32;
    assert!(
        described["redis_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{port}"))
    );
    assert!(
        described["database_url"]
            .as_str()
            .unwrap()
            .starts_with("postgres://")
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    assert!(alive(postgres));

    drop(servers.stdin.take());
    let started = Instant::now();
    while servers.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "bench servers did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!alive(postgres), "PostgreSQL outlived bench servers");
}

#[test]
fn bench_servers_refuses_bad_input() {
    let (code, _, stderr, _) =
        run_within(&["bench", "servers", "--redis", "sentinel"], GIVE_UP_WITHIN);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("possible values: none, single, cluster"),
        "{stderr}"
    );
}

/// scripts/capacity's model, on the measurements docs/capacity.md quotes:
/// the tables of that page, and every prediction within the goal.
#[test]
fn the_capacity_model_reproduces_the_documented_tables() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let run = |file: &str| {
        Command::new("python3")
            .arg(format!("{root}/scripts/capacity"))
            .args(["--from", file])
            .output()
            .expect("python3 runs scripts/capacity (install python3)")
    };
    let out = run(&format!(
        "{root}/docs/measurements/capacity-2026-11-26.json"
    ));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for row in [
        "| 2 instance(s), 1 shard(s), 512 connections | 9,864 (8,454–10,222) | 9,075 | -8% |",
        "| 1 instance(s), 3 shard(s), 512 connections | 8,249 (8,005–10,137) | 9,548 | +16% |",
        "| 2 instance(s), 3 shard(s), 512 connections | 8,561 (8,252–8,961) | 9,075 | +6% |",
        "| one hot sale in the store (its commits are serial) | 10,918 |",
    ] {
        assert!(table.contains(row), "no {row} in:\n{table}");
    }
    assert!(!table.contains("MISSED"), "{table}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"runs\": []}").unwrap();
    let out = run(bad.to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot calibrate the model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
