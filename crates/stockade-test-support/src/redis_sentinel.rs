//! A throwaway Sentinel-monitored Redis group: a primary, one replica and
//! three sentinels (`redis-server --sentinel`), on free loopback ports.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::process::{ServerProcess, log_tail, wait_until};
use crate::redis_server::{query, raw_command};
use crate::{RedisServer, TestSupportError, binaries, on_a_free_port};

/// The name the sentinels monitor the group under.
pub const SERVICE: &str = "mymaster";

/// How many sentinels watch the group; two must agree a primary is down.
const SENTINELS: usize = 3;

/// A primary, its replica and three sentinels. The sentinels judge a
/// primary down after 1 s of silence. Everything stops on drop.
#[derive(Debug)]
pub struct RedisSentinelGroup {
    servers: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
}

#[derive(Debug)]
struct Sentinel {
    // Dropped (stopped) before its directory is removed.
    process: ServerProcess,
    port: u16,
    dir: TempDir,
}

impl RedisSentinelGroup {
    /// Starts the primary, a replica of it, and three sentinels, and waits
    /// until the replica is in sync and every sentinel knows the replica
    /// and the other sentinels (so a failover can be ordered at once).
    pub fn start() -> Result<Self, TestSupportError> {
        let primary = RedisServer::start()?;
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()])?;
        let synced = wait_until(Duration::from_secs(20), || {
            replica
                .command(&["INFO", "replication"])
                .is_ok_and(|info| info.contains("master_link_status:up"))
        });
        if !synced {
            return Err(not_ready(
                format!("replica on port {} of {}", replica.port(), primary.port()),
                20,
                &replica.log_path(),
            ));
        }
        let mut sentinels = Vec::new();
        for _ in 0..SENTINELS {
            sentinels.push(Sentinel::start(primary.port())?);
        }
        let group = Self {
            servers: vec![primary, replica],
            sentinels,
        };
        for sentinel in &group.sentinels {
            let knows_all = wait_until(Duration::from_secs(30), || {
                sentinel_count(sentinel.port, "replicas") == Some(1)
                    && sentinel_count(sentinel.port, "sentinels") == Some(SENTINELS - 1)
            });
            if !knows_all {
                return Err(not_ready(
                    format!(
                        "sentinel on port {} (to see 1 replica and {} sentinels)",
                        sentinel.port,
                        SENTINELS - 1
                    ),
                    30,
                    &sentinel.log_path(),
                ));
            }
        }
        Ok(group)
    }

    /// `redis+sentinel://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    /// The port of the server the first sentinel names primary now.
    pub fn primary_port(&self) -> Result<u16, TestSupportError> {
        let (_host, port): (String, String) = query(
            self.sentinels[0].port,
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(SERVICE),
        )?;
        port.parse().map_err(|_| TestSupportError::CommandFailed {
            command: "SENTINEL GET-MASTER-ADDR-BY-NAME".into(),
            output: format!("{port:?} is not a port"),
        })
    }

    /// Orders a failover (`SENTINEL FAILOVER`) and waits until every
    /// sentinel names the replica primary, the new primary accepts writes
    /// and the old one is a replica (the sentinels demote it). Returns the
    /// new primary's port.
    pub fn failover(&self) -> Result<u16, TestSupportError> {
        let old = self.primary_port()?;
        let mut new = old;
        let mut moved = false;
        // A loaded machine can make the sentinels give up on the promotion
        // (-failover-abort-slave-timeout): order the failover again.
        for _attempt in 0..3 {
            self.order_failover(old)?;
            moved = wait_until(Duration::from_secs(25), || {
                let ports: Vec<Option<u16>> = self
                    .sentinels
                    .iter()
                    .map(|s| primary_named_by(s.port))
                    .collect();
                match ports.first().copied().flatten() {
                    Some(port) if port != old && ports.iter().all(|p| *p == Some(port)) => {
                        new = port;
                        raw_command(port, &["INFO", "replication"])
                            .is_ok_and(|info| info.contains("role:master"))
                    }
                    _ => false,
                }
            });
            if moved {
                break;
            }
        }
        let demoted = moved
            && wait_until(Duration::from_secs(60), || {
                raw_command(old, &["INFO", "replication"])
                    .is_ok_and(|info| info.contains("role:slave"))
            });
        if !demoted {
            return Err(not_ready(
                format!("failover away from port {old}"),
                60,
                &self.sentinels[0].log_path(),
            ));
        }
        Ok(new)
    }

    /// Sends `SENTINEL FAILOVER` once a replica of `old` is in sync,
    /// retrying while the sentinels refuse it (-NOGOODSLAVE right after a
    /// failover, before they count the demoted server a good replica;
    /// -INPROG while the last one finishes).
    fn order_failover(&self, old: u16) -> Result<(), TestSupportError> {
        let mut reply = String::new();
        let ordered = wait_until(Duration::from_secs(60), || {
            let synced = self.servers.iter().any(|s| {
                s.port() != old
                    && s.command(&["INFO", "replication"])
                        .is_ok_and(|info| info.contains("master_link_status:up"))
            });
            if !synced {
                return false;
            }
            reply = raw_command(self.sentinels[0].port, &["SENTINEL", "FAILOVER", SERVICE])
                .unwrap_or_else(|e| e.to_string());
            if reply.starts_with("+OK") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
            false
        });
        if ordered {
            return Ok(());
        }
        Err(TestSupportError::CommandFailed {
            command: format!("SENTINEL FAILOVER {SERVICE} (for 60 s)"),
            output: reply,
        })
    }

    /// The Redis server (primary or replica) listening on `port`.
    pub fn server(&self, port: u16) -> Option<&RedisServer> {
        self.servers.iter().find(|s| s.port() == port)
    }

    /// The sentinels' log files, for failure reports.
    pub fn sentinel_logs(&self) -> Vec<PathBuf> {
        self.sentinels.iter().map(Sentinel::log_path).collect()
    }
}

