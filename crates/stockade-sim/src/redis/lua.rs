//! The Lua 5.1 interpreter scripts and Functions run in, set up as Redis
//! 7 sets up its own: the `redis` library (`call`, `pcall`,
//! `error_reply`, `status_reply`, `sha1hex`, `log`...), globals that
//! scripts may neither create nor read undefined, and Redis's rules for
//! converting values between Lua and replies.
//!
//! While a script runs, the keyspace is lent to the Lua state (as its
//! app data), where `redis.call` finds it: a script has the data set to
//! itself, and nothing else runs until it returns.

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic};

use super::commands;
use super::keyspace::Db;
use super::resp::Reply;

/// The chunk name of EVAL scripts, as Redis names them in errors.
pub const SCRIPT_CHUNK: &str = "@user_script";
/// The chunk name of Functions libraries.
pub const FUNCTION_CHUNK: &str = "@user_function";

/// The `redis` library's parts written in Lua.
const PRELUDE: &str = r#"
local err = error
redis.status_reply = function(text) return {ok = text} end
redis.setresp = function(version)
  if version ~= 2 then err('RESP version must be 2: the simulated server speaks RESP2 only') end
end
redis.set_repl = function() end
redis.replicate_commands = function() return true end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = '7.0.0', 0x00070000
loadfile, dofile = nil, nil
setmetatable(_G, {
  __index = function(_, name)
    err("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = function()
    err("Attempt to modify a readonly table", 2)
  end,
})
"#;

/// Calls `f` with the rest of its arguments under `xpcall`, as Redis
/// calls a script with its error handler.
const DRIVER: &str = r#"
local xpcall, unpack, select = xpcall, unpack, select
return function(f, handler, ...)
  local args, n = {...}, select('#', ...)
  return xpcall(function() return f(unpack(args, 1, n)) end, handler)
end
"#;

/// A Lua state with Redis's script environment.
pub struct Interp {
    lua: Lua,
    driver: Function,
}

/// How a running script may use the keyspace.
pub struct ScriptCtx<'a> {
    /// The keyspace.
    pub db: &'a mut Db,
    /// Write effects of the script's commands, in order.
    pub effects: &'a mut Vec<Vec<Vec<u8>>>,
    /// FCALL_RO, or a function flagged `no-writes`: writes are refused.
    pub read_only: bool,
}

