//! The Lua 5.1 interpreter scripts and Functions run in, set up as Redis
//! 7 sets up its own: the `redis` library (`call`, `pcall`,
//! `error_reply`, `status_reply`, `sha1hex`, `log`...), globals that
//! scripts may neither create nor read undefined, and Redis's rules for
//! converting values between Lua and replies.
//!
//! While a script runs, the keyspace is lent to the Lua state (as its
//! app data), where `redis.call` finds it: a script has the data set to
//! itself, and nothing else runs until it returns.

mod call;
mod convert;
mod random;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic};

use super::keyspace::Db;
use super::resp::Reply;
use call::{
    CallError, Running, call_error, error_handler, error_table, lua_error_text, raw, script_error,
};
use convert::to_reply;

/// The chunk name of EVAL scripts, as Redis names them in errors.
pub const SCRIPT_CHUNK: &str = "@user_script";
/// The chunk name of Functions libraries.
pub const FUNCTION_CHUNK: &str = "@user_function";

/// The `redis` library's parts written in Lua.
const PRELUDE: &str = r#"
local err = error
-- Redis's pcall: an error table's `err` text is what the caller gets.
local raw_pcall, err_text = pcall, __stockade_err_text
__stockade_err_text = nil
local function caught(ok, ...)
  if ok then return true, ... end
  local text = err_text((...))
  if text ~= nil then return false, text end
  return false, ...
end
pcall = function(...) return caught(raw_pcall(...)) end
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

/// The environment of a Functions library, as Redis 7 gives it: while it
/// loads, its code sees one global, `redis`, with only the loading API
/// (`register_function`, `log`...); once loaded, its functions see the
/// ordinary globals. Either way a missing global is an error, and none
/// may be set.
const LIBRARY_ENV: &str = r#"
local setmetatable, setfenv, error, tostring, rawget = setmetatable, setfenv, error, tostring, rawget
local G, redis = _G, redis
local function missing(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
return function(f, register)
  local api = setmetatable({register_function = register, log = redis.log, setresp = redis.setresp,
    LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
    LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
    REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM},
    {__index = function(_, name) missing(name) end})
  local loading = true
  setfenv(f, setmetatable({}, {
    __index = function(_, name)
      if loading then
        if name == 'redis' then return api end
        missing(name)
      end
      -- Functions run apart from EVAL's scripts: not their KEYS and ARGV.
      local value = name ~= 'KEYS' and name ~= 'ARGV' and rawget(G, name) or nil
      if value == nil then missing(name) end
      return value
    end,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
  }))
  return function() loading = false end
end
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
    library_env: Function,
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
                let text = text.to_string_lossy();
                let dashed = if text.starts_with('-') {
                    text
                } else {
                    format!("-{text}")
                };
                error_table(lua, &lua_error_text(&dashed))
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
        random::install(&lua).expect("math.random is replaced");
        globals
            .raw_set(
                "__stockade_err_text",
                lua.create_function(|_, error: Value| Ok(caught_text(&error)))
                    .expect("a function"),
            )
            .expect("set a global");
        lua.load(PRELUDE)
            .set_name("=stockade_sim")
            .exec()
            .expect("the prelude runs");
        let driver = lua
            .load(DRIVER)
            .set_name("=stockade_sim")
            .eval::<Function>()
            .expect("the driver compiles");
        let library_env = lua
            .load(LIBRARY_ENV)
            .set_name("=stockade_sim")
            .eval::<Function>()
            .expect("the library environment compiles");
        Self {
            lua,
            driver,
            library_env,
        }
    }

    /// Gives a library's compiled code `f` its environment, `register` as
    /// its `redis.register_function`; the function returned ends the
    /// loading (the library's functions then see the ordinary globals).
    pub fn library_env(&self, f: &Function, register: Function) -> mlua::Result<Function> {
        self.library_env.call((f.clone(), register))
    }

    /// Runs a library's code as Redis loads it (its error handler, no
    /// keyspace): on failure, the error's text.
    pub fn run_loading(&self, f: &Function) -> Result<(), String> {
        let run = || -> mlua::Result<Result<(), String>> {
            let handler = self.lua.create_function(error_handler)?;
            let (ok, value): (bool, Value) = self.driver.call((f.clone(), handler))?;
            if ok {
                return Ok(Ok(()));
            }
            let text = match value {
                Value::Table(error) => error
                    .raw_get::<Option<String>>("err")?
                    .unwrap_or_else(|| "ERR unknown error".into()),
                other => format!("ERR {other:?}"),
            };
            Ok(Err(text))
        };
        run().unwrap_or_else(|error| Err(format!("ERR {error}")))
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

/// The text Redis's `pcall` gives for a caught error: a `redis.call`
/// error's, or an error table's `err`; None for any other error.
fn caught_text(error: &Value) -> Option<String> {
    match error {
        Value::Error(raised) => call_error(raised),
        Value::Table(table) => match table.raw_get::<Value>("err") {
            Ok(Value::String(text)) => Some(text.to_string_lossy()),
            Ok(Value::Integer(n)) => Some(n.to_string()),
            Ok(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// An error a Rust function of the `redis` library raises: Redis's error
/// handler makes it `{err = text}`.
pub fn raise(text: String) -> mlua::Error {
    mlua::Error::external(CallError(text))
}

impl Default for Interp {
    fn default() -> Self {
        Self::new()
    }
}
