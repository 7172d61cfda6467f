//! A server in a child process that announces where it listens with a line
//! `... listening on http://ADDR ...` (`stockade serve`, and the bench's
//! bare baseline): the one way the bench, the CLI tests and the
//! multi-instance suite start one and learn its address.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::process::{ServerProcess, log_tail, wait_until};

/// A server that announced its URL. Stopped (SIGTERM, then SIGKILL after
/// 10 s) when dropped.
#[derive(Debug)]
pub struct ServeProcess {
    process: ServerProcess,
    url: String,
}

/// Why a server did not announce its URL.
#[derive(Debug)]
pub struct StartError {
    /// What happened: it could not be spawned, it exited, or it was silent.
    pub why: String,
    /// The end of its log.
    pub log_tail: String,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; its output ends with:\n{}", self.why, self.log_tail)
    }
}

impl std::error::Error for StartError {}

impl ServeProcess {
    /// Spawns `command` with its output appended to `log`, and waits up to
    /// `timeout` for the first announcement written to the log after this
    /// call (a log reused across restarts is read from its current end).
    /// Start it from a thread that lives as long as the server: the child
    /// dies with the thread that spawned it (`PR_SET_PDEATHSIG`).
    pub fn start(command: Command, log: &Path, timeout: Duration) -> Result<Self, StartError> {
        let offset = std::fs::metadata(log).map_or(0, |m| m.len() as usize);
        let fail = |why: String| StartError {
            why,
            log_tail: log_tail(log, 30),
        };
        let mut process = ServerProcess::spawn(command, log, Signal::SIGTERM)
            .map_err(|e| fail(format!("cannot spawn it: {e}")))?;
        let mut url = None;
        let announced = wait_until(timeout, || {
            let text = std::fs::read(log).unwrap_or_default();
            url = listening_url(&String::from_utf8_lossy(
                text.get(offset..).unwrap_or_default(),
            ));
            url.is_some() || process.has_exited()
        });
        match url.filter(|_| announced) {
            Some(url) => Ok(Self { process, url }),
            None => {
                let why = if process.has_exited() {
                    "it exited before announcing its URL".to_owned()
                } else {
                    format!("it printed no URL within {} s", timeout.as_secs())
                };
                process.kill();
                Err(fail(why))
            }
        }
    }

    /// `http://host:port`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The child process (its pid, signals, a kill).
    pub fn process(&mut self) -> &mut ServerProcess {
        &mut self.process
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) {
        self.process.stop();
    }
}

/// The URL of the first `... listening on http://ADDR ...` line of
/// `output`.
pub fn listening_url(output: &str) -> Option<String> {
    output
        .lines()
        .filter(|line| line.contains("listening on http://"))
        .find_map(|line| line.split_whitespace().find(|w| w.starts_with("http://")))
        .map(|url| url.trim_end_matches([',', ')']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_read_from_the_servers_first_line() {
        assert_eq!(
            listening_url(
                "stockade listening on http://127.0.0.1:40123 (in-memory engine, SQLite store at /x)\n"
            )
            .as_deref(),
            Some("http://127.0.0.1:40123")
        );
        assert_eq!(
            listening_url("noise\nbaseline listening on http://127.0.0.1:5\n").as_deref(),
            Some("http://127.0.0.1:5")
        );
        assert_eq!(listening_url("starting...\n"), None);
    }
}
