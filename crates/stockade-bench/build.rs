//! Lists the Redis commands that the Lua scripts of the Redis strategies
//! call with `redis.call` / `redis.pcall`, for `counters::RedisWork`.
//!
//! `INFO commandstats` counts a command run inside a script twice over: as
//! part of the `EVALSHA` that ran the script (whose time includes it) and
//! as the command itself. To add up what Redis spent once, the bench must
//! know which commands the scripts run. The scripts belong to other crates
//! (the Redis engine, the lock) and change with them, so the list is read
//! from their sources at build time instead of being copied by hand.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The script directories, relative to this crate, and the constant that
/// lists their commands.
const SCRIPT_DIRS: [(&str, &str); 3] = [
    ("../stockade-engine/lua", "ENGINE_SCRIPT_COMMANDS"),
    ("../stockade-lock/src/lua", "LOCK_SCRIPT_COMMANDS"),
    ("lua", "FCFS_SCRIPT_COMMANDS"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let mut out = String::new();
    for (dir, constant) in SCRIPT_DIRS {
        let dir = manifest.join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        let commands: Vec<String> = commands_in(&dir).into_iter().collect();
        let _ = writeln!(
            out,
            "/// The commands the scripts in `{}` call.\npub(crate) const {constant}: &[&str] = &{commands:?};",
            dir.strip_prefix(&manifest).unwrap_or(&dir).display()
        );
    }
    let target =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("script_commands.rs");
    std::fs::write(&target, out).expect("OUT_DIR is writable");
}

/// Every command named by `redis.call('NAME'` or `redis.pcall("NAME"` in
/// the `.lua` files of `dir`, in lower case as `INFO commandstats` names
/// them.
fn commands_in(dir: &Path) -> BTreeSet<String> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading the scripts in {}: {e}", dir.display()));
    let mut commands = BTreeSet::new();
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|ext| ext != "lua") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for call in ["redis.call(", "redis.pcall("] {
            for (at, _) in source.match_indices(call) {
                let rest = source[at + call.len()..].trim_start();
                match quoted_name(rest) {
                    Some(name) => {
                        commands.insert(name.to_ascii_lowercase());
                    }
                    None => println!(
                        "cargo:warning={}: a {call}...) without a literal command name; \
                         its command is not known to the bench's Redis time per purchase",
                        path.display()
                    ),
                }
            }
        }
    }
    commands
}

/// The text of a leading `'...'` or `"..."` literal.
fn quoted_name(text: &str) -> Option<&str> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &text[1..];
    let end = body.find(quote)?;
    Some(&body[..end])
}