impl Sentinel {
    fn start(primary_port: u16) -> Result<Self, TestSupportError> {
        let dir = tempfile::Builder::new()
            .prefix("stockade-sentinel-")
            .tempdir()
            .map_err(|e| TestSupportError::Io("creating a temp dir for a sentinel".into(), e))?;
        let binary = binaries::find("redis-server", "redis-server")?;
        on_a_free_port(|port| {
            let config = dir.path().join("sentinel.conf");
            let text = format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {dir}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 10000\n\
                 sentinel parallel-syncs {SERVICE} 1\n",
                dir = dir.path().display()
            );
            std::fs::write(&config, text)
                .map_err(|e| TestSupportError::Io(format!("writing {}", config.display()), e))?;
            let log = dir.path().join(format!("sentinel-{port}.log"));
            let mut command = Command::new(&binary);
            command.arg(&config).arg("--sentinel");
            let mut process = ServerProcess::spawn(command, &log, Signal::SIGTERM)?;
            let ready = wait_until(Duration::from_secs(10), || {
                process.has_exited() || primary_named_by(port) == Some(primary_port)
            });
            if ready && !process.has_exited() {
                return Ok((process, port));
            }
            process.kill();
            // Another process may have taken the port: try another.
            Err(not_ready(format!("sentinel on port {port}"), 10, &log))
        })
        .map(|(process, port)| Self { process, port, dir })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("sentinel-{}.log", self.port))
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.process.stop();
    }
}

/// The port of the primary the sentinel on `port` names, if it answers.
fn primary_named_by(port: u16) -> Option<u16> {
    let (_host, primary): (String, String) = query(
        port,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SERVICE),
    )
    .ok()?;
    primary.parse().ok()
}

/// How many `what` (`replicas`, `sentinels`) the sentinel on `port` knows.
fn sentinel_count(port: u16, what: &str) -> Option<usize> {
    let known: Vec<redis::Value> =
        query(port, redis::cmd("SENTINEL").arg(what).arg(SERVICE)).ok()?;
    Some(known.len())
}

fn not_ready(server: String, seconds: u64, log: &Path) -> TestSupportError {
    TestSupportError::NotReady {
        server,
        seconds,
        tail: log_tail(log, 20),
        log: log.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failover_promotes_the_replica_with_the_data() {
        let group = RedisSentinelGroup::start().unwrap();
        let old = group.primary_port().unwrap();
        let primary = group.server(old).unwrap();
        assert!(
            primary
                .command(&["SET", "k", "v"])
                .unwrap()
                .starts_with("+OK")
        );
        assert!(
            primary
                .command(&["WAIT", "1", "5000"])
                .unwrap()
                .starts_with(":1")
        );

        let new = group.failover().unwrap();
        assert_ne!(new, old);
        assert_eq!(group.primary_port().unwrap(), new);
        let promoted = group.server(new).unwrap();
        assert!(promoted.command(&["GET", "k"]).unwrap().contains('v'));
        assert!(
            promoted
                .command(&["SET", "k", "w"])
                .unwrap()
                .starts_with("+OK")
        );
        assert!(group.url().ends_with("/mymaster"), "{}", group.url());
    }
}
