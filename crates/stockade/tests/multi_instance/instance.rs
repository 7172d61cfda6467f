//! One `stockade serve` child process ([`ServeProcess`]), its log in a
//! file kept across restarts.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use stockade_test_support::ServeProcess;
use tempfile::TempDir;

use crate::api::{ADMISSION_SECRET, DRAW_KEY, PAYMENTS_TOKEN, TOKEN};

/// How long a purchase waits for its commit before answering 202.
pub const COMMIT_DEADLINE_MS: u64 = 2_000;
/// How old an uncommitted outbox entry must be before the reconciler of
/// any instance commits it (must exceed the commit deadline).
pub const OUTBOX_GRACE_MS: u64 = 3_000;

/// How long an instance may take to print its URL. An instance recovers
/// its sales before it listens: restarted after it was SIGKILLed while
/// holding a sale's rebuild lock, it waits for that lock's lease (30 s) to
/// run out, so this bound is longer than the lease.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A `stockade serve` child. Killed (SIGKILL) when dropped; it also dies
/// with the test process.
#[derive(Debug)]
pub struct Instance {
    index: usize,
    args: Vec<String>,
    /// Variables of this instance alone (a skewed clock's), set last.
    env: Vec<(String, String)>,
    dir: TempDir,
    process: Option<ServeProcess>,
    /// Kept after a kill: requests to a dead instance fail to connect.
    url: String,
}

impl Instance {
    /// Starts instance `index` with `args` (the engine and server flags) and
    /// `env` (variables of its own), and waits until it listens. Blocking.
    pub fn start(index: usize, args: Vec<String>, env: Vec<(String, String)>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("stockade-instance-{index}-"))
            .tempdir()
            .expect("a temp dir for an instance");
        let mut instance = Self {
            index,
            args,
            env,
            dir,
            process: None,
            url: String::new(),
        };
        instance.spawn();
        instance
    }

    /// The base URL (`http://127.0.0.1:PORT`); it changes on restart.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The instance's log file (stdout and stderr, all starts).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("stockade.log")
    }

    /// The last `lines` lines of the log, without the access log's line per
    /// 5xx answer (`tower_http::trace`), which would drown everything else.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("tower_http::trace"))
            .collect();
        kept[kept.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the process ended by itself (it was started and not killed).
    pub fn exited(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|process| process.process().has_exited())
    }

    /// SIGKILL: the crash of an instance mid-sale.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.process().kill();
        }
    }

    /// Starts the killed instance again with the same flags (on a new port).
    /// Blocking.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    fn spawn(&mut self) {
        let log = self.log_path();
        let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(&self.args);
        // Only what this suite sets: no STOCKADE_* from the environment.
        for (name, _) in std::env::vars() {
            if name.starts_with("STOCKADE_") {
                command.env_remove(name);
            }
        }
        command
            .env("STOCKADE_ADMIN_TOKEN", TOKEN)
            // The payment service's token: confirms are its callbacks.
            .env("STOCKADE_PAYMENTS_TOKEN", PAYMENTS_TOKEN)
            // Every buyer of the crowd comes from this one address.
            .env("STOCKADE_MAX_CONNECTIONS_PER_CLIENT", "1000000")
            // Every instance of a deployment shares the admission secret.
            .env("STOCKADE_ADMISSION_SECRET", ADMISSION_SECRET)
            // And the draw key, which draw seeds follow from.
            .env("STOCKADE_DRAW_KEY", DRAW_KEY)
            .env(
                "STOCKADE_COMMIT_DEADLINE_MS",
                COMMIT_DEADLINE_MS.to_string(),
            )
            .env("STOCKADE_OUTBOX_GRACE_MS", OUTBOX_GRACE_MS.to_string())
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let process = ServeProcess::start(command, &log, START_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "instance {} did not start (args {:?}): {e}",
                self.index, self.args
            )
        });
        self.url = process.url().to_owned();
        self.process = Some(process);
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}
