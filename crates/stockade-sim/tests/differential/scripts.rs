//! EVAL's corners, sent to both servers: compile errors, errors deep in
//! a script, the conversion of every kind of Lua value, the `redis`
//! library's helpers used right and wrong. (`redis.setresp(3)` is left
//! out: the simulated server refuses RESP3, in scripts too.)

use std::sync::Arc;

use chrono::Utc;
use stockade_core::ManualClock;
use stockade_sim::redis::SimRedis;

use crate::both;

/// Scripts run with KEYS = {"a", "b"} and ARGV = {"1", "x"}.
const SCRIPTS: &[&str] = &[
    "return",
    "return nil",
    "return 0.5",
    "return -0.5",
    "return -3.99",
    "return 1e300",
    "return 2^53 + 1",
    "return {}",
    "return {1, {2, {3, 'deep'}}, {}}",
    "return {1, nil, 3}",
    "return {1, {err='inner error'}, 3}",
    "return {1, {ok='inner status'}, 3}",
    "return {err='top error'}",
    "return {err='-DASHED error'}",
    "return {ok='FINE'}",
    "return {x=1, y=2}",
    "return {true, false, 'a\\0b'}",
    "return redis.status_reply('S')",
    "return redis.error_reply('-CODE with text')",
    "return redis.error_reply('')",
    "return redis.sha1hex('')",
    "return redis.sha1hex(123)",
    "return KEYS[1] .. ARGV[2] .. #KEYS .. #ARGV",
    "return redis.call('SET', KEYS[1], ARGV[1])",
    "return redis.call('INCRBY', KEYS[1], 2.0)",
    "return redis.call('INCRBY', KEYS[1], 0.5)",
    "return redis.call('GET', KEYS[1])",
    "return redis.call('GET', KEYS[2])",
    "return redis.call('HGETALL', KEYS[2])",
    "redis.call('RPUSH', KEYS[2], 'x') return redis.call('GET', KEYS[2])",
    "return redis.pcall('GET', KEYS[2])",
    "return redis.call()",
    "return redis.call(nil)",
    "return redis.call('GET', nil)",
    "return redis.call(true)",
    "local t = redis.pcall('NOPE') return t.err",
    "local function f() return redis.call('INCR', KEYS[2]) end\nlocal function g() return f() end\nreturn g()",
    "local function f() error('deep') end\n\nreturn f()",
    "error({err='raised table'})",
    "error('plain', 0)",
    "error()",
    "local ok, e = pcall(redis.call, 'INCR', KEYS[1]) return {tostring(ok), e}",
    "local ok, e = pcall(function() return redis.call('HGET', KEYS[1], 'f') end) return {tostring(ok), e}",
    "local ok, e = pcall(error, {err='a table'}) return e",
    "local ok, e = pcall(error, {nothing=1}) return type(e)",
    "local ok, e = pcall(error, 'a string') return e",
    "return {pcall(function(a, b) return a + b, 'two' end, 1, 2)}",
    "return 1 +",
    "return nosuch()",
    "local x = {} x.y.z = 1",
    "redis.setresp(2) return 'resp2'",
    "redis.log(redis.LOG_WARNING, 'logged') return redis.LOG_WARNING",
    "return tostring(redis.REPL_ALL) .. type(redis.set_repl)",
    "return type(os)",
    "return math.floor(10 / 3)",
    "return string.format('%05.1f|%s', 3.14159, 'x')",
    "return table.concat({1, 2, 3}, ',')",
    "return unpack({1, 2, 3})",
    "return select('#', 1, 2, 3)",
    "return tonumber('0x10') + tonumber('  5  ')",
    "return 10 % 3 .. ' ' .. -7 % 3",
    "return #'hello' .. string.rep('ab', 3)",
];

#[tokio::test(flavor = "current_thread")]
async fn scripts_convert_fail_and_help_as_on_redis() {
    let sim = SimRedis::new("scripts", Arc::new(ManualClock::new(Utc::now())));
    let mut pair = both(&sim).await;
    for (i, body) in SCRIPTS.iter().enumerate() {
        let args: Vec<Vec<u8>> = ["EVAL", body, "2", "a", "b", "1", "x"]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        pair.same(&args, false, &format!("script {i}")).await;
    }
    for args in [
        &["EVAL", "return 1"][..],
        &["EVAL", "return 1", "x"],
        &["EVAL", "return 1", "3", "a"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "ffff",
        ],
        &["SCRIPT", "LOAD", "return +"],
        &["SCRIPT", "NOPE"],
        &["SCRIPT", "FLUSH", "NOW"],
    ] {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        pair.same(&args, false, "script administration").await;
    }
    pair.same_keyspace(false, "after the scripts").await;
}
