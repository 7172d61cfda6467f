//! Streams, as far as the outboxes use them: XADD, XRANGE, XLEN, XDEL.

use super::{Call, is, syntax_error, wrong_arity};
use crate::redis::keyspace::{Stream, Value, pick};
use crate::redis::resp::Reply;

use crate::redis::keyspace::StreamId as Id;

fn invalid_id() -> Reply {
    Reply::error("ERR Invalid stream ID specified as stream command argument")
}

/// `ms-seq`, or `ms` with `missing_seq` as its sequence.
fn parse_id(bytes: &[u8], missing_seq: u64) -> Result<Id, Reply> {
    let text = std::str::from_utf8(bytes).map_err(|_| invalid_id())?;
    let (ms, seq) = match text.split_once('-') {
        Some((ms, seq)) => (ms, Some(seq)),
        None => (text, None),
    };
    let ms = ms.parse::<u64>().map_err(|_| invalid_id())?;
    let seq = match seq {
        Some(seq) => seq.parse::<u64>().map_err(|_| invalid_id())?,
        None => missing_seq,
    };
    Ok((ms, seq))
}

fn show(id: Id) -> Vec<u8> {
    format!("{}-{}", id.0, id.1).into_bytes()
}

/// XADD key [NOMKSTREAM] [MAXLEN [=] n] <* | id> field value [...].
pub fn xadd(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let (mut nomkstream, mut maxlen) = (false, None);
    let mut i = 2;
    loop {
        let word = call.arg(i);
        if is(word, "NOMKSTREAM") {
            nomkstream = true;
            i += 1;
        } else if is(word, "MAXLEN") {
            i += 1;
            if call.args.get(i).is_some_and(|w| w == b"=") {
                i += 1;
            }
            let n = call.args.get(i).ok_or_else(syntax_error)?;
            maxlen = Some(
                usize::try_from(super::parse_int(n)?)
                    .map_err(|_| Reply::error("ERR The MAXLEN argument must be >= 0."))?,
            );
            i += 1;
        } else {
            break;
        }
        if i >= call.args.len() {
            return Err(syntax_error());
        }
    }
    let fields = &call.args[i + 1..];
    if fields.is_empty() || !fields.len().is_multiple_of(2) {
        return Err(wrong_arity("xadd"));
    }
    let wanted = if call.arg(i) == b"*" {
        None
    } else {
        Some(parse_id(call.arg(i), 0)?)
    };
    let now = u64::try_from(call.db.now_ms).unwrap_or(0);
    if call.db.typed(&key, pick::stream)?.is_none() && nomkstream {
        call.rewrite = Some(Vec::new());
        return Ok(Reply::Nil);
    }
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = fields
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    let stream = call
        .db
        .typed_or_insert(&key, Value::Stream(Stream::default()), pick::stream)?;
    let last = stream.last_id;
    let id = match wanted {
        Some((0, 0)) => {
            return Err(Reply::error(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
        Some(id) if id <= last => {
            return Err(Reply::error(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            ));
        }
        Some(id) => id,
        None if now > last.0 => (now, 0),
        None => (last.0, last.1 + 1),
    };
    stream.entries.insert(id, pairs);
    stream.last_id = id;
    if let Some(maxlen) = maxlen {
        while stream.entries.len() > maxlen {
            stream.entries.pop_first();
        }
    }
    let mut effect = call.args.to_vec();
    effect[i] = show(id);
    call.rewrite = Some(effect);
    Ok(Reply::Bulk(show(id)))
}

pub fn xlen(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Int(
        call.db
            .typed(&key, pick::stream)?
            .map_or(0, |s| s.entries.len()) as i64,
    ))
}

/// A range end: `-`, `+`, an id, or `(id` exclusive.
fn end(bytes: &[u8], start: bool) -> Result<Option<Id>, Reply> {
    match bytes {
        b"-" => Ok(Some((0, 0))),
        b"+" => Ok(Some((u64::MAX, u64::MAX))),
        _ => {
            let (exclusive, text) = match bytes.strip_prefix(b"(") {
                Some(rest) => (true, rest),
                None => (false, bytes),
            };
            let id = parse_id(text, if start { 0 } else { u64::MAX })?;
            if !exclusive {
                return Ok(Some(id));
            }
            // An exclusive end moves one id inwards; past the edge, nothing.
            Ok(if start {
                if id.1 == u64::MAX {
                    id.0.checked_add(1).map(|ms| (ms, 0))
                } else {
                    Some((id.0, id.1 + 1))
                }
            } else if id.1 == 0 {
                id.0.checked_sub(1).map(|ms| (ms, u64::MAX))
            } else {
                Some((id.0, id.1 - 1))
            })
        }
    }
}

/// XRANGE key start end [COUNT n].
pub fn xrange(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let count = match call.args.len() {
        4 => None,
        6 if is(call.arg(4), "COUNT") => Some(call.int(5)?.max(0) as usize),
        _ => return Err(syntax_error()),
    };
    let (from, to) = (end(call.arg(2), true)?, end(call.arg(3), false)?);
    let Some(stream) = call.db.typed(&key, pick::stream)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    // COUNT 0 (or less) on a stream answers a null array, as Redis does.
    if count == Some(0) {
        return Ok(Reply::NilArray);
    }
    let (Some(from), Some(to)) = (from, to) else {
        return Ok(Reply::Array(Vec::new()));
    };
    if from > to {
        return Ok(Reply::Array(Vec::new()));
    }
    Ok(Reply::Array(
        stream
            .entries
            .range(from..=to)
            .take(count.unwrap_or(usize::MAX))
            .map(|(id, fields)| {
                Reply::Array(vec![
                    Reply::Bulk(show(*id)),
                    Reply::bulks(fields.iter().flat_map(|(f, v)| [f, v])),
                ])
            })
            .collect(),
    ))
}

pub fn xdel(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let ids = call.args[2..]
        .iter()
        .map(|id| parse_id(id, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(stream) = call.db.typed(&key, pick::stream)? else {
        return Ok(Reply::Int(0));
    };
    Ok(Reply::Int(
        ids.iter()
            .filter(|id| stream.entries.remove(id).is_some())
            .count() as i64,
    ))
}
