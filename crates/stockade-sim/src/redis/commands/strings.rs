//! Strings and counters.

use super::{Call, is, parse_int, syntax_error};
use crate::redis::keyspace::{Value, pick};
use crate::redis::resp::Reply;

pub fn get(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(match call.db.typed(&key, pick::string)? {
        Some(value) => Reply::bulk(value),
        None => Reply::Nil,
    })
}

pub fn mget(call: &mut Call) -> Result<Reply, Reply> {
    let keys = call.args[1..].to_vec();
    Ok(Reply::Array(
        keys.iter()
            .map(|key| match call.db.get(key) {
                Some(Value::Str(s)) => Reply::bulk(s),
                _ => Reply::Nil,
            })
            .collect(),
    ))
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].
pub fn set(call: &mut Call) -> Result<Reply, Reply> {
    let (key, value) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let (mut nx, mut xx, mut get, mut keep_ttl) = (false, false, false, false);
    let mut deadline: Option<i64> = None;
    let mut i = 3;
    while i < call.args.len() {
        let option = call.arg(i);
        let unit: Option<i64> = if is(option, "EX") {
            Some(1000)
        } else if is(option, "PX") {
            Some(1)
        } else if is(option, "EXAT") {
            Some(-1000)
        } else if is(option, "PXAT") {
            Some(-1)
        } else {
            None
        };
        if is(option, "NX") && !xx {
            nx = true;
        } else if is(option, "XX") && !nx {
            xx = true;
        } else if is(option, "GET") {
            get = true;
        } else if is(option, "KEEPTTL") && deadline.is_none() {
            keep_ttl = true;
        } else if let Some(unit) = unit {
            if deadline.is_some() || keep_ttl || i + 1 >= call.args.len() {
                return Err(syntax_error());
            }
            let amount = call.int(i + 1)?;
            if amount <= 0 {
                return Err(Reply::error("ERR invalid expire time in 'set' command"));
            }
            let ms = amount
                .checked_mul(unit.abs())
                .ok_or_else(|| Reply::error("ERR invalid expire time in 'set' command"))?;
            deadline = Some(if unit > 0 {
                call.db.now_ms.saturating_add(ms)
            } else {
                ms
            });
            i += 1;
        } else {
            return Err(syntax_error());
        }
        i += 1;
    }
    let old = call.db.typed(&key, pick::string);
    let old = match (old, get) {
        (Err(wrongtype), true) => return Err(wrongtype),
        (Err(_), false) => None,
        (Ok(old), _) => old.cloned(),
    };
    let exists = call.db.exists(&key);
    let answer = |done: bool| match (get, done) {
        (true, _) => old.clone().map_or(Reply::Nil, Reply::Bulk),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    };
    if (nx && exists) || (xx && !exists) {
        call.rewrite = Some(Vec::new());
        return Ok(answer(false));
    }
    let kept = if keep_ttl {
        call.db.entry(&key).and_then(|e| e.expires_at)
    } else {
        None
    };
    call.db.set(&key, Value::Str(value.clone()));
    let expires_at = deadline.or(kept);
    if let Some(entry) = call.db.entry(&key) {
        entry.expires_at = expires_at;
    }
    let mut effect = vec![b"SET".to_vec(), key.clone(), value];
    if let Some(at) = expires_at {
        effect.extend([b"PXAT".to_vec(), at.to_string().into_bytes()]);
    }
    call.rewrite = Some(effect);
    Ok(answer(true))
}

fn add(call: &mut Call, by: i64) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let current = match call.db.typed(&key, pick::string)? {
        Some(value) => parse_int(value)?,
        None => 0,
    };
    let next = current
        .checked_add(by)
        .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))?;
    let bytes = next.to_string().into_bytes();
    match call.db.entry(&key) {
        Some(entry) => entry.value = Value::Str(bytes),
        None => call.db.set(&key, Value::Str(bytes)),
    }
    Ok(Reply::Int(next))
}

pub fn incr(call: &mut Call) -> Result<Reply, Reply> {
    add(call, 1)
}

pub fn decr(call: &mut Call) -> Result<Reply, Reply> {
    add(call, -1)
}

pub fn incrby(call: &mut Call) -> Result<Reply, Reply> {
    let by = call.int(2)?;
    add(call, by)
}

pub fn decrby(call: &mut Call) -> Result<Reply, Reply> {
    let by = call.int(2)?;
    let by = by
        .checked_neg()
        .ok_or_else(|| Reply::error("ERR decrement would overflow"))?;
    add(call, by)
}
