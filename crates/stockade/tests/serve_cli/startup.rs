//! Starting: nothing is announced before the service can serve, and an
//! unreachable backend is waited for, named once, and left on a signal.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::helpers::{PASSWORD, closed_port, command, redis_engine_args, run, text};

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
