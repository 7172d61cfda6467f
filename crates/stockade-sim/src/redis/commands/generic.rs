//! Commands on keys whatever their type, and small server commands that
//! scripts may call too (TIME, PING, PUBLISH).

use super::{Call, is, syntax_error};
use crate::redis::resp::Reply;

pub fn del(call: &mut Call) -> Result<Reply, Reply> {
    let keys = call.args[1..].to_vec();
    Ok(Reply::Int(
        keys.iter().filter(|k| call.db.remove(k)).count() as i64,
    ))
}

pub fn exists(call: &mut Call) -> Result<Reply, Reply> {
    let keys = call.args[1..].to_vec();
    Ok(Reply::Int(
        keys.iter().filter(|k| call.db.exists(k)).count() as i64,
    ))
}

pub fn type_of(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Status(
        call.db.get(&key).map_or("none", |v| v.type_name()).into(),
    ))
}

pub fn keys(call: &mut Call) -> Result<Reply, Reply> {
    let pattern = call.arg(1).to_vec();
    Ok(Reply::bulks(
        call.db.keys().into_iter().filter(|k| glob(&pattern, k)),
    ))
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: every key in one
/// answer, with cursor 0 (a COUNT is a hint Redis may exceed too).
pub fn scan(call: &mut Call) -> Result<Reply, Reply> {
    if call.arg(1) != b"0" {
        call.int(1)
            .map_err(|_| Reply::error("ERR invalid cursor"))?;
    }
    let (mut pattern, mut kind) = (b"*".to_vec(), None);
    let mut i = 2;
    while i < call.args.len() {
        let value = call.args.get(i + 1).ok_or_else(syntax_error)?.clone();
        match () {
            _ if is(call.arg(i), "MATCH") => pattern = value,
            _ if is(call.arg(i), "COUNT") => {
                if super::parse_int(&value)? < 1 {
                    return Err(syntax_error());
                }
            }
            _ if is(call.arg(i), "TYPE") => kind = Some(value),
            _ => return Err(syntax_error()),
        }
        i += 2;
    }
    let mut found = Vec::new();
    for key in call.db.keys() {
        let type_name = call.db.get(&key).map_or("none", |v| v.type_name());
        if glob(&pattern, &key)
            && kind
                .as_ref()
                .is_none_or(|k| k.eq_ignore_ascii_case(type_name.as_bytes()))
        {
            found.push(key);
        }
    }
    Ok(Reply::Array(vec![Reply::bulk("0"), Reply::bulks(found)]))
}

/// Counts expired keys not yet deleted too, as Redis does.
pub fn dbsize(call: &mut Call) -> Result<Reply, Reply> {
    Ok(Reply::Int(call.db.len() as i64))
}

/// Sets `key`'s deadline to `at` (unix ms); a deadline past deletes it.
fn expire_at(call: &mut Call, at: i64) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    if !call.db.exists(&key) {
        call.rewrite = Some(Vec::new());
        return Ok(Reply::Int(0));
    }
    if at <= call.db.now_ms {
        call.db.remove(&key);
        call.rewrite = Some(vec![b"DEL".to_vec(), key]);
    } else {
        if let Some(entry) = call.db.entry(&key) {
            entry.expires_at = Some(at);
        }
        call.rewrite = Some(vec![
            b"PEXPIREAT".to_vec(),
            key,
            at.to_string().into_bytes(),
        ]);
    }
    Ok(Reply::Int(1))
}

fn relative(call: &mut Call, unit: i64, name: &str) -> Result<Reply, Reply> {
    let amount = call.int(2)?;
    let at = amount
        .checked_mul(unit)
        .and_then(|ms| ms.checked_add(call.db.now_ms))
        .ok_or_else(|| Reply::error(format!("ERR invalid expire time in '{name}' command")))?;
    expire_at(call, at)
}

pub fn expire(call: &mut Call) -> Result<Reply, Reply> {
    relative(call, 1000, "expire")
}

pub fn pexpire(call: &mut Call) -> Result<Reply, Reply> {
    relative(call, 1, "pexpire")
}

pub fn pexpireat(call: &mut Call) -> Result<Reply, Reply> {
    let at = call.int(2)?;
    expire_at(call, at)
}

pub fn persist(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let had = call
        .db
        .entry(&key)
        .and_then(|e| e.expires_at.take())
        .is_some();
    if !had {
        call.rewrite = Some(Vec::new());
    }
    Ok(Reply::Int(had.into()))
}

fn remaining_ms(call: &mut Call) -> i64 {
    let key = call.arg(1).to_vec();
    let now = call.db.now_ms;
    match call.db.entry(&key) {
        None => -2,
        Some(entry) => entry.expires_at.map_or(-1, |at| (at - now).max(0)),
    }
}

pub fn ttl(call: &mut Call) -> Result<Reply, Reply> {
    let ms = remaining_ms(call);
    // Redis rounds the seconds left to the nearest.
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

pub fn pttl(call: &mut Call) -> Result<Reply, Reply> {
    Ok(Reply::Int(remaining_ms(call)))
}

pub fn flushall(call: &mut Call) -> Result<Reply, Reply> {
    match call.args.get(1) {
        None => {}
        Some(mode) if call.args.len() == 2 && (is(mode, "SYNC") || is(mode, "ASYNC")) => {}
        Some(_) => return Err(syntax_error()),
    }
    call.db.clear();
    call.rewrite = Some(vec![b"FLUSHALL".to_vec()]);
    Ok(Reply::ok())
}

/// PUBLISH: no client of the simulated server subscribes, so nobody
/// receives it.
pub fn publish(_call: &mut Call) -> Result<Reply, Reply> {
    Ok(Reply::Int(0))
}

pub fn ping(call: &mut Call) -> Result<Reply, Reply> {
    match call.args.len() {
        1 => Ok(Reply::Status("PONG".into())),
        2 => Ok(Reply::bulk(call.arg(1))),
        _ => Err(super::wrong_arity("ping")),
    }
}

pub fn echo(call: &mut Call) -> Result<Reply, Reply> {
    Ok(Reply::bulk(call.arg(1)))
}

pub fn time(call: &mut Call) -> Result<Reply, Reply> {
    let us = call.db.now_us;
    Ok(Reply::bulks([
        us.div_euclid(1_000_000).to_string(),
        us.rem_euclid(1_000_000).to_string(),
    ]))
}

/// Redis's glob: `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`.
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob(rest, &text[1..]),
        Some((b'[', rest)) => {
            let Some((&first, tail)) = text.split_first() else {
                return false;
            };
            let (negate, mut class) = match rest.split_first() {
                Some((b'^', after)) => (true, after),
                _ => (false, rest),
            };
            let mut matched = false;
            loop {
                match class {
                    [] => break,
                    [b']', after @ ..] => {
                        class = after;
                        break;
                    }
                    [b'\\', c, after @ ..] => {
                        matched |= *c == first;
                        class = after;
                    }
                    [a, b'-', b, after @ ..] if *b != b']' => {
                        let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                        matched |= (lo..=hi).contains(&first);
                        class = after;
                    }
                    [c, after @ ..] => {
                        matched |= *c == first;
                        class = after;
                    }
                }
            }
            matched != negate && glob(class, tail)
        }
        Some((b'\\', [c, rest @ ..])) => text.first() == Some(c) && glob(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob(rest, &text[1..]),
    }
}
