//! The scripts' Functions library on highly available Redis: it replicates
//! to a Sentinel group's replica, so the promoted one already has it after
//! a failover; on a Cluster it is loaded on every primary, and reloaded on
//! one that lost it. Each test starts its own throwaway servers.

mod functions_support;

use std::time::{Duration, Instant};

use functions_support::{buy, calls, connect, has_library, spec};
use stockade_core::{Engine, PurchaseOutcome};
use stockade_engine::{RedisEngine, ScriptsMode};
use stockade_test_support::{RedisCluster, RedisSentinelGroup};

/// The port of the replica of the primary on `primary`.
fn replica_of(group: &RedisSentinelGroup, primary: u16) -> u16 {
    let info = group
        .server(primary)
        .unwrap()
        .command(&["INFO", "replication"])
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("slave0:"))
        .and_then(|fields| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix("port="))
        })
        .and_then(|port| port.trim().parse().ok())
        .unwrap_or_else(|| panic!("the primary names its replica: {info}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_already_has_the_library() {
    let group = RedisSentinelGroup::start().unwrap();
    let old = group.primary_port().unwrap();
    let replica = replica_of(&group, old);
    let engine = connect(&group.url(), ScriptsMode::Auto).await;
    assert!(engine.connection().scripts().functions());
    engine.create_sale(&spec("fo", 100)).await.unwrap();
    for user in ["a", "b", "c"] {
        assert!(matches!(
            buy(&engine, "fo", user).await.unwrap(),
            PurchaseOutcome::Purchased { .. }
        ));
    }
    let name = RedisEngine::library().name();
    let primary = group.server(old).unwrap();
    assert!(
        primary
            .command(&["WAIT", "1", "5000"])
            .unwrap()
            .starts_with(":1")
    );
    // FUNCTION LOAD went to the primary only: the replica got it by
    // replication.
    let standby = group.server(replica).unwrap();
    assert!(has_library(standby, name), "the replica holds the library");
    let loads_before = calls(standby, "function|load");

    let new = tokio::task::block_in_place(|| group.failover().unwrap());
    assert_eq!(new, replica);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        n += 1;
        match buy(&engine, "fo", &format!("after{n}")).await {
            Ok(PurchaseOutcome::Purchased { .. }) => break,
            Ok(other) => panic!("a purchase after the failover: {other:?}"),
            Err(error) => assert!(
                error.is_retryable(),
                "a failover must only cause retryable errors: {error}"
            ),
        }
        assert!(
            Instant::now() < deadline,
            "no purchase within 30 s of the failover"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for user in ["d", "e"] {
        buy(&engine, "fo", user).await.unwrap();
    }
    let promoted = group.server(new).unwrap();
    assert!(
        calls(promoted, "fcall") >= 3,
        "the purchases ran as Functions there"
    );
    assert_eq!(
        calls(promoted, "function|load"),
        loads_before,
        "the promoted replica needed no reload"
    );
    let left = promoted
        .command(&["HGET", "stockade:{fo}:sale", "remaining"])
        .unwrap();
    assert!(left.contains(&(100 - 3 - 1 - 2).to_string()), "{left}");
}

/// A sale id whose keys live on the primary listening on `port`.
fn sale_on(cluster: &RedisCluster, port: u16, base: &str) -> String {
    (0..1_000)
        .map(|n| format!("{base}{n}"))
        .find(|sale| {
            cluster
                .owner_of(cluster.slot_of(&format!("{{{sale}}}")).unwrap())
                .unwrap()
                == port
        })
        .expect("one of 1,000 ids hashes to each primary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_library_is_on_every_primary_and_reloaded_where_lost() {
    let cluster = RedisCluster::start().unwrap();
    let engine = connect(&cluster.url(), ScriptsMode::Auto).await;
    assert!(engine.connection().scripts().functions());
    let ports = cluster.ports();
    let first = sale_on(&cluster, ports[0], "c");
    // One call loads the library: on every primary at once.
    engine.create_sale(&spec(&first, 10)).await.unwrap();
    let name = RedisEngine::library().name();
    for port in &ports {
        assert!(
            has_library(cluster.node(*port).unwrap(), name),
            "the primary on {port} holds the library"
        );
    }
    // A primary that lost it (flushed, restarted empty) gets it back on the
    // first call that meets it there.
    let lost = ports[1];
    let node = cluster.node(lost).unwrap();
    assert!(
        node.command(&["FUNCTION", "FLUSH"])
            .unwrap()
            .starts_with("+OK")
    );
    assert!(!has_library(node, name));
    let there = sale_on(&cluster, lost, "lost");
    engine.create_sale(&spec(&there, 10)).await.unwrap();
    for user in ["a", "b"] {
        assert!(matches!(
            buy(&engine, &there, user).await.unwrap(),
            PurchaseOutcome::Purchased { .. }
        ));
    }
    assert!(has_library(node, name));
    assert!(calls(node, "fcall") >= 3);
    assert_eq!(calls(node, "evalsha"), 0);
}