impl Interp {
    /// A fresh interpreter.
    pub fn new() -> Self {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )
        .expect("the Lua standard libraries load");
        let globals = lua.globals();
        let redis = lua.create_table().expect("a table");
        let set = |name: &str, f: Function| redis.raw_set(name, f).expect("set");
        set(
            "error_reply",
            lua.create_function(|lua, text: mlua::String| {
                error_table(lua, &lua_error_text(&text.to_string_lossy(), false))
            })
            .expect("a function"),
        );
        set(
            "sha1hex",
            lua.create_function(|_, text: mlua::String| {
                Ok(sha1_smol::Sha1::from(&*text.as_bytes())
                    .digest()
                    .to_string())
            })
            .expect("a function"),
        );
        set(
            "log",
            lua.create_function(|_, args: Variadic<Value>| {
                let words: Vec<String> = args
                    .iter()
                    .skip(1)
                    .map(|v| v.to_string().unwrap_or_default())
                    .collect();
                tracing::debug!(message = %words.join(" "), "redis.log");
                Ok(())
            })
            .expect("a function"),
        );
        // `call` and `pcall` are C functions, as in Redis, so that a script's
        // `return redis.call(...)` keeps its frame for the error's line.
        set(
            "call",
            lua.create_function(|lua, args: MultiValue| {
                let (ok, value) = raw(lua, args)?;
                match (ok, value) {
                    (true, value) => Ok(value),
                    (false, Value::Table(error)) => {
                        let text: String = error.raw_get("err")?;
                        Err(mlua::Error::external(CallError(text)))
                    }
                    (false, _) => Err(mlua::Error::runtime("redis.call failed")),
                }
            })
            .expect("a function"),
        );
        set(
            "pcall",
            lua.create_function(|lua, args: MultiValue| Ok(raw(lua, args)?.1))
                .expect("a function"),
        );
        globals.raw_set("redis", redis).expect("set redis");
        lua.load(PRELUDE)
            .set_name("=stockade_sim")
            .exec()
            .expect("the prelude runs");
        let driver = lua
            .load(DRIVER)
            .set_name("=stockade_sim")
            .eval::<Function>()
            .expect("the driver compiles");
        Self { lua, driver }
    }

    /// The Lua state.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Compiles `source` under `chunk`; the error is Lua's message.
    pub fn compile(&self, source: &[u8], chunk: &str) -> Result<Function, String> {
        self.lua
            .load(source)
            .set_name(chunk)
            .into_function()
            .map_err(|error| match error {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// Sets a global the protection would refuse (KEYS, ARGV).
    pub fn set_global(&self, name: &str, items: &[Vec<u8>]) {
        let table = self.strings(items);
        self.lua
            .globals()
            .raw_set(name, table)
            .expect("set a global");
    }

    /// A Lua array of strings.
    pub fn strings(&self, items: &[Vec<u8>]) -> Table {
        let table = self.lua.create_table().expect("a table");
        for (i, item) in items.iter().enumerate() {
            table
                .raw_set(i + 1, self.lua.create_string(item).expect("a string"))
                .expect("set");
        }
        table
    }

    /// Runs `f(args...)` as the script `name` with the keyspace of `ctx`,
    /// and converts its first result (or its error) into a reply.
    pub fn run(&self, f: &Function, name: &str, args: MultiValue, ctx: ScriptCtx) -> Reply {
        let ScriptCtx {
            db,
            effects,
            read_only,
        } = ctx;
        self.lua.set_app_data(Running {
            db: std::mem::take(db),
            effects: std::mem::take(effects),
            read_only,
        });
        let result = (|| {
            let handler = self.lua.create_function(error_handler)?;
            let mut call_args = MultiValue::new();
            call_args.push_back(Value::Function(f.clone()));
            call_args.push_back(Value::Function(handler));
            call_args.extend(args);
            let (ok, value): (bool, Value) = self.driver.call(call_args)?;
            Ok::<_, mlua::Error>(if ok {
                to_reply(&value)
            } else {
                script_error(&value, name)
            })
        })();
        let running = self
            .lua
            .remove_app_data::<Running>()
            .expect("the keyspace was lent for the script");
        *db = running.db;
        *effects = running.effects;
        result.unwrap_or_else(|error| {
            Reply::error(format!("ERR Error running script {name}: {error}"))
        })
    }
}

/// What a running script may reach, lent to the Lua state.
struct Running {
    db: Db,
    effects: Vec<Vec<Vec<u8>>>,
    read_only: bool,
}

/// An error `redis.call` raises: the error handler makes it `{err=text}`.
#[derive(Debug)]
struct CallError(String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// Runs a command for the running script: (ok, reply or error table).
fn raw(lua: &Lua, args: MultiValue) -> mlua::Result<(bool, Value)> {
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
fn call_error(error: &mlua::Error) -> Option<String> {
    match error {
        mlua::Error::CallbackError { cause, .. } => call_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<CallError>().map(|e| e.0.clone()),
        _ => None,
    }
}

impl Default for Interp {
    fn default() -> Self {
        Self::new()
    }
}

/// Redis's error handler: a string error becomes `{err='ERR ...'}`, and
/// the error learns where in the user's code it was raised.
fn error_handler(lua: &Lua, error: Value) -> mlua::Result<Value> {
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
fn script_error(error: &Value, name: &str) -> Reply {
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
            Value::Table(error_table(lua, &lua_error_text(text, false))?),
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
    if !commands::is_data_command(&argv[0]) {
        return if super::server::is_server_command(&argv[0]) {
            fail("This Redis command is not allowed from script")
        } else {
            fail("Unknown Redis command called from script")
        };
    }
    if read_only && commands::is_write(&argv[0]) {
        return fail("Write commands are not allowed from read-only scripts.");
    }
    let outcome = commands::dispatch(db, &argv).expect("a data command");
    if let Reply::Error(text) = &outcome.reply {
        if text.starts_with("ERR wrong number of arguments") {
            return fail("Wrong number of args calling Redis command from script");
        }
    }
    effects.extend(outcome.effects);
    match outcome.reply {
        Reply::Error(text) => Ok((
            false,
            Value::Table(error_table(lua, &lua_error_text(&text, true))?),
        )),
        reply => Ok((true, to_lua(lua, &reply)?)),
    }
}

/// The `err` text Redis keeps for an error: a reply's error (`CODE msg`)
/// as it is, a bare message prefixed with `ERR`; `error_reply`'s text is
/// read the same way (`-CODE msg`, or a message).
fn lua_error_text(text: &str, from_reply: bool) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    if from_reply {
        return if text.contains(' ') {
            text.to_owned()
        } else {
            format!("ERR {text}")
        };
    }
    match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {msg}"),
            None => format!("ERR {rest}"),
        },
        None if text.is_empty() => "ERR ".to_owned(),
        None => match text.split_once(' ') {
            // error_reply("My Error") is "-My Error": code My.
            Some((code, msg)) => format!("{code} {msg}"),
            None => format!("ERR {text}"),
        },
    }
}

fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    Ok(table)
}

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
        Value::Number(n) => Reply::Int(*n as i64),
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
