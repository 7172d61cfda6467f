//! SimRedis's faults seen from the real client: a restart breaks the
//! connections and loses everything, a freeze holds answers, a cut link
//! holds its own connections' answers, a dropped reply hangs its
//! connection, and a lagging replica holds exactly the
//! write effects it was sent, deadlines and stream ids as the primary had
//! them.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, TimeZone, Utc};
use redis::AsyncCommands;
use stockade_core::ManualClock;
use stockade_engine::Connector;
use stockade_sim::redis::{Link, Primary, Reply, SimRedis};

fn server() -> (SimRedis, ManualClock) {
    let clock = ManualClock::new(Utc.timestamp_millis_opt(1_700_000_000_000).unwrap());
    (SimRedis::new("faults", Arc::new(clock.clone())), clock)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_restart_breaks_connections_and_loses_data_scripts_and_functions() {
    let (redis, _) = server();
    let mut connection = redis.connect().await.unwrap();
    let _: () = connection.set("k", "v").await.unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query_async(&mut connection)
        .await
        .unwrap();
    let code: &[u8] = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    assert_eq!(
        redis.execute(&[b"FUNCTION", b"LOAD", code]),
        Reply::bulk("lib")
    );
    let before = redis.run_id();

    redis.restart_empty();
    let error = connection.get::<_, Option<String>>("k").await.unwrap_err();
    assert!(
        error.is_unrecoverable_error() || error.is_connection_dropped(),
        "{error}"
    );
    assert_ne!(redis.run_id(), before);
    let mut connection = redis.connect().await.unwrap();
    assert_eq!(
        connection.get::<_, Option<String>>("k").await.unwrap(),
        None
    );
    assert_eq!(
        redis.execute(&[b"EVALSHA", sha.as_bytes(), b"0"]),
        Reply::error("NOSCRIPT No matching script. Please use EVAL.")
    );
    assert_eq!(
        redis.execute(&[b"FCALL", b"f", b"0"]),
        Reply::error("ERR Function not found")
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_frozen_server_runs_nothing_until_thawed_then_answers_in_order() {
    let (redis, _) = server();
    let mut connection = redis.connect().await.unwrap();
    redis.freeze();
    let mut pending = connection.clone();
    let incr = tokio::spawn(async move { pending.incr::<_, _, i64>("n", 1).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        redis.execute(&[b"GET", b"n"]),
        Reply::Nil,
        "nothing ran while frozen"
    );
    redis.thaw();
    assert_eq!(incr.await.unwrap().unwrap(), 1);
    assert_eq!(connection.incr::<_, _, i64>("n", 1).await.unwrap(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_cut_link_answers_nothing_until_healed_while_another_link_is_answered() {
    let (redis, _) = server();
    let primary = Primary::new(redis.clone());
    let (cut, other) = (Link::new(primary.clone()), Link::new(primary));
    let mut open = cut.connect().await.unwrap();
    assert_eq!(open.incr::<_, _, i64>("n", 1).await.unwrap(), 1);

    cut.cut(true);
    let incr = tokio::spawn(async move { open.incr::<_, _, i64>("n", 1).await });
    let opened_while_cut = cut.clone();
    let fresh = tokio::spawn(async move {
        let mut fresh = opened_while_cut.connect().await?;
        fresh.incr::<_, _, i64>("n", 1).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !incr.is_finished() && !fresh.is_finished(),
        "no reply while cut"
    );
    assert_eq!(
        redis.execute(&[b"GET", b"n"]),
        Reply::bulk("1"),
        "nothing ran while cut"
    );
    let mut meanwhile = other.connect().await.unwrap();
    assert_eq!(meanwhile.incr::<_, _, i64>("m", 1).await.unwrap(), 1);

    cut.cut(false);
    assert_eq!(incr.await.unwrap().unwrap(), 2);
    assert_eq!(fresh.await.unwrap().unwrap(), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_dropped_reply_is_applied_and_hangs_its_connection_only() {
    let (redis, _) = server();
    let mut hung = redis.connect().await.unwrap();
    hung.set_response_timeout(Duration::from_millis(200));
    redis.drop_replies(1);
    assert!(
        hung.incr::<_, _, i64>("n", 1)
            .await
            .unwrap_err()
            .is_timeout()
    );
    assert_eq!(redis.execute(&[b"GET", b"n"]), Reply::bulk("1"), "it ran");
    // What the hung connection sends next is lost, unrun.
    assert!(
        hung.incr::<_, _, i64>("n", 1)
            .await
            .unwrap_err()
            .is_timeout()
    );
    assert_eq!(redis.execute(&[b"GET", b"n"]), Reply::bulk("1"));
    let mut fresh = redis.connect().await.unwrap();
    assert_eq!(fresh.incr::<_, _, i64>("n", 1).await.unwrap(), 2);
}

#[test]
fn a_replica_replays_deadlines_and_stream_ids_as_the_primary_had_them() {
    let (redis, clock) = server();
    assert_eq!(
        redis.execute(&[b"SET", b"k", b"v", b"PX", b"1000"]),
        Reply::ok()
    );
    let id = redis.execute(&[b"XADD", b"s", b"*", b"f", b"v"]);
    assert_eq!(redis.execute(&[b"HSET", b"h", b"f", b"1"]), Reply::Int(1));
    assert_eq!(redis.execute(&[b"PEXPIRE", b"h", b"2000"]), Reply::Int(1));
    clock.advance(TimeDelta::milliseconds(400));
    let replica = redis.replica_lagging(0);
    // Deadlines are where the primary set them, not 1000 ms from now.
    assert_eq!(replica.execute(&[b"PTTL", b"k"]), Reply::Int(600));
    assert_eq!(replica.execute(&[b"PTTL", b"h"]), Reply::Int(1600));
    assert_eq!(
        replica.execute(&[b"XRANGE", b"s", b"-", b"+"]),
        Reply::Array(vec![Reply::Array(vec![id, Reply::bulks(["f", "v"])])])
    );
    assert_eq!(replica.dump(), redis.dump());
    assert_ne!(replica.run_id(), redis.run_id());
}

#[test]
fn a_replica_lags_by_write_effects_a_scripts_writes_counted_one_by_one() {
    let (redis, _) = server();
    redis.execute(&[b"SET", b"a", b"1"]);
    let writes = redis.writes();
    let script: &[u8] =
        b"redis.call('SET', 'b', '2') redis.call('GET', 'a') redis.call('INCR', 'a') return 0";
    assert_eq!(redis.execute(&[b"EVAL", script, b"0"]), Reply::Int(0));
    assert_eq!(
        redis.writes(),
        writes + 2,
        "two writes, the read not logged"
    );
    let behind_one = redis.replica_lagging(1);
    assert_eq!(behind_one.execute(&[b"GET", b"a"]), Reply::bulk("1"));
    assert_eq!(behind_one.execute(&[b"GET", b"b"]), Reply::bulk("2"));
    assert_ne!(
        redis.replica_lagging(1).run_id(),
        behind_one.run_id(),
        "every replica has its own run id"
    );
    let behind_two = redis.replica_lagging(2);
    assert_eq!(behind_two.execute(&[b"GET", b"b"]), Reply::Nil);
    // Scripts are not replicated: the replica's cache is empty.
    let sha = sha1_smol::Sha1::from(script).digest().to_string();
    assert_eq!(
        behind_one.execute(&[b"EVALSHA", sha.as_bytes(), b"0"]),
        Reply::error("NOSCRIPT No matching script. Please use EVAL.")
    );
}

#[test]
fn keys_found_expired_reach_the_replica_as_deletions() {
    let (redis, clock) = server();
    redis.execute(&[b"SET", b"k", b"v", b"PX", b"10"]);
    clock.advance(TimeDelta::milliseconds(10));
    redis.sweep();
    assert_eq!(redis.execute(&[b"EXISTS", b"k"]), Reply::Int(0));
    // Moved back, the replica would keep the key unless told it went.
    clock.advance(TimeDelta::milliseconds(-10));
    assert_eq!(
        redis.replica_lagging(0).execute(&[b"EXISTS", b"k"]),
        Reply::Int(0)
    );
}

/// A failover leaves the old primary serving its open connections: the
/// epochs it writes after it was replaced (a rebuild's, an outbox
/// entry's) are what the oracle excuses (`stockade_sim::agreement`), and
/// none it wrote before.
#[test]
fn the_epochs_a_replaced_primary_writes_after_a_failover_are_known() {
    let (old, _) = server();
    let primary = Primary::new(old.clone());
    old.execute(&[b"HSET", b"sale", b"epoch", b"1"]);
    primary.promote(old.replica_lagging(0));
    assert!(primary.deposed_epochs().is_empty());
    old.execute(&[b"HSET", b"sale", b"epoch", b"3", b"newest", b"3"]);
    old.execute(&[b"XADD", b"outbox", b"*", b"epoch", b"4", b"at", b"17"]);
    // The new primary's own writes are not the old one's.
    primary
        .server()
        .execute(&[b"HSET", b"sale", b"epoch", b"5"]);
    assert_eq!(
        primary.deposed_epochs().into_iter().collect::<Vec<_>>(),
        vec![3, 4]
    );
}
