//! Stockade's server-side Lua scripts, grouped per owner (the engine, the
//! waiting room, the rate limiter) into one [`Library`] each, and run the
//! way the connection chose when it was opened
//! ([`ScriptsMode`](super::ScriptsMode)):
//!
//! - **Functions** (Redis 7 and later): the library is one Redis Functions
//!   library, loaded with `FUNCTION LOAD REPLACE` and called with `FCALL`.
//!   Functions are part of the data set: they survive a restart with
//!   persistence and replicate, so a promoted replica already has them.
//!   The library's name carries its version, the first
//!   [`VERSION_DIGITS`] hex digits of the SHA-256 of its scripts
//!   (`stockade_engine_3f9a0c1b2d4e`), and so does every function's name
//!   (`stockade_engine_3f9a0c1b2d4e_purchase`): two versions of Stockade
//!   run side by side on one Redis during a rolling upgrade, each calling
//!   its own code (two libraries cannot register one function name).
//!   Old versions stay loaded; `docs/operations.md` says how to delete them.
//! - **EVALSHA** (Redis 6, or forced): each script on its own, as
//!   `redis::Script` runs it.
//!
//! Either way a script the server lacks (`FUNCTION FLUSH`, `SCRIPT FLUSH`, a
//! server restarted empty, a replica promoted that never got it) is loaded
//! and the call retried once, so callers never see it. On a Cluster, FCALL
//! and EVALSHA go to the slot of their first key and the load goes to every
//! primary (the client routes `FUNCTION LOAD` and `SCRIPT LOAD` to all).

use std::sync::Arc;

use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, ToRedisArgs};
use sha2::{Digest, Sha256};

use super::SharedConnection;
use super::scripts_mode::is_unknown_command;

/// How many hex digits of the SHA-256 of a library's scripts name its
/// version: 48 bits, so two releases never share a name by chance.
pub const VERSION_DIGITS: usize = 12;

/// Named Lua scripts that load together as one versioned library.
pub struct Library {
    code: Arc<Code>,
    /// Script names and their sources, in registration order.
    scripts: Vec<(String, String)>,
}

/// What `FUNCTION LOAD` sends.
struct Code {
    /// `{owner}_{version}`.
    name: String,
    /// The shebang and one `redis.register_function` per script.
    source: String,
}

impl Library {
    /// A library of `scripts` (name, Lua source), named after `owner` and
    /// the SHA-256 of the scripts. Each source is the body of a script as
    /// EVAL runs it (`KEYS`, `ARGV`, `return`); it becomes the body of a
    /// function of `(KEYS, ARGV)`.
    ///
    /// # Panics
    /// If `owner` or a script name is not made of `a-z 0-9 _` (what
    /// Redis takes in library and function names), or a name repeats:
    /// both are constants of the program, not inputs.
    pub fn new(owner: &str, scripts: &[(&str, &str)]) -> Self {
        let valid = |name: &str| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        assert!(valid(owner), "library owner {owner:?}: use a-z, 0-9 and _");
        let mut hash = Sha256::new();
        for (index, (name, source)) in scripts.iter().enumerate() {
            assert!(valid(name), "script name {name:?}: use a-z, 0-9 and _");
            assert!(
                !scripts[..index].iter().any(|(other, _)| other == name),
                "script {name:?} is listed twice in library {owner:?}"
            );
            // Lengths first, so that no two lists hash the same text.
            hash.update((name.len() as u64).to_le_bytes());
            hash.update(name.as_bytes());
            hash.update((source.len() as u64).to_le_bytes());
            hash.update(source.as_bytes());
        }
        let version = hex::encode(hash.finalize());
        let name = format!("{owner}_{}", &version[..VERSION_DIGITS]);
        let mut source = format!("#!lua name={name}\n");
        for (script, body) in scripts {
            source.push_str(&format!(
                "redis.register_function{{function_name='{name}_{script}', \
                 callback=function(KEYS, ARGV)\n{body}\nend}}\n"
            ));
        }
        Self {
            code: Arc::new(Code { name, source }),
            scripts: scripts
                .iter()
                .map(|(name, source)| ((*name).to_owned(), (*source).to_owned()))
                .collect(),
        }
    }

    /// The library's name, `{owner}_{version}`: what `FUNCTION LIST` shows
    /// and `FUNCTION DELETE` takes.
    pub fn name(&self) -> &str {
        &self.code.name
    }

    /// The text `FUNCTION LOAD` sends.
    pub fn source(&self) -> &str {
        &self.code.source
    }

    /// The handle of the script `name`, called like a `redis::Script`.
    ///
    /// # Panics
    /// If the library has no script of that name (a constant of the
    /// program).
    pub fn script(&self, name: &str) -> LibraryScript {
        let (_, source) = self
            .scripts
            .iter()
            .find(|(script, _)| script == name)
            .unwrap_or_else(|| panic!("library {} has no script {name:?}", self.code.name));
        LibraryScript {
            code: Arc::clone(&self.code),
            function: format!("{}_{name}", self.code.name),
            eval: redis::Script::new(source),
        }
    }

    /// Loads the library (replacing one of the same name), on every primary
    /// of a Cluster.
    pub async fn load(&self, connection: &mut SharedConnection) -> RedisResult<()> {
        self.code.load(connection).await
    }
}

impl Code {
    async fn load(&self, connection: &mut SharedConnection) -> RedisResult<()> {
        let _name: redis::Value = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(&self.source)
            .query_async(connection)
            .await?;
        tracing::info!(library = %self.name, "loaded the Redis Functions library");
        Ok(())
    }
}

