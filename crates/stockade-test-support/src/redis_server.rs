//! A throwaway `redis-server`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::process::{ServerProcess, log_tail, wait_until};
use crate::{TestSupportError, binaries, free_port};

/// A `redis-server` on a free loopback port, with no persistence, in a
/// temporary directory. Stopped (and the directory removed) on drop.
#[derive(Debug)]
pub struct RedisServer {
    process: ServerProcess,
    port: u16,
    extra_args: Vec<String>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a plain standalone server.
    pub fn start() -> Result<Self, TestSupportError> {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, for example
    /// `["--cluster-enabled", "yes"]`.
    pub fn start_with(extra_args: &[&str]) -> Result<Self, TestSupportError> {
        let dir = tempfile::Builder::new()
            .prefix("stockade-redis-")
            .tempdir()
            .map_err(|e| TestSupportError::Io("creating a temp dir for redis".into(), e))?;
        let extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        let mut last_error = None;
        for _attempt in 0..3 {
            let port = free_port()?;
            match spawn(dir.path(), port, &extra_args) {
                Ok(process) => {
                    return Ok(Self {
                        process,
                        port,
                        extra_args,
                        dir,
                    });
                }
                // Another process may have taken the port: try another.
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("three attempts were made"))
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `redis://` URL for the server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        log_file(self.dir.path(), self.port)
    }

    /// Kills the server with SIGKILL: every key is lost.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Kills the server and starts a new empty one on the same port: the
    /// "Redis restarted and lost its data" fault. The run id changes.
    pub fn restart(&mut self) -> Result<(), TestSupportError> {
        self.process.kill();
        // The port may linger briefly; retry for a few seconds.
        let mut last_error = None;
        for _attempt in 0..50 {
            match spawn(self.dir.path(), self.port, &self.extra_args) {
                Ok(process) => {
                    self.process = process;
                    return Ok(());
                }
                Err(e) => {
                    last_error = Some(e);
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        Err(last_error.expect("attempts were made"))
    }

    /// Suspends the server (SIGSTOP): connections stay open but nothing is
    /// answered, the "Redis unreachable or slow" fault.
    pub fn pause(&self) {
        self.process.signal(Signal::SIGSTOP);
    }

    /// Resumes a paused server (SIGCONT).
    pub fn resume(&self) {
        self.process.signal(Signal::SIGCONT);
    }

    /// Sends one command over a fresh connection and returns the raw reply,
    /// for tests that need to poke the server (`SCRIPT FLUSH`, `FLUSHALL`).
    pub fn command(&self, args: &[&str]) -> Result<String, TestSupportError> {
        raw_command(self.port, args)
    }
}

fn log_file(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("redis-{port}.log"))
}

fn spawn(dir: &Path, port: u16, extra_args: &[String]) -> Result<ServerProcess, TestSupportError> {
    let binary = binaries::find("redis-server", "redis-server")?;
    let log = log_file(dir, port);
    let mut command = Command::new(binary);
    command
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dir"])
        .arg(dir)
        .args(["--daemonize", "no", "--protected-mode", "no"])
        .args(extra_args);
    let mut process = ServerProcess::spawn(command, &log, Signal::SIGTERM)?;
    let ready = wait_until(Duration::from_secs(10), || {
        process.has_exited() || raw_command(port, &["PING"]).is_ok_and(|r| r.contains("PONG"))
    });
    if !ready || process.has_exited() {
        process.kill();
        return Err(TestSupportError::NotReady {
            server: format!("redis-server on port {port}"),
            seconds: 10,
            tail: log_tail(&log, 20),
            log,
        });
    }
    Ok(process)
}

/// Sends one RESP command and reads whatever the server answers first.
fn raw_command(port: u16, args: &[&str]) -> Result<String, TestSupportError> {
    let io = |what: &str, e| TestSupportError::Io(format!("{what} redis on port {port}"), e);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| io("connecting to", e))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| io("configuring", e))?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{}\r\n", arg.len(), arg));
    }
    stream
        .write_all(request.as_bytes())
        .map_err(|e| io("writing to", e))?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).map_err(|e| io("reading from", e))?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}
