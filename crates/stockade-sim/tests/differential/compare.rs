//! Sending one command to both servers and comparing what comes back,
//! and reading a whole keyspace the same way from either.

use std::collections::BTreeMap;

use redis::Value;
use redis::aio::MultiplexedConnection;

/// A reply as compared: the value, or the error's full text (code and
/// message, as the server wrote it).
pub type Answer = Result<Value, String>;

/// Sends `args` on `connection`.
pub async fn send(connection: &mut MultiplexedConnection, args: &[Vec<u8>]) -> Answer {
    let mut command = redis::cmd(&String::from_utf8_lossy(&args[0]));
    for arg in &args[1..] {
        command.arg(arg.as_slice());
    }
    command
        .query_async::<Value>(connection)
        .await
        .map_err(|error| match (error.code(), error.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_owned(),
            _ => error.to_string(),
        })
}

/// What may differ between two correct servers made uniform: the order
/// of unordered answers, the time left of a deadline, stream ids that
/// come from each server's own clock (when `ids` is set).
pub fn normalize(name: &str, answer: Answer, ids: bool) -> Answer {
    let mut value = answer?;
    match name.to_ascii_uppercase().as_str() {
        "SMEMBERS" | "KEYS" => {
            if let Value::Array(items) = &mut value {
                items.sort_by_key(|item| format!("{item:?}"));
            }
        }
        "PTTL" | "TTL" => {
            if let Value::Int(left) = &mut value {
                *left = (*left).clamp(-2, 1);
            }
        }
        _ => {}
    }
    if ids {
        value = strip_ids(value);
    }
    Ok(value)
}

/// Whether `bytes` is a stream id a server took from its clock.
fn is_id(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.split_once('-').is_some_and(|(ms, seq)| {
        ms.len() >= 12
            && !seq.is_empty()
            && ms.bytes().chain(seq.bytes()).all(|b| b.is_ascii_digit())
    })
}

/// Learns, from two answers of the same shape, which stream id of the
/// simulated server is which of the real one.
pub fn pair_ids(sim: &Value, real: &Value, ids: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    match (sim, real) {
        (Value::BulkString(s), Value::BulkString(r)) if is_id(s) && is_id(r) => {
            ids.insert(s.clone(), r.clone());
        }
        (Value::Array(s), Value::Array(r)) => {
            for (s, r) in s.iter().zip(r) {
                pair_ids(s, r, ids);
            }
        }
        _ => {}
    }
}

/// Stream ids (`1700000000000-0`) replaced by `<id>`.
fn strip_ids(value: Value) -> Value {
    match value {
        Value::BulkString(bytes) => {
            if is_id(&bytes) {
                Value::BulkString(b"<id>".to_vec())
            } else {
                Value::BulkString(bytes)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(strip_ids).collect()),
        other => other,
    }
}

/// Every key: its type, its contents as the type's full read answers them
/// (sets and hashes sorted), and whether it has a deadline.
pub async fn keyspace(
    connection: &mut MultiplexedConnection,
    ids: bool,
) -> BTreeMap<Vec<u8>, (String, Answer, bool)> {
    let keys = match send(connection, &[b"KEYS".to_vec(), b"*".to_vec()]).await {
        Ok(Value::Array(keys)) => keys,
        other => panic!("KEYS * answered {other:?}"),
    };
    let mut out = BTreeMap::new();
    for key in keys {
        let Value::BulkString(key) = key else {
            panic!("a key that is not a string: {key:?}");
        };
        let kind = match send(connection, &[b"TYPE".to_vec(), key.clone()]).await {
            Ok(Value::SimpleString(kind)) => kind,
            other => panic!("TYPE answered {other:?}"),
        };
        let read: Vec<&[u8]> = match kind.as_str() {
            "string" => vec![b"GET"],
            "hash" => vec![b"HGETALL"],
            "list" => vec![b"LRANGE", b"0", b"-1"],
            "set" => vec![b"SMEMBERS"],
            "zset" => vec![b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
            "stream" => vec![b"XRANGE", b"-", b"+"],
            other => panic!("unexpected type {other}"),
        };
        let mut args = vec![read[0].to_vec(), key.clone()];
        args.extend(read[1..].iter().map(|a| a.to_vec()));
        let mut contents = normalize(
            &String::from_utf8_lossy(read[0]),
            send(connection, &args).await,
            ids,
        );
        // Redis keeps a hash's fields in order only while it is small (no
        // value over 64 bytes, at most 128 fields): compared as pairs, sorted.
        if let (true, Ok(Value::Array(items))) = (kind == "hash", &mut contents) {
            let mut pairs: Vec<Vec<Value>> = items.chunks(2).map(<[Value]>::to_vec).collect();
            pairs.sort_by_key(|pair| format!("{pair:?}"));
            *items = pairs.concat();
        }
        let ttl = send(connection, &[b"PTTL".to_vec(), key.clone()]).await;
        out.insert(
            key,
            (
                kind,
                contents,
                matches!(ttl, Ok(Value::Int(left)) if left >= 0),
            ),
        );
    }
    out
}
