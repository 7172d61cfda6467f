//! The real `redis` client against a SimRedis: commands, scripts,
//! Functions and errors as Redis 7 answers them, on a current-thread
//! runtime with paused time.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use redis::{AsyncCommands, ErrorKind, ServerErrorKind};
use stockade_core::ManualClock;
use stockade_sim::redis::{Reply, SimRedis};

fn server() -> (SimRedis, ManualClock) {
    let clock = ManualClock::new(Utc.timestamp_millis_opt(1_700_000_000_000).unwrap());
    (SimRedis::new("test", Arc::new(clock.clone())), clock)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_client_connects_and_reads_what_it_wrote() {
    let (redis, _) = server();
    let mut connection = redis.connect().await.unwrap();
    let _: () = connection.set("k", "v").await.unwrap();
    let value: String = connection.get("k").await.unwrap();
    assert_eq!(value, "v");
    let _: () = connection
        .hset_multiple("h", &[("a", 1), ("b", 2)])
        .await
        .unwrap();
    let all: Vec<(String, i64)> = connection.hgetall("h").await.unwrap();
    assert_eq!(all, vec![("a".into(), 1), ("b".into(), 2)]);
    let error = connection.incr::<_, _, i64>("h", 1).await.unwrap_err();
    assert_eq!(error.code(), Some("WRONGTYPE"));
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        info.contains(&format!("run_id:{}", redis.run_id())),
        "{info}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn scripts_run_in_lua_with_redis_conversions() {
    let (redis, _) = server();
    let mut connection = redis.connect().await.unwrap();
    let script = redis::Script::new(
        "redis.call('SET', KEYS[1], ARGV[1]) \
         return {redis.call('GET', KEYS[1]), 3.9, true, false, 'after nil is cut', nil, 'x'}",
    );
    let reply: redis::Value = script
        .key("s")
        .arg("hello")
        .invoke_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(
        reply,
        redis::Value::Array(vec![
            redis::Value::BulkString(b"hello".to_vec()),
            redis::Value::Int(3),
            redis::Value::Int(1),
            redis::Value::Nil,
            redis::Value::BulkString(b"after nil is cut".to_vec()),
        ])
    );
    redis.flush_scripts();
    let error = redis::cmd("EVALSHA")
        .arg(script.get_hash())
        .arg(0)
        .query_async::<redis::Value>(&mut connection)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Server(ServerErrorKind::NoScript));
    assert_eq!(
        error.to_string(),
        "NoScript: No matching script. Please use EVAL."
    );
}

