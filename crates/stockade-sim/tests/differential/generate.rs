//! Random commands and random small EVAL scripts over a small key space,
//! drawn from a seeded ChaCha stream so every run sends the same ones.

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

/// The key space: few keys, so types collide and WRONGTYPE comes up.
pub const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4"];
const FIELDS: &[&str] = &["f0", "f1", "f2"];
const VALUES: &[&str] = &["0", "1", "-3", "10", "abc", "2.5", "007"];
const SCORES: &[&str] = &["1", "2", "2.5", "-1", "+inf", "x"];

fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from.choose(rng).expect("a non-empty list")
}

/// One random data command (name first), `key` its first key. `stream`
/// counts XADD ids so that explicit ids mostly grow.
pub fn command(rng: &mut ChaCha8Rng, key: &str, stream: &mut u64) -> Vec<String> {
    let k = key.to_owned();
    let f = |rng: &mut ChaCha8Rng| pick(rng, FIELDS).to_owned();
    let v = |rng: &mut ChaCha8Rng| pick(rng, VALUES).to_owned();
    let n = |rng: &mut ChaCha8Rng, lo: i64, hi: i64| rng.random_range(lo..=hi).to_string();
    let words: Vec<String> = match rng.random_range(0..58) {
        0 => vec!["GET".into(), k],
        1 => {
            let mut c = vec!["SET".into(), k, v(rng)];
            for option in ["NX", "XX", "GET", "KEEPTTL"] {
                if rng.random_bool(0.15) {
                    c.push(option.into());
                }
            }
            if rng.random_bool(0.2) {
                c.push(pick(rng, &["EX", "PX"]).into());
                c.push(pick(rng, &["-1", "0", "50000", "100000"]).into());
            }
            c
        }
        2 => vec!["INCR".into(), k],
        3 => vec!["DECR".into(), k],
        4 => vec!["INCRBY".into(), k, v(rng)],
        5 => vec!["HGET".into(), k, f(rng)],
        6 => {
            let mut c = vec!["HSET".into(), k];
            for _ in 0..rng.random_range(1..=2) {
                c.push(f(rng));
                c.push(v(rng));
            }
            c
        }
        7 => vec!["HMGET".into(), k, f(rng), f(rng)],
        8 => vec!["HGETALL".into(), k],
        9 => vec!["HDEL".into(), k, f(rng), f(rng)],
        10 => vec!["HINCRBY".into(), k, f(rng), v(rng)],
        11 => vec!["HEXISTS".into(), k, f(rng)],
        12 => vec!["HLEN".into(), k],
        13 => vec!["RPUSH".into(), k, v(rng), v(rng)],
        14 => vec!["LPUSH".into(), k, v(rng)],
        15 => vec!["LPOP".into(), k],
        16 => vec!["RPOP".into(), k, n(rng, 0, 3)],
        17 => vec!["LRANGE".into(), k, n(rng, -3, 2), n(rng, -2, 4)],
        18 => vec!["LREM".into(), k, n(rng, -2, 2), v(rng)],
        19 => vec!["LSET".into(), k, n(rng, -3, 3), v(rng)],
        20 => {
            let mut c = vec!["LPOS".into(), k, v(rng)];
            if rng.random_bool(0.3) {
                c.extend(["RANK".into(), n(rng, -2, 2)]);
            }
            if rng.random_bool(0.3) {
                c.extend(["COUNT".into(), n(rng, 0, 2)]);
            }
            c
        }
        21 => vec!["LLEN".into(), k],
        22 => vec!["SADD".into(), k, v(rng), v(rng)],
        23 => vec!["SREM".into(), k, v(rng)],
        24 => vec!["SISMEMBER".into(), k, v(rng)],
        25 => vec!["SCARD".into(), k],
        26 => vec!["SMEMBERS".into(), k],
        27 => {
            let mut c = vec!["ZADD".into(), k];
            for flag in ["NX", "XX", "GT", "CH"] {
                if rng.random_bool(0.1) {
                    c.push(flag.into());
                }
            }
            for _ in 0..rng.random_range(1..=2) {
                c.push(pick(rng, SCORES).into());
                c.push(v(rng));
            }
            c
        }
        28 => vec!["ZREM".into(), k, v(rng)],
        29 => vec!["ZSCORE".into(), k, v(rng)],
        30 => vec!["ZRANK".into(), k, v(rng)],
        31 => vec!["ZCARD".into(), k],
        32 => vec![
            "ZRANGE".into(),
            k,
            "0".into(),
            "-1".into(),
            "WITHSCORES".into(),
        ],
        33 => vec!["ZPOPMIN".into(), k, n(rng, 0, 2)],
        34 => vec![
            "ZREMRANGEBYSCORE".into(),
            k,
            pick(rng, &["-inf", "(1", "2"]).into(),
            pick(rng, &["+inf", "2", "(2.5"]).into(),
        ],
        35 => vec!["DEL".into(), k, pick(rng, KEYS).into()],
        36 => vec!["EXISTS".into(), k, pick(rng, KEYS).into()],
        37 => vec!["TYPE".into(), k],
        38 => vec![
            "PEXPIRE".into(),
            k,
            pick(rng, &["0", "-5", "100000", "5000000"]).into(),
        ],
        39 => vec!["PERSIST".into(), k],
        40 => vec!["PTTL".into(), k],
        41 => {
            *stream += rng.random_range(0..=2);
            vec!["XADD".into(), k, format!("{}-1", *stream), f(rng), v(rng)]
        }
        42 => vec!["XRANGE".into(), k, "-".into(), "+".into()],
        43 => vec!["MGET".into(), k, pick(rng, KEYS).into()],
        44 => vec!["HSETNX".into(), k, f(rng), v(rng)],
        45 => vec![pick(rng, &["HKEYS", "HVALS"]).into(), k],
        46 => vec!["LINDEX".into(), k, n(rng, -3, 3)],
        47 => vec![
            "ZADD".into(),
            k,
            "INCR".into(),
            pick(rng, SCORES).into(),
            v(rng),
        ],
        48 => vec![
            "XDEL".into(),
            k,
            format!("{}-1", rng.random_range(0..=*stream)),
        ],
        49 => {
            let from = pick(rng, &["-", "0", "(1-1", "2"]).to_owned();
            vec![
                "XRANGE".into(),
                k,
                from,
                "+".into(),
                "COUNT".into(),
                n(rng, 0, 2),
            ]
        }
        50 => vec!["EXPIRE".into(), k, pick(rng, &["0", "100", "-1"]).into()],
        51 => vec!["TTL".into(), k],
        52 => vec![
            "SET".into(),
            k,
            v(rng),
            pick(rng, &["EXAT", "PXAT"]).into(),
            pick(rng, &["1", "9999999999", "0"]).into(),
        ],
        53 => vec![
            "KEYS".into(),
            pick(rng, &["*", "k[0-2]", "k?", "x*", "k[^1]"]).into(),
        ],
        // DBSIZE is left out: Redis counts expired keys until its active
        // expiry, which runs on its own clock, reclaims them.
        54 => vec!["ECHO".into(), v(rng)],
        // Wrong arities and a command no server has.
        55 => pick(
            rng,
            &[
                "GET",
                "HSET k0 f",
                "HSET k0 f v f2",
                "ZADD k1",
                "LPOS",
                "XADD k2 1-1",
                "INCRBY k0",
            ],
        )
        .split(' ')
        .map(str::to_owned)
        .collect(),
        56 => vec!["NOSUCHCOMMAND".into(), k],
        _ => vec!["XLEN".into(), k],
    };
    words
}

