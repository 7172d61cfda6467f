//! The data commands: the table of names, arities and handlers, and the
//! dispatch both clients and scripts (`redis.call`) go through. Commands
//! about the server itself (scripts, Functions, INFO) are in `server`.

mod generic;
pub use generic::glob;
mod hashes;
mod lists;
mod sets;
mod streams;
mod strings;
mod zsets;

use super::keyspace::Db;
use super::resp::Reply;

/// One call of a data command.
pub struct Call<'a> {
    /// The keyspace, its clock set for this command.
    pub db: &'a mut Db,
    /// The command's name (as sent) and arguments.
    pub args: &'a [Vec<u8>],
    /// What the log should replay instead of `args` (absolute deadlines
    /// for relative ones, the id XADD chose for `*`); empty when it
    /// changed nothing.
    pub rewrite: Option<Vec<Vec<u8>>>,
}

impl Call<'_> {
    /// Argument `i` (0 is the command's name).
    pub fn arg(&self, i: usize) -> &[u8] {
        &self.args[i]
    }

    /// Argument `i` as an integer, or Redis's error for one that is not.
    pub fn int(&self, i: usize) -> Result<i64, Reply> {
        parse_int(&self.args[i])
    }
}

type Handler = fn(&mut Call) -> Result<Reply, Reply>;

/// A command: its name, arity (Redis's convention: `n` exactly, `-n` at
/// least), whether it writes, and its handler.
struct Spec {
    name: &'static str,
    arity: i32,
    write: bool,
    handler: Handler,
}

const fn spec(name: &'static str, arity: i32, write: bool, handler: Handler) -> Spec {
    Spec {
        name,
        arity,
        write,
        handler,
    }
}

/// Every data command, by lowercase name.
const COMMANDS: &[Spec] = &[
    spec("get", 2, false, strings::get),
    spec("set", -3, true, strings::set),
    spec("incr", 2, true, strings::incr),
    spec("decr", 2, true, strings::decr),
    spec("incrby", 3, true, strings::incrby),
    spec("decrby", 3, true, strings::decrby),
    spec("mget", -2, false, strings::mget),
    spec("hget", 3, false, hashes::hget),
    spec("hset", -4, true, hashes::hset),
    spec("hmset", -4, true, hashes::hmset),
    spec("hsetnx", 4, true, hashes::hsetnx),
    spec("hmget", -3, false, hashes::hmget),
    spec("hgetall", 2, false, hashes::hgetall),
    spec("hdel", -3, true, hashes::hdel),
    spec("hincrby", 4, true, hashes::hincrby),
    spec("hexists", 3, false, hashes::hexists),
    spec("hlen", 2, false, hashes::hlen),
    spec("hkeys", 2, false, hashes::hkeys),
    spec("hvals", 2, false, hashes::hvals),
    spec("rpush", -3, true, lists::rpush),
    spec("lpush", -3, true, lists::lpush),
    spec("lpop", -2, true, lists::lpop),
    spec("rpop", -2, true, lists::rpop),
    spec("llen", 2, false, lists::llen),
    spec("lrange", 4, false, lists::lrange),
    spec("lindex", 3, false, lists::lindex),
    spec("lset", 4, true, lists::lset),
    spec("lrem", 4, true, lists::lrem),
    spec("lpos", -3, false, lists::lpos),
    spec("sadd", -3, true, sets::sadd),
    spec("srem", -3, true, sets::srem),
    spec("sismember", 3, false, sets::sismember),
    spec("smembers", 2, false, sets::smembers),
    spec("scard", 2, false, sets::scard),
    spec("zadd", -4, true, zsets::zadd),
    spec("zrem", -3, true, zsets::zrem),
    spec("zscore", 3, false, zsets::zscore),
    spec("zrank", -3, false, zsets::zrank),
    spec("zcard", 2, false, zsets::zcard),
    spec("zrange", -4, false, zsets::zrange),
    spec("zremrangebyscore", 4, true, zsets::zremrangebyscore),
    spec("zpopmin", -2, true, zsets::zpopmin),
    spec("xadd", -5, true, streams::xadd),
    spec("xlen", 2, false, streams::xlen),
    spec("xrange", -4, false, streams::xrange),
    spec("xdel", -3, true, streams::xdel),
    spec("del", -2, true, generic::del),
    spec("unlink", -2, true, generic::del),
    spec("exists", -2, false, generic::exists),
    spec("type", 2, false, generic::type_of),
    spec("keys", 2, false, generic::keys),
    spec("scan", -2, false, generic::scan),
    spec("dbsize", 1, false, generic::dbsize),
    spec("expire", 3, true, generic::expire),
    spec("pexpire", 3, true, generic::pexpire),
    spec("pexpireat", 3, true, generic::pexpireat),
    spec("persist", 2, true, generic::persist),
    spec("ttl", 2, false, generic::ttl),
    spec("pttl", 2, false, generic::pttl),
    spec("flushall", -1, true, generic::flushall),
    spec("publish", 3, false, generic::publish),
    spec("ping", -1, false, generic::ping),
    spec("echo", 2, false, generic::echo),
    spec("time", 1, false, generic::time),
];

