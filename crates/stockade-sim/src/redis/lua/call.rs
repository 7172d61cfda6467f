//! What happens between a script and the keyspace: `redis.call` and
//! `redis.pcall` running a command, the error tables they raise or
//! return, and the error handler that says where in the script an error
//! was raised.

use mlua::{Lua, MultiValue, Table, Value};

use super::super::commands;
use super::super::keyspace::Db;
use super::super::resp::Reply;
use super::convert::to_lua;

/// What a running script may reach, lent to the Lua state.
pub(super) struct Running {
    pub(super) db: Db,
    pub(super) effects: Vec<Vec<Vec<u8>>>,
    pub(super) read_only: bool,
}

/// An error `redis.call` raises: the error handler makes it `{err=text}`.
#[derive(Debug)]
pub(super) struct CallError(pub(super) String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// Runs a command for the running script: (ok, reply or error table).
pub(super) fn raw(lua: &Lua, args: MultiValue) -> mlua::Result<(bool, Value)> {
    let Some(mut running) = lua.app_data_mut::<Running>() else {
        return Err(mlua::Error::runtime(
            "redis.call is only available while a script or function runs",
        ));
    };
    let Running {
        db,
        effects,
        read_only,
    } = &mut *running;
    raw_call(lua, args, db, effects, *read_only)
}

/// The text of a [`CallError`] inside `error`, if it is one.
pub(super) fn call_error(error: &mlua::Error) -> Option<String> {
    match error {
        mlua::Error::CallbackError { cause, .. } => call_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<CallError>().map(|e| e.0.clone()),
        _ => None,
    }
}

/// Redis's error handler: a string error becomes `{err='ERR ...'}`, and
/// the error learns where in the user's code it was raised.
pub(super) fn error_handler(lua: &Lua, error: Value) -> mlua::Result<Value> {
    let table = match &error {
        Value::Table(table) => table.clone(),
        Value::Error(raised) if call_error(raised).is_some() => {
            let table = lua.create_table()?;
            table.raw_set("err", call_error(raised))?;
            table
        }
        other => {
            let text = match other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(e) => e.to_string(),
                v => v.to_string().unwrap_or_default(),
            };
            let table = lua.create_table()?;
            table.raw_set("err", format!("ERR {text}"))?;
            table
        }
    };
    // The innermost frame of the user's own code: library frames (C
    // functions, the prelude's wrappers) are skipped.
    for level in 0..64 {
        let Some(Some((source, line))) = lua.inspect_stack(level, |debug| {
            let source = debug
                .source()
                .source
                .map(|s| s.into_owned())
                .unwrap_or_default();
            source
                .starts_with("@user_")
                .then(|| (source, debug.current_line()))
        }) else {
            if lua.inspect_stack(level, |_| ()).is_none() {
                break;
            }
            continue;
        };
        table.raw_set("source", source)?;
        if let Some(line) = line {
            table.raw_set("line", line)?;
        }
        break;
    }
    Ok(Value::Table(table))
}

/// The reply to a script that failed with `error` (an error table).
pub(super) fn script_error(error: &Value, name: &str) -> Reply {
    let Value::Table(table) = error else {
        return Reply::error(format!(
            "ERR Error running script {name}: execution failure"
        ));
    };
    let text: Option<String> = table
        .raw_get::<Option<mlua::String>>("err")
        .ok()
        .flatten()
        .map(|s| s.to_string_lossy());
    let text = text.unwrap_or_else(|| "ERR unknown error".into());
    let source: Option<String> = table.raw_get("source").ok().flatten();
    let line: Option<i64> = table.raw_get("line").ok().flatten();
    match (source, line) {
        (Some(source), Some(line)) => {
            Reply::error(format!("{text} script: {name}, on {source}:{line}."))
        }
        _ => Reply::error(text),
    }
}

/// `redis.call`'s work: (true, reply in Lua) or (false, error table).
fn raw_call(
    lua: &Lua,
    args: MultiValue,
    db: &mut Db,
    effects: &mut Vec<Vec<Vec<u8>>>,
    read_only: bool,
) -> mlua::Result<(bool, Value)> {
    let fail = |text: &str| {
        Ok((
            false,
            Value::Table(error_table(lua, &lua_error_text(text))?),
        ))
    };
    if args.is_empty() {
        return fail("Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for arg in args.iter() {
        match arg {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => match lua.coerce_string(arg.clone())? {
                Some(s) => argv.push(s.as_bytes().to_vec()),
                None => return fail("Lua redis lib command arguments must be strings or integers"),
            },
            _ => return fail("Lua redis lib command arguments must be strings or integers"),
        }
    }
    let Some(arity_ok) = commands::has_arity(&argv) else {
        return if super::super::server::is_server_command(&argv[0]) {
            fail("This Redis command is not allowed from script")
        } else {
            fail("Unknown Redis command called from script")
        };
    };
    if !arity_ok {
        return fail("Wrong number of args calling Redis command from script");
    }
    if read_only && commands::is_write(&argv[0]) {
        return fail("Write commands are not allowed from read-only scripts.");
    }
    let outcome = commands::dispatch(db, &argv).expect("a data command");
    effects.extend(outcome.effects);
    match outcome.reply {
        Reply::Error(text) => Ok((
            false,
            Value::Table(error_table(lua, &lua_error_text(&format!("-{text}")))?),
        )),
        reply => Ok((true, to_lua(lua, &reply)?)),
    }
}

/// The `err` text Redis keeps for an error (its `luaPushErrorBuff`):
/// `-CODE msg` becomes `CODE msg` (`-msg` alone, `ERR msg`), and a
/// message without the dash gets the code `ERR`. A reply's error is read
/// as `-` and its text; `error_reply`'s text gets the dash it lacks.
pub(super) fn lua_error_text(text: &str) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {msg}"),
            None => format!("ERR {rest}"),
        },
        None => format!("ERR {text}"),
    }
}

pub(super) fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    Ok(table)
}
