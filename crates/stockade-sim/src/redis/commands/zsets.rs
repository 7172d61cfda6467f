//! Sorted sets.

use super::{Call, format_float, is, parse_float, syntax_error};
use crate::redis::keyspace::{Value, ZSet, pick};
use crate::redis::resp::Reply;

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub fn zadd(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while i < call.args.len() {
        let flag = call.arg(i);
        match () {
            _ if is(flag, "NX") => nx = true,
            _ if is(flag, "XX") => xx = true,
            _ if is(flag, "GT") => gt = true,
            _ if is(flag, "LT") => lt = true,
            _ if is(flag, "CH") => ch = true,
            _ if is(flag, "INCR") => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &call.args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    if nx && xx {
        return Err(Reply::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (gt && lt) || (nx && (gt || lt)) {
        return Err(Reply::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(Reply::error(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let parsed: Vec<(f64, Vec<u8>)> = pairs
        .chunks(2)
        .map(|p| parse_float(&p[0]).map(|s| (s, p[1].clone())))
        .collect::<Result<_, _>>()?;
    if call.db.typed(&key, pick::zset)?.is_none() && xx {
        call.rewrite = Some(Vec::new());
        return Ok(if incr { Reply::Nil } else { Reply::Int(0) });
    }
    let zset = call
        .db
        .typed_or_insert(&key, Value::ZSet(ZSet::default()), pick::zset)?;
    let (mut added, mut changed) = (0, 0);
    let mut incr_reply = Reply::Nil;
    for (score, member) in parsed {
        let old = zset.score(&member);
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = match (incr, old) {
            (true, Some(old)) => old + score,
            _ => score,
        };
        if new.is_nan() {
            return Err(Reply::error("ERR resulting score is not a number (NaN)"));
        }
        if let Some(old) = old {
            if (gt && new <= old) || (lt && new >= old) {
                continue;
            }
            if new != old {
                changed += 1;
            }
        } else {
            added += 1;
        }
        zset.insert(member, new);
        incr_reply = Reply::bulk(format_float(new));
    }
    call.db.drop_if_empty(&key);
    if incr {
        return Ok(incr_reply);
    }
    Ok(Reply::Int(if ch { added + changed } else { added }))
}

pub fn zrem(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let members = call.args[2..].to_vec();
    let Some(zset) = call.db.typed(&key, pick::zset)? else {
        return Ok(Reply::Int(0));
    };
    let removed = members.iter().filter(|m| zset.remove(m)).count();
    call.db.drop_if_empty(&key);
    Ok(Reply::Int(removed as i64))
}

pub fn zscore(call: &mut Call) -> Result<Reply, Reply> {
    let (key, member) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let score = call
        .db
        .typed(&key, pick::zset)?
        .and_then(|z| z.score(&member));
    Ok(score.map_or(Reply::Nil, |s| Reply::bulk(format_float(s))))
}

/// ZRANK key member [WITHSCORE].
pub fn zrank(call: &mut Call) -> Result<Reply, Reply> {
    let (key, member) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let with_score = match call.args.len() {
        3 => false,
        4 if is(call.arg(3), "WITHSCORE") => true,
        _ => return Err(syntax_error()),
    };
    let zset = call.db.typed(&key, pick::zset)?;
    let found = zset.and_then(|z| {
        z.iter()
            .position(|(m, _)| m == member.as_slice())
            .map(|at| (at, z.score(&member)))
    });
    Ok(match (found, with_score) {
        (None, true) => Reply::NilArray,
        (None, false) => Reply::Nil,
        (Some((at, _)), false) => Reply::Int(at as i64),
        (Some((at, score)), true) => Reply::Array(vec![
            Reply::Int(at as i64),
            Reply::bulk(format_float(score.unwrap_or(0.0))),
        ]),
    })
}

pub fn zcard(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Int(
        call.db.typed(&key, pick::zset)?.map_or(0, |z| z.len()) as i64,
    ))
}

/// ZRANGE key start stop [REV] [WITHSCORES], by rank only.
pub fn zrange(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let (mut rev, mut with_scores) = (false, false);
    for option in &call.args[4..] {
        if is(option, "REV") {
            rev = true;
        } else if is(option, "WITHSCORES") {
            with_scores = true;
        } else {
            // BYSCORE, BYLEX and LIMIT are not simulated.
            return Err(syntax_error());
        }
    }
    let (start, stop) = (call.int(2)?, call.int(3)?);
    let Some(zset) = call.db.typed(&key, pick::zset)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = zset.len() as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return Ok(Reply::Array(Vec::new()));
    }
    let members: Vec<(&[u8], f64)> = if rev {
        zset.iter().rev().collect()
    } else {
        zset.iter().collect()
    };
    let mut out = Vec::new();
    for (member, score) in &members[start as usize..=stop as usize] {
        out.push(Reply::bulk(member));
        if with_scores {
            out.push(Reply::bulk(format_float(*score)));
        }
    }
    Ok(Reply::Array(out))
}

/// A score bound: `(5` exclusive, `5` inclusive, `-inf`, `+inf`.
fn bound(bytes: &[u8]) -> Result<(f64, bool), Reply> {
    let bad = || Reply::error("ERR min or max is not a float");
    match bytes.strip_prefix(b"(") {
        Some(rest) => parse_float(rest).map(|v| (v, true)).map_err(|_| bad()),
        None => parse_float(bytes).map(|v| (v, false)).map_err(|_| bad()),
    }
}

pub fn zremrangebyscore(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let (min, max) = (bound(call.arg(2))?, bound(call.arg(3))?);
    let Some(zset) = call.db.typed(&key, pick::zset)? else {
        return Ok(Reply::Int(0));
    };
    let inside = |s: f64| {
        (if min.1 { s > min.0 } else { s >= min.0 }) && (if max.1 { s < max.0 } else { s <= max.0 })
    };
    let doomed: Vec<Vec<u8>> = zset
        .iter()
        .filter(|(_, s)| inside(*s))
        .map(|(m, _)| m.to_vec())
        .collect();
    for member in &doomed {
        zset.remove(member);
    }
    call.db.drop_if_empty(&key);
    Ok(Reply::Int(doomed.len() as i64))
}

pub fn zpopmin(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let count = match call.args.len() {
        2 => 1,
        3 => usize::try_from(call.int(2)?)
            .map_err(|_| Reply::error("ERR value is out of range, must be positive"))?,
        _ => return Err(syntax_error()),
    };
    let Some(zset) = call.db.typed(&key, pick::zset)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let popped: Vec<(Vec<u8>, f64)> = zset
        .iter()
        .take(count)
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    let mut out = Vec::new();
    for (member, score) in popped {
        zset.remove(&member);
        out.push(Reply::Bulk(member));
        out.push(Reply::bulk(format_float(score)));
    }
    call.db.drop_if_empty(&key);
    Ok(Reply::Array(out))
}
