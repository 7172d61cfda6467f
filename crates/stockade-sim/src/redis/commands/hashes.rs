//! Hashes.

use indexmap::IndexMap;

use super::{Call, parse_int, wrong_arity};
use crate::redis::keyspace::{Value, pick};
use crate::redis::resp::Reply;

fn empty() -> Value {
    Value::Hash(IndexMap::new())
}

pub fn hget(call: &mut Call) -> Result<Reply, Reply> {
    let (key, field) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    Ok(
        match call.db.typed(&key, pick::hash)?.and_then(|h| h.get(&field)) {
            Some(value) => Reply::bulk(value),
            None => Reply::Nil,
        },
    )
}

fn set_pairs(call: &mut Call, name: &str) -> Result<i64, Reply> {
    if !call.args.len().is_multiple_of(2) {
        return Err(wrong_arity(name));
    }
    let key = call.arg(1).to_vec();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = call.args[2..]
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    let hash = call.db.typed_or_insert(&key, empty(), pick::hash)?;
    let mut added = 0;
    for (field, value) in pairs {
        if hash.insert(field, value).is_none() {
            added += 1;
        }
    }
    Ok(added)
}

pub fn hset(call: &mut Call) -> Result<Reply, Reply> {
    set_pairs(call, "hset").map(Reply::Int)
}

pub fn hmset(call: &mut Call) -> Result<Reply, Reply> {
    set_pairs(call, "hmset").map(|_| Reply::ok())
}

pub fn hsetnx(call: &mut Call) -> Result<Reply, Reply> {
    let (key, field, value) = (
        call.arg(1).to_vec(),
        call.arg(2).to_vec(),
        call.arg(3).to_vec(),
    );
    let hash = call.db.typed_or_insert(&key, empty(), pick::hash)?;
    if hash.contains_key(&field) {
        call.rewrite = Some(Vec::new());
        return Ok(Reply::Int(0));
    }
    hash.insert(field, value);
    Ok(Reply::Int(1))
}

pub fn hmget(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let fields = &call.args[2..];
    let hash = call.db.typed(&key, pick::hash)?;
    Ok(Reply::Array(
        fields
            .iter()
            .map(|f| {
                hash.as_ref()
                    .and_then(|h| h.get(f))
                    .map_or(Reply::Nil, Reply::bulk)
            })
            .collect(),
    ))
}

pub fn hgetall(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let hash = call.db.typed(&key, pick::hash)?;
    Ok(Reply::bulks(hash.into_iter().flat_map(|h| {
        h.iter().flat_map(|(f, v)| [f.clone(), v.clone()])
    })))
}

pub fn hkeys(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let hash = call.db.typed(&key, pick::hash)?;
    Ok(Reply::bulks(
        hash.into_iter().flat_map(|h| h.keys().cloned()),
    ))
}

pub fn hvals(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let hash = call.db.typed(&key, pick::hash)?;
    Ok(Reply::bulks(
        hash.into_iter().flat_map(|h| h.values().cloned()),
    ))
}

pub fn hdel(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let fields = call.args[2..].to_vec();
    let Some(hash) = call.db.typed(&key, pick::hash)? else {
        return Ok(Reply::Int(0));
    };
    let removed = fields
        .iter()
        .filter(|f| hash.shift_remove(f.as_slice()).is_some())
        .count();
    call.db.drop_if_empty(&key);
    Ok(Reply::Int(removed as i64))
}

pub fn hincrby(call: &mut Call) -> Result<Reply, Reply> {
    let (key, field) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let by = call.int(3)?;
    let current = match call.db.typed(&key, pick::hash)?.and_then(|h| h.get(&field)) {
        Some(value) => {
            parse_int(value).map_err(|_| Reply::error("ERR hash value is not an integer"))?
        }
        None => 0,
    };
    let next = current
        .checked_add(by)
        .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))?;
    let hash = call.db.typed_or_insert(&key, empty(), pick::hash)?;
    hash.insert(field, next.to_string().into_bytes());
    Ok(Reply::Int(next))
}

pub fn hexists(call: &mut Call) -> Result<Reply, Reply> {
    let (key, field) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let found = call
        .db
        .typed(&key, pick::hash)?
        .is_some_and(|h| h.contains_key(&field));
    Ok(Reply::Int(found.into()))
}

pub fn hlen(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Int(
        call.db.typed(&key, pick::hash)?.map_or(0, |h| h.len()) as i64,
    ))
}
