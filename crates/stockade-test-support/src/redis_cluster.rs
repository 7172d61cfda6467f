//! A throwaway Redis Cluster of three primaries (`redis-server
//! --cluster-enabled yes` ×3, joined by `redis-cli --cluster create`), and
//! the slot migration of a live key set.

use std::process::Command;
use std::time::Duration;

use crate::process::wait_until;
use crate::redis_server::query;
use crate::{RedisServer, TestSupportError, binaries};

/// How many primaries the cluster has (no replicas).
pub const PRIMARIES: usize = 3;

/// Three primaries sharing the 16,384 slots. Stopped on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, creates the cluster with
    /// `redis-cli --cluster create` and waits until every node reports it
    /// healthy and knows the others.
    pub fn start() -> Result<Self, TestSupportError> {
        let mut nodes = Vec::new();
        for _ in 0..PRIMARIES {
            nodes.push(RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "5000",
            ])?);
        }
        let cli = binaries::find("redis-cli", "redis-tools")?;
        let mut create = Command::new(cli);
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        run(create)?;
        let cluster = Self { nodes };
        for node in &cluster.nodes {
            let healthy = wait_until(Duration::from_secs(30), || {
                node.command(&["CLUSTER", "INFO"]).is_ok_and(|info| {
                    info.contains("cluster_state:ok")
                        && info.contains(&format!("cluster_known_nodes:{PRIMARIES}"))
                        && info.contains("cluster_slots_ok:16384")
                })
            });
            if !healthy {
                return Err(TestSupportError::NotReady {
                    server: format!("redis cluster node on port {}", node.port()),
                    seconds: 30,
                    tail: crate::process::log_tail(&node.log_path(), 20),
                    log: node.log_path(),
                });
            }
        }
        Ok(cluster)
    }

    /// `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The primaries' ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// The node listening on `port`.
    pub fn node(&self, port: u16) -> Option<&RedisServer> {
        self.nodes.iter().find(|n| n.port() == port)
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> Result<u16, TestSupportError> {
        query(
            self.nodes[0].port(),
            redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
        )
    }

    /// The port of the primary that owns `slot`, as the first node sees it.
    pub fn owner_of(&self, slot: u16) -> Result<u16, TestSupportError> {
        let nodes: String = query(self.nodes[0].port(), redis::cmd("CLUSTER").arg("NODES"))?;
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 {
                continue;
            }
            let owns = fields[8..].iter().any(|range| {
                // Migration markers look like `[slot->-id]`; only ranges count.
                let bounds = range.split_once('-').unwrap_or((range, range));
                match (bounds.0.parse::<u16>(), bounds.1.parse::<u16>()) {
                    (Ok(first), Ok(last)) => (first..=last).contains(&slot),
                    _ => false,
                }
            });
            if owns {
                let port = fields[1]
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok());
                if let Some(port) = port {
                    return Ok(port);
                }
            }
        }
        Err(TestSupportError::CommandFailed {
            command: "CLUSTER NODES".into(),
            output: format!("no node owns slot {slot}:\n{nodes}"),
        })
    }

    /// Moves `slot` from its owner to the primary on `to`, the way
    /// `redis-cli --cluster reshard` does, one key per `MIGRATE` with
    /// `pause` after each, so clients meet the slot half-migrated (`ASK`,
    /// `TRYAGAIN`) for a while: mark the slot importing on the target and
    /// migrating on the source, move every key (including keys written
    /// meanwhile), then assign the slot to the target on every node.
    /// Returns how many keys moved.
    pub fn migrate_slot(
        &self,
        slot: u16,
        to: u16,
        pause: Duration,
    ) -> Result<usize, TestSupportError> {
        let from = self.owner_of(slot)?;
        if from == to {
            return Ok(0);
        }
        let mut moved = 0;
        let id = |port: u16| -> Result<String, TestSupportError> {
            query(port, redis::cmd("CLUSTER").arg("MYID"))
        };
        let (from_id, to_id) = (id(from)?, id(to)?);
        let setslot = |port: u16, state: &str, node: &str| -> Result<(), TestSupportError> {
            query::<()>(
                port,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg(state)
                    .arg(node),
            )
        };
        setslot(to, "IMPORTING", &from_id)?;
        setslot(from, "MIGRATING", &to_id)?;
        loop {
            let keys: Vec<String> = query(
                from,
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(100),
            )?;
            if keys.is_empty() {
                break;
            }
            for key in keys {
                query::<redis::Value>(
                    from,
                    redis::cmd("MIGRATE")
                        .arg("127.0.0.1")
                        .arg(to)
                        .arg("")
                        .arg(0)
                        .arg(5_000)
                        .arg("KEYS")
                        .arg(&key),
                )?;
                moved += 1;
                std::thread::sleep(pause);
            }
        }
        // The target first, then the source, then the others (as
        // redis-cli does), so no node ever sends a client nowhere.
        setslot(to, "NODE", &to_id)?;
        setslot(from, "NODE", &to_id)?;
        for port in self.ports() {
            if port != from && port != to {
                setslot(port, "NODE", &to_id)?;
            }
        }
        Ok(moved)
    }
}

fn run(mut command: Command) -> Result<(), TestSupportError> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|e| TestSupportError::Io(format!("running {shown}"), e))?;
    if output.status.success() {
        return Ok(());
    }
    Err(TestSupportError::CommandFailed {
        command: shown,
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_primaries_share_the_slots_and_a_slot_moves_with_its_keys() {
        let cluster = RedisCluster::start().unwrap();
        let ports = cluster.ports();
        let mut owners: Vec<u16> = [0u16, 8_000, 16_383]
            .iter()
            .map(|slot| cluster.owner_of(*slot).unwrap())
            .collect();
        owners.sort_unstable();
        owners.dedup();
        assert_eq!(owners.len(), PRIMARIES, "each primary owns a third");

        let slot = cluster.slot_of("{moving}:a").unwrap();
        let from = cluster.owner_of(slot).unwrap();
        let node = cluster.node(from).unwrap();
        for key in ["{moving}:a", "{moving}:b"] {
            assert!(node.command(&["SET", key, "1"]).unwrap().starts_with("+OK"));
        }
        let to = *ports.iter().find(|p| **p != from).unwrap();
        let moved = cluster
            .migrate_slot(slot, to, Duration::from_millis(1))
            .unwrap();
        assert_eq!(moved, 2);
        assert_eq!(cluster.owner_of(slot).unwrap(), to);
        let target = cluster.node(to).unwrap();
        assert!(
            target
                .command(&["GET", "{moving}:b"])
                .unwrap()
                .contains('1')
        );
        assert!(
            node.command(&["GET", "{moving}:a"])
                .unwrap()
                .starts_with("-MOVED")
        );
    }
}
