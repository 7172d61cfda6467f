//! Sets.

use std::collections::BTreeSet;

use super::Call;
use crate::redis::keyspace::{Value, pick};
use crate::redis::resp::Reply;

pub fn sadd(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let members = call.args[2..].to_vec();
    let set = call
        .db
        .typed_or_insert(&key, Value::Set(BTreeSet::new()), pick::set)?;
    Ok(Reply::Int(
        members
            .into_iter()
            .filter(|m| set.insert(m.clone()))
            .count() as i64,
    ))
}

pub fn srem(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let members = call.args[2..].to_vec();
    let Some(set) = call.db.typed(&key, pick::set)? else {
        return Ok(Reply::Int(0));
    };
    let removed = members.iter().filter(|m| set.remove(m.as_slice())).count();
    call.db.drop_if_empty(&key);
    Ok(Reply::Int(removed as i64))
}

pub fn sismember(call: &mut Call) -> Result<Reply, Reply> {
    let (key, member) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let found = call
        .db
        .typed(&key, pick::set)?
        .is_some_and(|s| s.contains(&member));
    Ok(Reply::Int(found.into()))
}

pub fn smembers(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::bulks(
        call.db
            .typed(&key, pick::set)?
            .into_iter()
            .flat_map(|s| s.iter().cloned()),
    ))
}

pub fn scard(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Int(
        call.db.typed(&key, pick::set)?.map_or(0, |s| s.len()) as i64,
    ))
}
