//! Lists.

use std::collections::VecDeque;

use super::{Call, is, syntax_error};
use crate::redis::keyspace::{Value, pick};
use crate::redis::resp::Reply;

fn push(call: &mut Call, front: bool) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let items = call.args[2..].to_vec();
    let list = call
        .db
        .typed_or_insert(&key, Value::List(VecDeque::new()), pick::list)?;
    for item in items {
        if front {
            list.push_front(item);
        } else {
            list.push_back(item);
        }
    }
    Ok(Reply::Int(list.len() as i64))
}

pub fn rpush(call: &mut Call) -> Result<Reply, Reply> {
    push(call, false)
}

pub fn lpush(call: &mut Call) -> Result<Reply, Reply> {
    push(call, true)
}

fn pop(call: &mut Call, front: bool) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let count = match call.args.len() {
        2 => None,
        3 => Some(
            usize::try_from(call.int(2)?)
                .map_err(|_| Reply::error("ERR value is out of range, must be positive"))?,
        ),
        _ => return Err(syntax_error()),
    };
    let Some(list) = call.db.typed(&key, pick::list)? else {
        return Ok(if count.is_some() {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    let mut take = || {
        if front {
            list.pop_front()
        } else {
            list.pop_back()
        }
    };
    let reply = match count {
        None => take().map_or(Reply::Nil, Reply::Bulk),
        Some(n) => Reply::Array((0..n).map_while(|_| take()).map(Reply::Bulk).collect()),
    };
    call.db.drop_if_empty(&key);
    Ok(reply)
}

pub fn lpop(call: &mut Call) -> Result<Reply, Reply> {
    pop(call, true)
}

pub fn rpop(call: &mut Call) -> Result<Reply, Reply> {
    pop(call, false)
}

pub fn llen(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    Ok(Reply::Int(
        call.db.typed(&key, pick::list)?.map_or(0, |l| l.len()) as i64,
    ))
}

/// A Redis index (negative from the end) into a list of `len`.
fn index(at: i64, len: usize) -> Option<usize> {
    let at = if at < 0 { at + len as i64 } else { at };
    (0..len as i64).contains(&at).then_some(at as usize)
}

pub fn lrange(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let (start, stop) = (call.int(2)?, call.int(3)?);
    let Some(list) = call.db.typed(&key, pick::list)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = list.len() as i64;
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
    Ok(Reply::bulks(list.range(start as usize..=stop as usize)))
}

pub fn lindex(call: &mut Call) -> Result<Reply, Reply> {
    let key = call.arg(1).to_vec();
    let at = call.int(2)?;
    let list = call.db.typed(&key, pick::list)?;
    Ok(list
        .and_then(|l| index(at, l.len()).map(|i| Reply::bulk(&l[i])))
        .unwrap_or(Reply::Nil))
}

pub fn lset(call: &mut Call) -> Result<Reply, Reply> {
    let (key, value) = (call.arg(1).to_vec(), call.arg(3).to_vec());
    let at = call.int(2)?;
    let Some(list) = call.db.typed(&key, pick::list)? else {
        return Err(Reply::error("ERR no such key"));
    };
    let i = index(at, list.len()).ok_or_else(|| Reply::error("ERR index out of range"))?;
    list[i] = value;
    Ok(Reply::ok())
}

pub fn lrem(call: &mut Call) -> Result<Reply, Reply> {
    let (key, item) = (call.arg(1).to_vec(), call.arg(3).to_vec());
    let count = call.int(2)?;
    let Some(list) = call.db.typed(&key, pick::list)? else {
        return Ok(Reply::Int(0));
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    if count >= 0 {
        let mut i = 0;
        while i < list.len() && removed < limit {
            if list[i] == item {
                list.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = list.len();
        while i > 0 && removed < limit {
            i -= 1;
            if list[i] == item {
                list.remove(i);
                removed += 1;
            }
        }
    }
    call.db.drop_if_empty(&key);
    Ok(Reply::Int(removed as i64))
}

/// LPOS key element [RANK rank] [COUNT count] [MAXLEN len].
pub fn lpos(call: &mut Call) -> Result<Reply, Reply> {
    let (key, item) = (call.arg(1).to_vec(), call.arg(2).to_vec());
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut i = 3;
    while i < call.args.len() {
        if i + 1 >= call.args.len() {
            return Err(syntax_error());
        }
        let value = call.int(i + 1)?;
        let option = call.arg(i);
        if is(option, "RANK") {
            if value == 0 || value == i64::MIN {
                return Err(Reply::error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
            rank = value;
        } else if is(option, "COUNT") {
            if value < 0 {
                return Err(Reply::error("ERR COUNT can't be negative"));
            }
            count = Some(value);
        } else if is(option, "MAXLEN") {
            if value < 0 {
                return Err(Reply::error("ERR MAXLEN can't be negative"));
            }
            maxlen = value;
        } else {
            return Err(syntax_error());
        }
        i += 2;
    }
    let list = call.db.typed(&key, pick::list)?;
    let Some(list) = list else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let len = list.len();
    let order: Box<dyn Iterator<Item = usize>> = if rank > 0 {
        Box::new(0..len)
    } else {
        Box::new((0..len).rev())
    };
    let scanned = if maxlen == 0 { len } else { maxlen as usize };
    let mut skip = rank.unsigned_abs() - 1;
    let wanted = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => n as usize,
    };
    let mut found = Vec::new();
    for at in order.take(scanned) {
        if list[at] == item {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(Reply::Int(at as i64));
                if found.len() == wanted {
                    break;
                }
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}
