//! Redis's conversions between replies and Lua values.

use mlua::{Lua, Value};

use super::super::resp::Reply;
use super::call::error_table;

/// A reply as Lua sees it: integers as numbers, nil as false, status
/// and error as `{ok=}` and `{err=}` tables, arrays as tables.
pub fn to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Status(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", text.as_str())?;
            Value::Table(table)
        }
        Reply::Error(text) => Value::Table(error_table(lua, text)?),
        Reply::Array(items) => {
            let table = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

/// A script's result as a reply: numbers truncated to integers, true as
/// 1, false and nil as nil, `{err=}` and `{ok=}` tables as error and
/// status, other tables as arrays up to their first nil.
pub fn to_reply(value: &Value) -> Reply {
    match value {
        Value::Nil | Value::Boolean(false) => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(*n),
        Value::Number(n) => Reply::Int(truncate(*n)),
        Value::String(s) => Reply::bulk(s.as_bytes()),
        Value::Table(table) => {
            if let Ok(Value::String(err)) = table.raw_get::<Value>("err") {
                return Reply::Error(err.to_string_lossy());
            }
            if let Ok(Value::String(ok)) = table.raw_get::<Value>("ok") {
                return Reply::Status(ok.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(to_reply(&item)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// A number as Redis's C cast turns it into an integer on x86-64: towards
/// zero, and out of range (or NaN) as the "integer indefinite" value,
/// i64::MIN (`math.huge` answers -9223372036854775808 there).
fn truncate(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}
