//! Redis Functions: libraries loaded with `FUNCTION LOAD` (a `#!lua
//! name=...` line, then code calling `redis.register_function`), listed,
//! deleted and flushed, and their functions called with FCALL.

use std::collections::BTreeMap;

use mlua::{Function, Lua, Value, Variadic};

use super::commands::{glob, is};
use super::lua::{FUNCTION_CHUNK, Interp, raise};
use super::resp::Reply;

/// Flags `redis.register_function` takes.
const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// One registered function.
pub struct Registered {
    /// Its library's name.
    pub library: String,
    /// The callback, called as `f(KEYS, ARGV)`.
    pub callback: Function,
    /// Its flags, in the order given.
    pub flags: Vec<String>,
    /// Its description, if it has one.
    pub description: Option<String>,
}

/// The loaded libraries and their functions.
#[derive(Default)]
pub struct Registry {
    /// Library name → its code (after the shebang line, as sent).
    libraries: BTreeMap<String, String>,
    /// Function name → the function.
    functions: BTreeMap<String, Registered>,
}

fn names_ok(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Registry {
    /// The function `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.functions.get(name)
    }

    /// Deletes every library.
    pub fn flush(&mut self) {
        self.libraries.clear();
        self.functions.clear();
    }

    /// FUNCTION DELETE.
    pub fn delete(&mut self, library: &str) -> Reply {
        if self.libraries.remove(library).is_none() {
            return Reply::error("ERR Library not found");
        }
        self.functions.retain(|_, f| f.library != library);
        Reply::ok()
    }

    /// FUNCTION LOAD [REPLACE] code: the library's name, or an error that
    /// changes nothing.
    pub fn load(&mut self, interp: &Interp, code: &[u8], replace: bool) -> Reply {
        let code = String::from_utf8_lossy(code).into_owned();
        let Some(rest) = code.strip_prefix("#!") else {
            return Reply::error("ERR Missing library metadata");
        };
        let (header, body) = rest.split_once('\n').unwrap_or((rest, ""));
        let mut words = header.split(' ').filter(|w| !w.is_empty());
        let engine = words.next().unwrap_or("");
        if !engine.eq_ignore_ascii_case("lua") {
            return Reply::error(format!("ERR Engine '{engine}' not found"));
        }
        let mut name = None;
        for word in words {
            match word.strip_prefix("name=") {
                Some(value) => name = Some(value.to_owned()),
                None => return Reply::error(format!("ERR Invalid metadata value given: {word}")),
            }
        }
        let Some(name) = name else {
            return Reply::error("ERR Library name was not given");
        };
        if !names_ok(&name) {
            return Reply::error(
                "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
            );
        }
        if self.libraries.contains_key(&name) && !replace {
            return Reply::error(format!("ERR Library '{name}' already exists"));
        }
        // The shebang line stays a (blank) line: errors count it, as Redis's.
        let registered = match register(interp, &name, &format!("\n{body}")) {
            Ok(registered) => registered,
            Err(error) => return Reply::error(error),
        };
        if registered.is_empty() {
            return Reply::error("ERR No functions registered");
        }
        if let Some(taken) = registered.keys().find(|f| {
            self.functions
                .get(*f)
                .is_some_and(|other| other.library != name)
        }) {
            return Reply::error(format!("ERR Function {taken} already exists"));
        }
        self.functions.retain(|_, f| f.library != name);
        self.functions.extend(registered);
        self.libraries.insert(name.clone(), code);
        Reply::bulk(name)
    }

    /// FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern], libraries and
    /// functions by name.
    pub fn list(&self, args: &[Vec<u8>]) -> Reply {
        let (mut with_code, mut pattern) = (false, None);
        let mut i = 0;
        while i < args.len() {
            if is(&args[i], "WITHCODE") && !with_code {
                with_code = true;
            } else if is(&args[i], "LIBRARYNAME") && pattern.is_none() {
                let Some(p) = args.get(i + 1) else {
                    return Reply::error("ERR library name argument was not given");
                };
                pattern = Some(p.clone());
                i += 1;
            } else {
                return Reply::error(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(&args[i])
                ));
            }
            i += 1;
        }
        let mut out = Vec::new();
        for (name, code) in &self.libraries {
            if pattern.as_ref().is_some_and(|p| !glob(p, name.as_bytes())) {
                continue;
            }
            let functions = self
                .functions
                .iter()
                .filter(|(_, f)| &f.library == name)
                .map(|(fname, f)| {
                    Reply::Array(vec![
                        Reply::bulk("name"),
                        Reply::bulk(fname),
                        Reply::bulk("description"),
                        f.description.as_ref().map_or(Reply::Nil, Reply::bulk),
                        Reply::bulk("flags"),
                        Reply::bulks(&f.flags),
                    ])
                })
                .collect();
            let mut library = vec![
                Reply::bulk("library_name"),
                Reply::bulk(name),
                Reply::bulk("engine"),
                Reply::bulk("LUA"),
                Reply::bulk("functions"),
                Reply::Array(functions),
            ];
            if with_code {
                library.extend([Reply::bulk("library_code"), Reply::bulk(code)]);
            }
            out.push(Reply::Array(library));
        }
        Reply::Array(out)
    }
}

