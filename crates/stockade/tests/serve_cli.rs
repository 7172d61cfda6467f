//! `stockade serve`'s rough edges as a newcomer meets them (issue 12,
//! item 6): nothing is announced before the service can serve; a refused
//! Redis or a bad database URL is one error, once, quickly, naming
//! host:port and never a password; settings are named the way they were
//! given; `--help` lists every setting; logs carry colour only on a
//! terminal and come as JSON on request.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use stockade_server::config::settings::SETTINGS;
use stockade_test_support::{PostgresServer, free_port};

const PASSWORD: &str = "s3cret-pw";

/// Environment variables to set.
type Env<'a> = &'a [(&'a str, &'a str)];

/// `stockade` with no `STOCKADE_*` from the environment, plus `env`.
fn command<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
    command.args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("STOCKADE_") || name == "RUST_LOG" || name == "NO_COLOR" {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command
}

/// Runs to completion; returns the output and how long it took.
fn run<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> (Output, Duration) {
    let started = Instant::now();
    let output = command(args, env).output().unwrap();
    (output, started.elapsed())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `serve` on the Redis engine at `url`, waiting `wait_ms` for it.
fn redis_engine_args(url: &str, wait_ms: u64) -> Vec<String> {
    let wait = wait_ms.to_string();
    [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        "/tmp/unused-stockade",
        "--engine",
        "redis",
        "--redis-url",
        url,
        "--startup-wait-ms",
        &wait,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    free_port().unwrap()
}

#[test]
fn a_data_dir_that_cannot_be_created_fails_before_anything_is_announced() {
    let (output, _) = run(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            "/proc/nope",
        ],
        &[],
    );
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(!stdout.contains("listening"), "{stdout}");
    assert!(!stdout.contains("admin token"), "{stdout}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("/proc/nope"), "{stderr}");
    assert!(errors[0].contains("--data-dir"), "what to do: {stderr}");
    assert_eq!(
        stderr.matches("os error").count(),
        1,
        "the cause once: {stderr}"
    );
    // Named as given.
    let (output, _) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("STOCKADE_DATA_DIR", "/proc/nope")],
    );
    let stderr = text(&output.stderr);
    assert!(stderr.contains("STOCKADE_DATA_DIR"), "{stderr}");
    assert!(!stderr.contains("--data-dir"), "{stderr}");
}

#[test]
fn a_refused_redis_is_one_line_naming_host_port_and_what_to_do() {
    let port = closed_port();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{port}");
    let (output, took) = run(&redis_engine_args(&url, 0), &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr.to_lowercase().matches("refused").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("Redis at 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(stderr.contains("--redis-url"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn an_unreachable_backend_is_waited_for_once_then_named_once() {
    let port = closed_port();
    let url = format!("postgres://app:{PASSWORD}@127.0.0.1:{port}/orders");
    let (output, took) = run(
        &["serve", "--listen", "127.0.0.1:0", "--database-url", &url],
        &[("STOCKADE_STARTUP_WAIT_MS", "1500"), ("RUST_LOG", "warn")],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let waiting: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("waiting up to"))
        .collect();
    assert_eq!(waiting.len(), 1, "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!("PostgreSQL at 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(errors[0].contains("--database-url"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert!(
        took >= Duration::from_millis(1_400),
        "did not wait: {took:?}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn a_signal_while_waiting_for_a_backend_ends_the_start_at_once() {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let mut child = command(&redis_engine_args(&url, 60_000), &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("waiting up to 60 s"), "{line}");
    let signalled = Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "{:?}",
        signalled.elapsed()
    );
    assert_eq!(status.code(), Some(2), "{status}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(
        rest.contains("interrupted before the service started"),
        "{rest}"
    );
}

#[test]
fn a_bad_database_url_is_one_error_naming_host_port_quickly() {
    let port = closed_port();
    let refused = format!("postgres://app:{PASSWORD}@127.0.0.1:{port}/orders");
    let unknown = format!("postgres://app:{PASSWORD}@stockade-no-such-host.invalid:5432/orders");
    for (url, endpoint, cause) in [
        (refused.as_str(), format!("127.0.0.1:{port}"), "refused"),
        (
            unknown.as_str(),
            "stockade-no-such-host.invalid:5432".to_owned(),
            "unknown host",
        ),
    ] {
        let (output, took) = run(
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                url,
                "--startup-wait-ms",
                "0",
            ],
            &[],
        );
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("PostgreSQL at {endpoint}")),
            "{stderr}"
        );
        assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}

#[test]
fn a_database_that_refuses_the_url_is_named_without_the_password() {
    let postgres = PostgresServer::start().unwrap();
    // A database that does not exist on a server that does.
    let url = postgres
        .url()
        .replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    let url = format!(
        "{}/stockade_no_such_database",
        url.rsplit_once('/').unwrap().0
    );
    let port = url
        .split(':')
        .nth(3)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (output, took) = run(
        &["serve", "--listen", "127.0.0.1:0", "--database-url", &url],
        &[],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert_eq!(
        stderr.matches("stockade_no_such_database").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    // Not a connection failure: no waiting for it.
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[test]
fn a_setting_is_named_the_way_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(&file, "commit_deadline_ms = 0\n").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], Env, String); 3] = [
        (
            &["serve"],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "0")],
            "STOCKADE_COMMIT_DEADLINE_MS".to_owned(),
        ),
        (
            &["serve", "--commit-deadline-ms", "0"],
            &[],
            "--commit-deadline-ms".to_owned(),
        ),
        (
            &["serve", "--config", file],
            &[],
            format!("commit_deadline_ms in {file}"),
        ),
    ];
    for (args, env, name) in cases {
        let (output, _) = run(args, env);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid setting {name}: ")),
            "{args:?} {env:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

/// Flags win over variables, variables over the file: the bad value of the
/// winning layer is the one named, whatever the others say.
#[test]
fn a_flag_beats_its_variable_which_beats_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(&file, "commit_deadline_ms = 3000\n").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], Env, &str); 2] = [
        (
            &["serve", "--config", file, "--commit-deadline-ms", "0"],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "3000")],
            "--commit-deadline-ms",
        ),
        (
            &["serve", "--config", file],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "0")],
            "STOCKADE_COMMIT_DEADLINE_MS",
        ),
    ];
    for (args, env, name) in cases {
        let (output, _) = run(args, env);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid setting {name}: ")),
            "{args:?} {env:?}: {stderr}"
        );
    }
}

