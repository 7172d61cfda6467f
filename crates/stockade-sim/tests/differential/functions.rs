//! FUNCTION LOAD, FCALL, FCALL_RO, LIST and DELETE, right and wrong, sent
//! to both servers: libraries, their errors at load time and at run time.

use std::sync::Arc;

use chrono::Utc;
use stockade_core::ManualClock;
use stockade_sim::redis::SimRedis;

use crate::both;

/// Library sources: good ones, and one of each way a load fails.
const LOADS: &[&str] = &[
    "#!lua name=lib\n\
     redis.register_function('put', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n\
     redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}",
    "#!lua name=lib\nredis.register_function('put', function() return 1 end)",
    "return 1",
    "#!lua name=lib2\nredis.register_function('put', function() return 1 end)",
    "#!lua name=lib3\nlocal x = 1",
    "#!lua name=lib4\nredis.register_function('bad-name', function() return 1 end)",
    "#!lua name=lib5\nredis.register_function{function_name='f5', callback=function() return 1 end, flags={'nope'}}",
    "#!lua name=lib6\nredis.call('SET','a','b')",
    "#!lua name=lib7 foo=bar\nredis.register_function('f7', function() return 1 end)",
    "#!js name=lib8\nx",
    "#!lua name=lib9\nredis.register_function('f9', function() error('boom') end)",
    "#!lua name=lib10\nredis.register_function('f10', function() return 1 end, 'extra')",
    "#!lua name=lib11\nredis.register_function('f11', function() return 1 end)\nredis.register_function('f11', function() return 2 end)",
    "#!lua name=lib12\nredis.register_function{function_name='f12', callback=function() return 1 end, nope=1}",
    "#!lua name=lib13\nredis.register_function('f13', 'not a function')",
    "#!lua name=lib14\nerror('at load')",
    "#!lua name=lib15\nredis.register_function('f15' function() end)",
    "#!lua name=bad-lib\nredis.register_function('f16', function() return 1 end)",
    "#!lua\nredis.register_function('f17', function() return 1 end)",
    "#!lua name=lib18\nredis.register_function('f18', function() return KEYS end)",
    "#!lua name=lib19\nlocal r = redis\nredis.register_function('f19', function() return r.call('GET', 'k') end)",
];

/// Calls and other FUNCTION commands after the loads.
const CALLS: &[&[&str]] = &[
    &["FCALL", "put", "1", "k", "v"],
    &["FCALL_RO", "peek", "1", "k"],
    &["FCALL_RO", "put", "1", "k", "w"],
    &["FCALL", "nope", "0"],
    &["FCALL", "f9", "0"],
    &["FCALL", "put", "2", "k"],
    &["FCALL", "put", "-1"],
    &["FCALL", "put", "x"],
    &["FUNCTION", "LIST", "LIBRARYNAME", "lib9"],
    &["FUNCTION", "LIST", "LIBRARYNAME", "nothing*"],
    &["EVAL", "return 1", "1", "k"],
    &["FCALL", "f18", "1", "k"],
    &["FCALL", "f19", "0"],
    &["FUNCTION", "DELETE", "nolib"],
    &["FUNCTION", "DELETE", "lib9"],
    &["FCALL", "f9", "0"],
    &["FUNCTION", "FLUSH"],
    &["FCALL", "put", "1", "k", "v"],
];

#[tokio::test(flavor = "current_thread")]
async fn libraries_load_fail_and_run_as_on_redis() {
    let sim = SimRedis::new("functions", Arc::new(ManualClock::new(Utc::now())));
    let mut pair = both(&sim).await;
    for (i, code) in LOADS.iter().enumerate() {
        let args = vec![
            b"FUNCTION".to_vec(),
            b"LOAD".to_vec(),
            code.as_bytes().to_vec(),
        ];
        pair.same(&args, false, &format!("load {i}")).await;
    }
    for (i, call) in CALLS.iter().enumerate() {
        let args: Vec<Vec<u8>> = call.iter().map(|a| a.as_bytes().to_vec()).collect();
        pair.same(&args, false, &format!("call {i}")).await;
    }
    pair.same_keyspace(false, "after the calls").await;
}
