//! Shared helpers: `stockade` without the caller's environment, its
//! arguments for the Redis engine, a closed port, a running server.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use stockade_test_support::free_port;

pub(crate) const PASSWORD: &str = "s3cret-pw";

/// Environment variables to set.
pub(crate) type Env<'a> = &'a [(&'a str, &'a str)];

/// `stockade` with no `STOCKADE_*` from the environment, plus `env`.
pub(crate) fn command<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Command {
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
pub(crate) fn run<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    env: &[(&str, &str)],
) -> (Output, Duration) {
    let started = Instant::now();
    let output = command(args, env).output().unwrap();
    (output, started.elapsed())
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `serve` on the Redis engine at `url`, waiting `wait_ms` for it.
pub(crate) fn redis_engine_args(url: &str, wait_ms: u64) -> Vec<String> {
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
pub(crate) fn closed_port() -> u16 {
    free_port().unwrap()
}

/// A running `stockade serve`, stopped with SIGTERM when dropped.
pub(crate) struct Running {
    child: Child,
    pub(crate) banner: String,
}

impl Running {
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
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
    pub(crate) fn stop(mut self) -> String {
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