/// A variable clap reads is named by the variable; the admin token is no
/// flag (it would show in `ps`).
#[test]
fn a_bad_variable_is_named_by_it_and_the_admin_token_is_no_flag() {
    let (output, _) = run(&["serve"], &[("STOCKADE_BATCH_MAX", "lots")]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: invalid setting STOCKADE_BATCH_MAX: \"lots\" is not a whole number"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let (output, _) = run(&["serve", "--admin-token", "0123456789abcdef"], &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: invalid setting --admin-token: is not a flag"),
        "{stderr}"
    );
    assert!(stderr.contains("STOCKADE_ADMIN_TOKEN"), "{stderr}");
}

#[test]
fn help_lists_every_setting_with_its_variable_and_file_key() {
    let (output, _) = run(&["serve", "--help"], &[]);
    let help = text(&output.stdout);
    assert!(output.status.success(), "{help}");
    for row in SETTINGS.iter() {
        assert!(help.contains(row.env), "{} missing from --help", row.env);
        assert!(
            help.lines()
                .any(|l| l.contains(row.env) && l.contains(row.key)),
            "{} missing from --help's table",
            row.key
        );
        if let Some(flag) = row.flag {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }
    for needed in [
        "STOCKADE_ADMIN_TOKEN",
        "STOCKADE_OUTBOX_GRACE_MS",
        "admin_token",
        "outbox_grace_ms",
    ] {
        assert!(help.contains(needed), "{needed} missing from --help");
    }
}

/// Runs `stockade serve` waiting for an unreachable Redis for 300 ms, so
/// that it logs one warning and exits; under a terminal with `script` when
/// `terminal`. Returns what it wrote to stderr (the terminal's output).
fn warning_output(terminal: bool, env: &[(&str, &str)]) -> String {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let owned = redis_engine_args(&url, 300);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let output = if terminal {
        let line = std::iter::once(env!("CARGO_BIN_EXE_stockade"))
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        let mut script = Command::new("script");
        script.args(["-q", "-e", "-c", &line, "/dev/null"]);
        for (name, _) in std::env::vars() {
            if name.starts_with("STOCKADE_") || name == "RUST_LOG" || name == "NO_COLOR" {
                script.env_remove(name);
            }
        }
        script.envs(env.iter().copied()).stdin(Stdio::null());
        let output = script
            .output()
            .expect("`script` (util-linux) runs a command on a terminal");
        text(&output.stdout)
    } else {
        text(&command(&args, env).output().unwrap().stderr)
    };
    assert!(output.contains("not reachable yet"), "{output}");
    output
}

#[test]
fn logs_are_coloured_only_on_a_terminal() {
    assert!(
        !warning_output(false, &[]).contains('\u{1b}'),
        "ANSI codes written to a pipe"
    );
    assert!(
        warning_output(true, &[]).contains("\u{1b}["),
        "no colour on a terminal"
    );
    assert!(
        !warning_output(true, &[("NO_COLOR", "1")]).contains('\u{1b}'),
        "colour despite NO_COLOR"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let output = warning_output(false, &[("STOCKADE_LOG_FORMAT", "json")]);
    let mut logged = 0;
    for line in output.lines().filter(|l| !l.starts_with("error:")) {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(object["level"].is_string(), "{line}");
        assert!(object["fields"]["message"].is_string(), "{line}");
        logged += 1;
    }
    assert!(logged >= 1, "{output}");
}

/// A running `stockade serve`, stopped with SIGTERM when dropped.
struct Running {
    child: Child,
    banner: String,
}

impl Running {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut banner = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut banner).unwrap();
        let mut token = String::new();
        let _ = stdout.read_line(&mut token);
        banner.push_str(&token);
        Self { child, banner }
    }

    /// SIGTERM, then everything written to stderr.
    fn stop(mut self) -> String {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        stderr
    }
}

#[test]
fn a_database_password_is_never_printed() {
    let postgres = PostgresServer::start().unwrap();
    let database = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(postgres.fresh_database())
        .unwrap();
    let url = database.replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    assert!(url.contains(PASSWORD), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--engine",
            "postgres",
            "--database-url",
            &url,
        ],
        &[("RUST_LOG", "debug,sqlx=debug")],
    );
    let banner = running.banner.clone();
    let stderr = running.stop();
    assert!(
        banner.contains("PostgreSQL store at postgres://127.0.0.1:"),
        "{banner}"
    );
    assert!(!banner.contains(PASSWORD), "{banner}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}