/// One script of a [`Library`]: the call-site API of `redis::Script`.
pub struct LibraryScript {
    code: Arc<Code>,
    /// `{library}_{script}`.
    function: String,
    /// The same script for EVALSHA.
    eval: redis::Script,
}

impl LibraryScript {
    /// The name of its function, `{library}_{script}`.
    pub fn function_name(&self) -> &str {
        &self.function
    }

    /// An invocation with no keys or arguments yet.
    pub fn prepare_invoke(&self) -> ScriptInvocation<'_> {
        ScriptInvocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// An invocation with its first key.
    pub fn key<T: ToRedisArgs>(&self, key: T) -> ScriptInvocation<'_> {
        let mut invocation = self.prepare_invoke();
        invocation.key(key);
        invocation
    }

    /// An invocation with its first argument.
    pub fn arg<T: ToRedisArgs>(&self, arg: T) -> ScriptInvocation<'_> {
        let mut invocation = self.prepare_invoke();
        invocation.arg(arg);
        invocation
    }
}

/// The keys and arguments of one call of a [`LibraryScript`].
pub struct ScriptInvocation<'a> {
    script: &'a LibraryScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl ScriptInvocation<'_> {
    /// Adds a key (`KEYS[i]`).
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds an argument (`ARGV[i]`).
    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Runs the script the way `connection` runs scripts, loading it and
    /// retrying once if the server lacks it.
    pub async fn invoke_async<T: FromRedisValue>(
        &self,
        connection: &mut SharedConnection,
    ) -> RedisResult<T> {
        if !connection.scripts().functions() {
            return self.evalsha(connection).await;
        }
        let fcall = self.command("FCALL", &self.script.function);
        match fcall.query_async(connection).await {
            Err(error) if is_function_missing(&error) => {
                self.script.code.load(connection).await?;
                fcall.query_async(connection).await
            }
            // The primary was replaced by a server without Functions (a
            // failover during a Redis downgrade): EVALSHA from now on.
            Err(error) if is_unknown_command(&error) && connection.scripts().may_fall_back() => {
                connection.scripts().fall_back(&error);
                self.evalsha(connection).await
            }
            result => result,
        }
    }

    async fn evalsha<T: FromRedisValue>(
        &self,
        connection: &mut SharedConnection,
    ) -> RedisResult<T> {
        let evalsha = self.command("EVALSHA", self.script.eval.get_hash());
        match evalsha.query_async(connection).await {
            Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.eval.load_async(connection).await?;
                evalsha.query_async(connection).await
            }
            result => result,
        }
    }

    /// `FCALL function` or `EVALSHA sha1`, then the keys and arguments.
    fn command(&self, verb: &str, target: &str) -> Cmd {
        let mut command = redis::cmd(verb);
        command
            .arg(target)
            .arg(self.keys.len())
            .arg(&*self.keys)
            .arg(&*self.args);
        command
    }
}

/// `ERR Function not found`: flushed, or never loaded on this server.
fn is_function_missing(error: &redis::RedisError) -> bool {
    error
        .detail()
        .is_some_and(|detail| detail.starts_with("Function not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPTS: &[(&str, &str)] = &[
        ("take", "local n = tonumber(ARGV[1])\nreturn n"),
        ("put", "return redis.call('GET', KEYS[1])"),
    ];

    #[test]
    fn the_name_is_the_owner_and_a_version_that_follows_the_scripts() {
        let library = Library::new("stockade_test", SCRIPTS);
        let version = library.name().strip_prefix("stockade_test_").unwrap();
        assert_eq!(version.len(), VERSION_DIGITS);
        assert!(version.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            Library::new("stockade_test", SCRIPTS).name(),
            library.name()
        );
        let edited = Library::new("stockade_test", &[SCRIPTS[0], ("put", "return 1")]);
        assert_ne!(edited.name(), library.name(), "a changed source");
        let renamed = Library::new("stockade_test", &[SCRIPTS[0], ("put2", SCRIPTS[1].1)]);
        assert_ne!(renamed.name(), library.name(), "a renamed script");
        // Lengths are hashed: moving text between name and source is a change.
        let shifted = Library::new("stockade_test", &[("ta", "ke"), ("x", "")]);
        let unshifted = Library::new("stockade_test", &[("tak", "e"), ("x", "")]);
        assert_ne!(shifted.name(), unshifted.name());
    }

    #[test]
    fn every_script_is_a_function_named_after_the_library() {
        let library = Library::new("stockade_test", SCRIPTS);
        let name = library.name();
        let source = library.source();
        assert!(
            source.starts_with(&format!("#!lua name={name}\n")),
            "{source}"
        );
        for (script, body) in SCRIPTS {
            let function = library.script(script);
            assert_eq!(function.function_name(), format!("{name}_{script}"));
            assert!(source.contains(&format!(
                "function_name='{name}_{script}', callback=function(KEYS, ARGV)\n{body}\nend}}"
            )));
        }
    }

    #[test]
    #[should_panic(expected = "has no script \"missing\"")]
    fn an_unknown_script_is_a_programming_error() {
        let _ = Library::new("stockade_test", SCRIPTS).script("missing");
    }

    #[test]
    #[should_panic(expected = "use a-z, 0-9 and _")]
    fn a_name_redis_would_refuse_is_a_programming_error() {
        let _ = Library::new("stockade-test", SCRIPTS);
    }
}