/// A small script: a few `redis.call`/`redis.pcall` of random commands
/// on KEYS[1] and KEYS[2], then one of several kinds of return value.
pub fn script(rng: &mut ChaCha8Rng, stream: &mut u64) -> String {
    let mut body = String::new();
    let calls = rng.random_range(1..=3);
    for i in 1..=calls {
        let key_slot = rng.random_range(1..=2);
        let mut words = command(rng, "KEY", stream);
        // Unordered answers are compared sorted, and the time left of a
        // deadline clamped, outside scripts only.
        if words[0] == "SMEMBERS" {
            words[0] = "SCARD".into();
        }
        if words[0] == "PTTL" || words[0] == "TTL" {
            words[0] = "TYPE".into();
        }
        if words[0] == "KEYS" {
            words = vec!["EXISTS".into(), "KEY".into()];
        }
        let args: Vec<String> = words
            .iter()
            .map(|w| {
                if w == "KEY" {
                    format!("KEYS[{key_slot}]")
                } else {
                    format!("'{w}'")
                }
            })
            .collect();
        let how = if rng.random_bool(0.7) {
            "pcall"
        } else {
            "call"
        };
        body.push_str(&format!("local r{i} = redis.{how}({})\n", args.join(", ")));
    }
    let all: Vec<String> = (1..=calls).map(|i| format!("r{i}")).collect();
    // Now and then, something a script may do wrong or oddly.
    body.push_str(match rng.random_range(0..12) {
        0 => "local x = redis.pcall('SET', KEYS[1], {})\n",
        1 => "local x = redis.pcall('NOSUCH', KEYS[1])\n",
        2 => "local x = redis.pcall('GET')\n",
        3 => "local x = redis.call('SET', KEYS[2], 3.5)\n",
        4 => "if redis.sha1hex('abc') ~= 'a9993e364706816aba3e25717850c26c9cd0d89d' then return 'bad sha1' end\n",
        5 => "local x = undefined_global\n",
        6 => "local x = redis.call('EVAL', 'return 1', 0)\n",
        7 => "if r1 == false then error('r1 was nil') end\n",
        _ => "",
    });
    body.push_str(match rng.random_range(0..6) {
        0 => "return r1\n",
        1 => "return {1.9, -2.5, true, false, 'x', nil, 'never'}\n",
        2 => "return redis.status_reply('FINE')\n",
        3 => "return redis.error_reply('MINE went wrong')\n",
        4 => "local n = tonumber(type(r1) == 'string' and r1 or '') return n and n * 2.5 or type(r1)\n",
        _ => "",
    });
    if !body.contains("return") {
        body.push_str(&format!("return {{{}}}\n", all.join(", ")));
    }
    body
}
