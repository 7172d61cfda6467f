//! A throwaway `redis-server`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::process::{ServerProcess, log_tail, wait_until};
use crate::{TestSupportError, binaries, on_a_free_port, on_its_port_again};

/// The RDB file `redis-server` loads at start from its `--dir` (Redis's
/// default `dbfilename`).
const DATA_FILE: &str = "dump.rdb";

/// Where [`RedisServer::save_snapshot`] keeps its copy of the data.
const SNAPSHOT_FILE: &str = "snapshot.rdb";

/// A `redis-server` on a free loopback port, with no persistence, in a
/// temporary directory. Stopped (and the directory removed) on drop.
#[derive(Debug)]
pub struct RedisServer {
    process: ServerProcess,
    /// The `redis-server` it runs (the one on `PATH`, or Redis 6).
    binary: PathBuf,
    port: u16,
    extra_args: Vec<String>,
    dir: TempDir,
    snapshot: Option<PathBuf>,
}

impl RedisServer {
    /// Starts a plain standalone server.
    pub fn start() -> Result<Self, TestSupportError> {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, for example
    /// `["--cluster-enabled", "yes"]`.
    pub fn start_with(extra_args: &[&str]) -> Result<Self, TestSupportError> {
        Self::start_binary(binaries::find("redis-server", "redis-server")?, extra_args)
    }

    /// Starts a Redis 6 server ([`binaries::redis6`]): a server without
    /// Functions, for the tests of the scripts' EVALSHA mode there.
    pub fn start_redis6() -> Result<Self, TestSupportError> {
        Self::start_binary(binaries::redis6()?, &[])
    }

    fn start_binary(binary: PathBuf, extra_args: &[&str]) -> Result<Self, TestSupportError> {
        let dir = tempfile::Builder::new()
            .prefix("stockade-redis-")
            .tempdir()
            .map_err(|e| TestSupportError::Io("creating a temp dir for redis".into(), e))?;
        let extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        on_a_free_port(|port| {
            let process = spawn(&binary, dir.path(), port, &extra_args)?;
            Ok((process, port))
        })
        .map(|(process, port)| Self {
            process,
            binary,
            port,
            extra_args,
            dir,
            snapshot: None,
        })
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
        self.restart_process()
    }

    /// Kills the server and starts a Redis 6 ([`binaries::redis6`]) empty on
    /// the same port: the "primary replaced by an older Redis" fault (a
    /// failover during a Redis downgrade). Restarts keep Redis 6.
    pub fn replace_with_redis6(&mut self) -> Result<(), TestSupportError> {
        self.binary = binaries::redis6()?;
        self.process.kill();
        self.restart_process()
    }

    /// Starts the (killed) server again on the same port.
    fn restart_process(&mut self) -> Result<(), TestSupportError> {
        on_its_port_again(|| {
            self.process = spawn(&self.binary, self.dir.path(), self.port, &self.extra_args)?;
            Ok(())
        })
    }

    /// Writes the current data to disk now (`SAVE`) and keeps that RDB file
    /// aside, for [`restart_from_snapshot`](Self::restart_from_snapshot).
    ///
    /// The file is moved out of the data file's place, so a plain
    /// [`restart`](Self::restart) still starts empty. A later snapshot
    /// replaces this one.
    pub fn save_snapshot(&mut self) -> Result<PathBuf, TestSupportError> {
        let reply = self.command(&["SAVE"])?;
        if !reply.starts_with("+OK") {
            return Err(TestSupportError::CommandFailed {
                command: format!("SAVE on redis port {}", self.port),
                output: reply,
            });
        }
        let data = self.dir.path().join(DATA_FILE);
        let snapshot = self.dir.path().join(SNAPSHOT_FILE);
        std::fs::rename(&data, &snapshot).map_err(|e| {
            TestSupportError::Io(
                format!("moving {} aside to {}", data.display(), snapshot.display()),
                e,
            )
        })?;
        self.snapshot = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// Kills the server (SIGKILL) and starts it again on the same port from
    /// the data saved by [`save_snapshot`](Self::save_snapshot): the "Redis
    /// restarted with stale data" fault (an old RDB, a lagging replica
    /// promoted). Every change since the snapshot is lost; the run id
    /// changes. The snapshot is kept, so this can be repeated.
    pub fn restart_from_snapshot(&mut self) -> Result<(), TestSupportError> {
        let Some(snapshot) = self.snapshot.clone() else {
            return Err(TestSupportError::Io(
                "restarting redis from a snapshot".into(),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no snapshot: call save_snapshot() first",
                ),
            ));
        };
        self.process.kill();
        let data = self.dir.path().join(DATA_FILE);
        std::fs::copy(&snapshot, &data).map_err(|e| {
            TestSupportError::Io(
                format!("copying {} to {}", snapshot.display(), data.display()),
                e,
            )
        })?;
        let started = self.restart_process();
        // Loaded (the server answered PING): remove the file so that a later
        // plain restart starts empty again.
        let _ = std::fs::remove_file(&data);
        started
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

    /// Calls so far of the named commands (lower case, e.g. `xrange`),
    /// summed, from `INFO commandstats`: how tests count round trips.
    pub fn calls(&self, commands: &[&str]) -> Result<u64, TestSupportError> {
        let stats = self.command(&["INFO", "commandstats"])?;
        Ok(stats
            .lines()
            .filter_map(|line| {
                let (name, stat) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
                if !commands.contains(&name) {
                    return None;
                }
                stat.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum())
    }

    /// Script calls so far, however scripts run: `FCALL` (Functions, on
    /// Redis 7), `EVALSHA` and `EVAL`.
    pub fn script_calls(&self) -> Result<u64, TestSupportError> {
        self.calls(&["fcall", "evalsha", "eval"])
    }
}

fn log_file(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("redis-{port}.log"))
}

fn spawn(
    binary: &Path,
    dir: &Path,
    port: u16,
    extra_args: &[String],
) -> Result<ServerProcess, TestSupportError> {
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

/// Sends `command` to the server on `port` over a fresh connection and
/// parses the reply.
pub(crate) fn query<T: redis::FromRedisValue>(
    port: u16,
    command: &redis::Cmd,
) -> Result<T, TestSupportError> {
    send(port, command, Duration::from_secs(10)).and_then(|reply| {
        reply.map_err(|e| TestSupportError::CommandFailed {
            command: format!("{command:?} on redis port {port}"),
            output: e.to_string(),
        })
    })
}

/// One command over a fresh connection: the server's reply (an error reply
/// included), or why the server could not be asked.
fn send<T: redis::FromRedisValue>(
    port: u16,
    command: &redis::Cmd,
    read_timeout: Duration,
) -> Result<redis::RedisResult<T>, TestSupportError> {
    let failed = |e: redis::RedisError| TestSupportError::CommandFailed {
        command: format!("{command:?} on redis port {port}"),
        output: e.to_string(),
    };
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).map_err(failed)?;
    let mut connection = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(failed)?;
    connection
        .set_read_timeout(Some(read_timeout))
        .map_err(failed)?;
    Ok(command.query(&mut connection))
}

/// Sends one command and returns its reply as the server wrote it (RESP:
/// `+OK`, `$-1` for nil, `-ERR ...` for an error reply), for tests that
/// poke the server and read its answer as text.
pub(crate) fn raw_command(port: u16, args: &[&str]) -> Result<String, TestSupportError> {
    let mut command = redis::cmd(args.first().copied().unwrap_or("PING"));
    for arg in args.iter().skip(1) {
        command.arg(*arg);
    }
    match send::<redis::Value>(port, &command, Duration::from_secs(5))? {
        Ok(value) => Ok(resp(&value)),
        Err(error) if error.kind() == redis::ErrorKind::Io => {
            Err(TestSupportError::CommandFailed {
                command: format!("{args:?} on redis port {port}"),
                output: error.to_string(),
            })
        }
        // An error reply as the server wrote it: `-MOVED 3999 127.0.0.1:7001`.
        Err(error) => Ok(match (error.code(), error.detail()) {
            (Some(code), Some(detail)) => format!("-{code} {detail}\r\n"),
            (Some(code), None) => format!("-{code}\r\n"),
            _ => format!("-{error}\r\n"),
        }),
    }
}

/// `value` written back as RESP.
fn resp(value: &redis::Value) -> String {
    use redis::Value;
    match value {
        Value::Nil => "$-1\r\n".to_owned(),
        Value::Int(n) => format!(":{n}\r\n"),
        Value::BulkString(bytes) => {
            format!("${}\r\n{}\r\n", bytes.len(), String::from_utf8_lossy(bytes))
        }
        Value::SimpleString(text) => format!("+{text}\r\n"),
        Value::Okay => "+OK\r\n".to_owned(),
        Value::Array(items) => {
            let mut text = format!("*{}\r\n", items.len());
            for item in items {
                text.push_str(&resp(item));
            }
            text
        }
        other => format!("{other:?}\r\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::RedisServer;

    #[test]
    fn replies_read_as_the_server_wrote_them() {
        let redis = RedisServer::start().unwrap();
        assert_eq!(redis.command(&["SET", "k", "v"]).unwrap(), "+OK\r\n");
        assert_eq!(redis.command(&["GET", "k"]).unwrap(), "$1\r\nv\r\n");
        assert_eq!(redis.command(&["GET", "none"]).unwrap(), "$-1\r\n");
        assert_eq!(redis.command(&["INCR", "n"]).unwrap(), ":1\r\n");
        let error = redis.command(&["INCR", "k"]).unwrap();
        assert!(error.starts_with("-ERR "), "{error}");
    }

    #[test]
    fn a_restart_from_a_snapshot_brings_back_the_old_data() {
        let mut redis = RedisServer::start().unwrap();
        let run = |redis: &RedisServer, args: &[&str]| redis.command(args).unwrap();
        let run_id = |redis: &RedisServer| {
            let info = run(redis, &["INFO", "server"]);
            let line = info.lines().find(|l| l.starts_with("run_id:"));
            line.expect("INFO server names the run id").to_owned()
        };
        assert!(run(&redis, &["SET", "k", "old"]).starts_with("+OK"));
        redis.save_snapshot().unwrap();
        assert!(run(&redis, &["SET", "k", "new"]).starts_with("+OK"));
        assert!(run(&redis, &["SET", "later", "1"]).starts_with("+OK"));
        let before = run_id(&redis);

        redis.restart_from_snapshot().unwrap();
        assert!(run(&redis, &["GET", "k"]).contains("old"));
        assert!(run(&redis, &["EXISTS", "later"]).starts_with(":0"));
        assert_ne!(
            run_id(&redis),
            before,
            "a restarted server has a new run id"
        );

        // A plain restart still loses everything.
        redis.restart().unwrap();
        assert!(run(&redis, &["EXISTS", "k"]).starts_with(":0"));
    }
}