/// Runs a library's code with `redis.register_function` available, and
/// returns what it registered.
fn register(
    interp: &Interp,
    library: &str,
    body: &str,
) -> Result<BTreeMap<String, Registered>, String> {
    let lua = interp.lua();
    let compiled = interp
        .compile(body.as_bytes(), FUNCTION_CHUNK)
        .map_err(|message| format!("ERR Error compiling function: {message}"))?;
    let mut registered = BTreeMap::new();
    let outcome = lua.scope(|scope| {
        let register = scope.create_function_mut(|lua, args: Variadic<Value>| {
            let function =
                one_registration(lua, args).map_err(|text| raise(format!("ERR {text}")))?;
            let name = function.0;
            if registered.contains_key(&name) {
                return Err(raise("ERR Function already exists in the library".into()));
            }
            registered.insert(
                name,
                Registered {
                    library: library.to_owned(),
                    callback: function.1,
                    flags: function.2,
                    description: function.3,
                },
            );
            Ok(())
        })?;
        // While it loads, a library sees only the loading API.
        let loaded = interp.library_env(&compiled, register)?;
        let run = interp.run_loading(&compiled);
        loaded.call::<()>(())?;
        Ok(run)
    });
    match outcome {
        Ok(Ok(())) => Ok(registered),
        Ok(Err(text)) => Err(format!("ERR Error registering functions: {text}")),
        Err(error) => Err(format!("ERR Error registering functions: {error}")),
    }
}

type Registration = (String, Function, Vec<String>, Option<String>);

/// The arguments of one `redis.register_function` call: `(name,
/// callback)` or `{function_name=, callback=, flags=, description=}`.
fn one_registration(_lua: &Lua, args: Variadic<Value>) -> Result<Registration, String> {
    let (name, callback, flags, description) = match args.as_slice() {
        [name, callback] => {
            let Value::String(name) = name else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(callback) = callback else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (
                Value::String(name.clone()),
                Value::Function(callback.clone()),
                Value::Nil,
                Value::Nil,
            )
        }
        [Value::Table(table)] => {
            for pair in table.clone().pairs::<Value, Value>() {
                let (key, _) = pair.map_err(|e| e.to_string())?;
                let known = matches!(&key, Value::String(k) if ["function_name", "callback", "flags", "description"].contains(&&*k.to_string_lossy()));
                if !known {
                    return Err("unknown argument given to redis.register_function".into());
                }
            }
            let get = |k: &str| table.raw_get::<Value>(k).unwrap_or(Value::Nil);
            (
                get("function_name"),
                get("callback"),
                get("flags"),
                get("description"),
            )
        }
        [_] => {
            return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    let name = match name {
        Value::String(s) => s.to_string_lossy(),
        Value::Nil => {
            return Err("redis.register_function must get a function name argument".into());
        }
        _ => {
            return Err(
                "function_name argument given to redis.register_function must be a string".into(),
            );
        }
    };
    let callback = match callback {
        Value::Function(f) => f,
        Value::Nil => return Err("redis.register_function must get a callback argument".into()),
        _ => {
            return Err(
                "callback argument given to redis.register_function must be a function".into(),
            );
        }
    };
    if !names_ok(&name) {
        // Redis 7 says "Library names" here too.
        return Err(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
                .into(),
        );
    }
    let mut flag_names = Vec::new();
    match flags {
        Value::Nil => {}
        Value::Table(table) => {
            for flag in table.sequence_values::<Value>() {
                let flag = match flag {
                    Ok(Value::String(s)) => s.to_string_lossy(),
                    _ => return Err("unknown flag given".into()),
                };
                if !FLAGS.contains(&flag.as_str()) {
                    return Err("unknown flag given".into());
                }
                flag_names.push(flag);
            }
        }
        _ => return Err(
            "flags argument to redis.register_function must be a table representing function flags"
                .into(),
        ),
    }
    let description = match description {
        Value::Nil => None,
        Value::String(s) => Some(s.to_string_lossy()),
        _ => {
            return Err(
                "description argument given to redis.register_function must be a string".into(),
            );
        }
    };
    Ok((name, callback, flag_names, description))
}