/// What a data command did: its reply, and the writes to log (lazily
/// expired keys as DEL, then the command's own effect).
pub struct Outcome {
    /// The reply.
    pub reply: Reply,
    /// Effects for the replication log, in order.
    pub effects: Vec<Vec<Vec<u8>>>,
}

/// Whether data command `name` writes (refused in read-only scripts).
pub fn is_write(name: &[u8]) -> bool {
    find(name).is_some_and(|spec| spec.write)
}

fn find(name: &[u8]) -> Option<&'static Spec> {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    COMMANDS.iter().find(|spec| spec.name == name)
}

/// Runs data command `args` (name first) on `db`, whose clock the caller
/// has set. `None` if no data command has that name.
pub fn dispatch(db: &mut Db, args: &[Vec<u8>]) -> Option<Outcome> {
    let spec = find(&args[0])?;
    if !arity_ok(spec, args) {
        return Some(Outcome {
            reply: wrong_arity(spec.name),
            effects: Vec::new(),
        });
    }
    let mut call = Call {
        db,
        args,
        rewrite: None,
    };
    let reply = (spec.handler)(&mut call).unwrap_or_else(|error| error);
    let rewrite = call.rewrite.take();
    let mut effects: Vec<Vec<Vec<u8>>> = db
        .expired
        .drain(..)
        .map(|key| vec![b"DEL".to_vec(), key])
        .collect();
    if spec.write && !reply.is_error() {
        match rewrite {
            // The command changed nothing (SET NX on an existing key).
            Some(nothing) if nothing.is_empty() => {}
            Some(effect) => effects.push(effect),
            None => effects.push(args.to_vec()),
        }
    }
    Some(Outcome { reply, effects })
}

/// Whether `args` has as many words as the command takes (Redis's first
/// check, before the command itself reads them).
fn arity_ok(spec: &Spec, args: &[Vec<u8>]) -> bool {
    if spec.arity >= 0 {
        args.len() == spec.arity as usize
    } else {
        args.len() >= spec.arity.unsigned_abs() as usize
    }
}

/// Whether data command `args` (name first) passes the arity check; None
/// if there is no such command.
pub fn has_arity(args: &[Vec<u8>]) -> Option<bool> {
    find(&args[0]).map(|spec| arity_ok(spec, args))
}

/// `ERR wrong number of arguments for 'get' command`.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

/// `ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

/// Redis's strict integer reading: an optional minus, no leading zeros,
/// no spaces, within i64.
pub fn parse_int(bytes: &[u8]) -> Result<i64, Reply> {
    let not_int = || Reply::error("ERR value is not an integer or out of range");
    let text = std::str::from_utf8(bytes).map_err(|_| not_int())?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && text == "0" || !digits.starts_with('0'));
    if !canonical {
        return Err(not_int());
    }
    text.parse::<i64>().map_err(|_| not_int())
}

/// A float as Redis reads scores (`inf`, `-inf`, `+inf` included; NaN
/// refused).
pub fn parse_float(bytes: &[u8]) -> Result<f64, Reply> {
    let text = std::str::from_utf8(bytes).unwrap_or("");
    let value = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        other if other.trim() == other && !other.is_empty() => {
            other.parse::<f64>().ok().unwrap_or(f64::NAN)
        }
        _ => f64::NAN,
    };
    if value.is_nan() {
        return Err(Reply::error("ERR value is not a valid float"));
    }
    Ok(value)
}

/// A float as Redis writes it in replies (`%.17g`, shortest form).
pub fn format_float(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    if value == value.trunc() && value.abs() < 1e17 {
        return format!("{}", value as i64);
    }
    format!("{value}")
}

/// Whether `arg` is `word`, ignoring case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_as_strictly_as_redis_reads_them() {
        assert_eq!(parse_int(b"0"), Ok(0));
        assert_eq!(parse_int(b"-12"), Ok(-12));
        for bad in [
            &b"-0"[..],
            b"01",
            b" 1",
            b"1.0",
            b"",
            b"-",
            b"99999999999999999999",
        ] {
            assert!(parse_int(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn arity_is_checked_before_the_handler_runs() {
        let mut db = Db::default();
        let outcome = dispatch(&mut db, &[b"GET".to_vec()]).unwrap();
        assert_eq!(
            outcome.reply,
            Reply::error("ERR wrong number of arguments for 'get' command")
        );
        assert!(outcome.effects.is_empty());
        assert!(dispatch(&mut db, &[b"NOPE".to_vec()]).is_none());
    }
}
