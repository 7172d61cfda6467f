//! EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH, and FCALL/FCALL_RO: a script
//! or function run with the keyspace to itself.

use std::collections::BTreeMap;

use mlua::{Function, MultiValue, Value};

use super::commands::{is, parse_int, wrong_arity};
use super::lua::{SCRIPT_CHUNK, ScriptCtx};
use super::resp::{Args, Reply};
use super::server::State;

/// The scripts cache: SHA1 (lowercase hex) → compiled script.
pub type Cache = BTreeMap<String, Function>;

fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Compiles `body` into the cache (if new); its SHA1.
fn load(state: &mut State, body: &[u8]) -> Result<String, Reply> {
    let sha = sha1_hex(body);
    if !state.scripts.contains_key(&sha) {
        let f = state
            .interp
            .compile(body, SCRIPT_CHUNK)
            .map_err(|message| {
                Reply::error(format!(
                    "ERR Error compiling script (new function): {message}"
                ))
            })?;
        state.scripts.insert(sha.clone(), f);
    }
    Ok(sha)
}

/// `numkeys` and the split of the rest into keys and arguments. An
/// unreadable `numkeys` is EVAL's integer error, or FCALL's own.
fn split(args: &[Vec<u8>], fcall: bool) -> Result<(Args, Args), Reply> {
    let numkeys = parse_int(&args[2]).map_err(|error| {
        if fcall {
            Reply::error("ERR Bad number of keys provided")
        } else {
            error
        }
    })?;
    if numkeys < 0 {
        return Err(Reply::error("ERR Number of keys can't be negative"));
    }
    let rest = &args[3..];
    let numkeys = numkeys as usize;
    if numkeys > rest.len() {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok((rest[..numkeys].to_vec(), rest[numkeys..].to_vec()))
}

/// EVAL script numkeys key... arg... and EVALSHA sha1 numkeys ....
pub fn eval(state: &mut State, args: &[Vec<u8>], by_sha: bool) -> Reply {
    let name = if by_sha { "evalsha" } else { "eval" };
    if args.len() < 3 {
        return wrong_arity(name);
    }
    let (keys, argv) = match split(args, false) {
        Ok(split) => split,
        Err(error) => return error,
    };
    let sha = if by_sha {
        let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        if !state.scripts.contains_key(&sha) {
            return Reply::error("NOSCRIPT No matching script. Please use EVAL.");
        }
        sha
    } else {
        match load(state, &args[1]) {
            Ok(sha) => sha,
            Err(error) => return error,
        }
    };
    let f = state.scripts[&sha].clone();
    state.interp.set_global("KEYS", &keys);
    state.interp.set_global("ARGV", &argv);
    run(state, &f, &sha, MultiValue::new(), false)
}

/// SCRIPT LOAD | EXISTS | FLUSH.
pub fn script(state: &mut State, args: &[Vec<u8>]) -> Reply {
    let Some(sub) = args.get(1) else {
        return wrong_arity("script");
    };
    if is(sub, "LOAD") && args.len() == 3 {
        return load(state, &args[2]).map_or_else(|e| e, Reply::bulk);
    }
    if is(sub, "EXISTS") && args.len() >= 3 {
        return Reply::Array(
            args[2..]
                .iter()
                .map(|sha| {
                    let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                    Reply::Int(state.scripts.contains_key(&sha).into())
                })
                .collect(),
        );
    }
    if is(sub, "FLUSH") && args.len() <= 3 {
        if let Some(mode) = args.get(2)
            && !is(mode, "SYNC")
            && !is(mode, "ASYNC")
        {
            return Reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        }
        state.scripts.clear();
        return Reply::ok();
    }
    let sub = String::from_utf8_lossy(sub);
    if ["load", "exists", "flush"].contains(&sub.to_ascii_lowercase().as_str()) {
        return Reply::error(format!(
            "ERR wrong number of arguments for 'script|{}' command",
            sub.to_ascii_lowercase()
        ));
    }
    Reply::error(format!("ERR unknown subcommand '{sub}'. Try SCRIPT HELP."))
}

/// FCALL function numkeys key... arg... (FCALL_RO when `read_only`).
pub fn fcall(state: &mut State, args: &[Vec<u8>], read_only: bool) -> Reply {
    if args.len() < 3 {
        return wrong_arity(if read_only { "fcall_ro" } else { "fcall" });
    }
    let (keys, argv) = match split(args, true) {
        Ok(split) => split,
        Err(error) => return error,
    };
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let Some(function) = state.functions.get(&name) else {
        return Reply::error("ERR Function not found");
    };
    let no_writes = function.flags.iter().any(|f| f == "no-writes");
    if read_only && !no_writes {
        return Reply::error("ERR Can not execute a script with write flag using *_ro command.");
    }
    let callback = function.callback.clone();
    let call_args: MultiValue = [
        Value::Table(state.interp.strings(&keys)),
        Value::Table(state.interp.strings(&argv)),
    ]
    .into_iter()
    .collect();
    run(state, &callback, &name, call_args, read_only || no_writes)
}

fn run(state: &mut State, f: &Function, name: &str, args: MultiValue, read_only: bool) -> Reply {
    let State {
        interp, db, log, ..
    } = state;
    interp.run(
        f,
        name,
        args,
        ScriptCtx {
            db,
            effects: log,
            read_only,
        },
    )
}