#[test]
fn errors_in_scripts_read_as_redis_7_writes_them() {
    let (redis, _) = server();
    redis.execute(&[b"SET", b"s", b"text"]);
    let sha = sha1_smol::Sha1::from("return redis.call('INCR', 's')")
        .digest()
        .to_string();
    assert_eq!(
        redis.execute(&[b"EVAL", b"return redis.call('INCR', 's')", b"0"]),
        Reply::error(format!(
            "ERR value is not an integer or out of range script: {sha}, on @user_script:1."
        ))
    );
    assert_eq!(
        redis.execute(&[b"EVAL", b"return redis.pcall('INCR', 's')", b"0"]),
        Reply::error("ERR value is not an integer or out of range")
    );
    let body = b"\nerror('boom')";
    let sha = sha1_smol::Sha1::from(&body[..]).digest().to_string();
    assert_eq!(
        redis.execute(&[b"EVAL", body, b"0"]),
        Reply::error(format!(
            "ERR user_script:2: boom script: {sha}, on @user_script:2."
        ))
    );
    // The arity check of redis.call, then the command's own.
    assert_eq!(
        redis.execute(&[b"EVAL", b"return redis.pcall('HSET', 'h', 'f')", b"0"]),
        Reply::error("ERR Wrong number of args calling Redis command from script")
    );
    assert_eq!(
        redis.execute(&[
            b"EVAL",
            b"return redis.pcall('HSET', 'h', 'f', 'v', 'g')",
            b"0"
        ]),
        Reply::error("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(
        redis.execute(&[b"EVAL", b"return redis.error_reply('My Error')", b"0"]),
        Reply::error("My Error")
    );
    assert_eq!(
        redis.execute(&[b"EVAL", b"return redis.status_reply('FINE')", b"0"]),
        Reply::Status("FINE".into())
    );
    assert!(matches!(
        redis.execute(&[b"EVAL", b"x = 1", b"0"]),
        Reply::Error(e) if e.contains("Attempt to modify a readonly table")
    ));
}

#[test]
fn functions_load_list_and_run() {
    let (redis, _) = server();
    let code: &[u8] = b"#!lua name=lib\n\
        redis.register_function('put', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n\
        redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n";
    assert_eq!(
        redis.execute(&[b"FUNCTION", b"LOAD", code]),
        Reply::bulk("lib")
    );
    assert_eq!(
        redis.execute(&[b"FUNCTION", b"LOAD", code]),
        Reply::error("ERR Library 'lib' already exists")
    );
    assert_eq!(
        redis.execute(&[b"FUNCTION", b"LOAD", b"REPLACE", code]),
        Reply::bulk("lib")
    );
    assert_eq!(
        redis.execute(&[b"FCALL", b"put", b"1", b"k", b"v"]),
        Reply::ok()
    );
    assert_eq!(
        redis.execute(&[b"FCALL_RO", b"peek", b"1", b"k"]),
        Reply::bulk("v")
    );
    assert_eq!(
        redis.execute(&[b"FCALL_RO", b"put", b"1", b"k", b"w"]),
        Reply::error("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        redis.execute(&[b"FCALL", b"nope", b"0"]),
        Reply::error("ERR Function not found")
    );
    let Reply::Array(libraries) = redis.execute(&[b"FUNCTION", b"LIST", b"LIBRARYNAME", b"li*"])
    else {
        panic!("FUNCTION LIST answers an array");
    };
    assert_eq!(libraries.len(), 1);
    assert_eq!(
        redis.execute(&[b"FUNCTION", b"LIST", b"LIBRARYNAME", b"x"]),
        Reply::Array(vec![])
    );
    assert_eq!(redis.execute(&[b"FUNCTION", b"FLUSH"]), Reply::ok());
    assert_eq!(
        redis.execute(&[b"FCALL", b"put", b"1", b"k", b"v"]),
        Reply::error("ERR Function not found")
    );
}

#[test]
fn deadlines_follow_the_injected_clock() {
    let (redis, clock) = server();
    assert_eq!(
        redis.execute(&[b"SET", b"k", b"v", b"PX", b"100"]),
        Reply::ok()
    );
    assert_eq!(redis.execute(&[b"PTTL", b"k"]), Reply::Int(100));
    clock.advance(chrono::TimeDelta::milliseconds(99));
    assert_eq!(redis.execute(&[b"GET", b"k"]), Reply::bulk("v"));
    clock.advance(chrono::TimeDelta::milliseconds(1));
    assert_eq!(redis.execute(&[b"GET", b"k"]), Reply::Nil);
    assert_eq!(redis.execute(&[b"PTTL", b"k"]), Reply::Int(-2));
    assert_eq!(
        redis.execute(&[b"TIME"]),
        Reply::bulks(["1700000000", "100000"])
    );
}

#[test]
fn math_random_draws_what_redis_draws_from_each_start() {
    let (redis, _) = server();
    let draw = b"return {math.random(1000000), math.random(1000000)}";
    // What a freshly started Redis 7 answers.
    assert_eq!(
        redis.execute(&[b"EVAL", draw, b"0"]),
        Reply::Array(vec![Reply::Int(396465), Reply::Int(840486)])
    );
    assert_eq!(
        redis.execute(&[
            b"EVAL",
            b"math.randomseed(7) return math.random(1000000)",
            b"0"
        ]),
        Reply::Int(266445)
    );
    redis.restart_empty();
    assert_eq!(
        redis.execute(&[b"EVAL", draw, b"0"]),
        Reply::Array(vec![Reply::Int(396465), Reply::Int(840486)])
    );
}

#[test]
fn commands_redis_has_and_the_simulation_lacks_say_so() {
    let (redis, _) = server();
    let Reply::Error(text) = redis.execute(&[b"SUBSCRIBE", b"channel"]) else {
        panic!("SUBSCRIBE must be refused");
    };
    assert!(text.starts_with("ERR SUBSCRIBE is not simulated"), "{text}");
    assert_eq!(
        redis.execute(&[b"NOSUCH", b"a"]),
        Reply::error("ERR unknown command 'NOSUCH', with args beginning with: 'a' ")
    );
    // Nothing was changed by either.
    assert_eq!(redis.writes(), 0);
}
