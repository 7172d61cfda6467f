//! One simulated server's state, and the commands about the server
//! itself: scripts and Functions, INFO, CLIENT, SELECT, HELLO. Data
//! commands go on to `commands`.

use std::sync::Arc;

use stockade_core::Clock;

use super::commands::{self, is, wrong_arity};
use super::functions::Registry;
use super::keyspace::Db;
use super::lua::Interp;
use super::resp::Reply;
use super::scripts;

/// Everything a server holds; lost together on a restart.
pub struct State {
    /// The keyspace.
    pub db: Db,
    /// The Lua state scripts and Functions run in.
    pub interp: Interp,
    /// EVAL's scripts cache.
    pub scripts: scripts::Cache,
    /// The loaded Functions libraries.
    pub functions: Registry,
    /// The server's identity, new on every start.
    pub run_id: String,
    /// Every write effect since the start, in order (what a replica gets).
    pub log: Vec<Vec<Vec<u8>>>,
}

/// Commands this module answers (refused inside scripts).
const SERVER_COMMANDS: &[&str] = &[
    "eval", "evalsha", "script", "function", "fcall", "fcall_ro", "info", "client", "select",
    "hello", "auth", "quit",
];

/// Redis commands the simulated server does not have: they get an error
/// that says so, rather than Redis's "unknown command".
const NOT_SIMULATED: &[&str] = &[
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "wait",
    "blpop",
    "brpop",
    "bzpopmin",
    "xread",
    "xreadgroup",
    "xgroup",
    "xack",
    "xtrim",
    "object",
    "debug",
    "config",
    "save",
    "bgsave",
    "replicaof",
    "slaveof",
    "cluster",
    "sentinel",
    "acl",
    "monitor",
];

/// Whether `name` is a command about the server rather than the data.
pub fn is_server_command(name: &[u8]) -> bool {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    SERVER_COMMANDS.contains(&name.as_str()) || NOT_SIMULATED.contains(&name.as_str())
}

impl State {
    /// A server just started, empty, named `run_id`.
    pub fn new(run_id: String) -> Self {
        Self {
            db: Db::default(),
            interp: Interp::new(),
            scripts: scripts::Cache::new(),
            functions: Registry::default(),
            run_id,
            log: Vec::new(),
        }
    }

    /// Runs one command at the instant `clock` reads.
    pub fn execute(&mut self, clock: &Arc<dyn Clock>, args: &[Vec<u8>]) -> Reply {
        let Some(first) = args.first() else {
            return Reply::error("ERR empty command");
        };
        let now = clock.now();
        self.db.now_ms = now.timestamp_millis();
        self.db.now_us = now.timestamp_micros();
        let name = String::from_utf8_lossy(first).to_ascii_lowercase();
        let reply = match name.as_str() {
            "eval" => scripts::eval(self, args, false),
            "evalsha" => scripts::eval(self, args, true),
            "script" => scripts::script(self, args),
            "fcall" => scripts::fcall(self, args, false),
            "fcall_ro" => scripts::fcall(self, args, true),
            "function" => self.function(args),
            "info" => self.info(),
            "client" => client(args),
            "select" if args.len() == 2 => match commands::parse_int(&args[1]) {
                Ok(0) => Reply::ok(),
                Ok(_) => Reply::error("ERR DB index is out of range"),
                Err(error) => error,
            },
            "hello" => Reply::error("NOPROTO unsupported protocol version"),
            "auth" => Reply::error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ),
            "quit" => Reply::ok(),
            "select" => wrong_arity("select"),
            other if NOT_SIMULATED.contains(&other) => Reply::error(format!(
                "ERR {} is not simulated: SimRedis has no transactions, pub/sub delivery, \
                 blocking commands, consumer groups or administration (see stockade_sim::redis)",
                other.to_ascii_uppercase()
            )),
            _ => match commands::dispatch(&mut self.db, args) {
                Some(outcome) => {
                    self.log.extend(outcome.effects);
                    outcome.reply
                }
                None => unknown_command(args),
            },
        };
        // Keys a script or server command found expired.
        let expired: Vec<_> = self.db.expired.drain(..).collect();
        self.log
            .extend(expired.into_iter().map(|key| vec![b"DEL".to_vec(), key]));
        reply
    }

    /// FUNCTION LOAD | LIST | DELETE | FLUSH.
    fn function(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(sub) = args.get(1) else {
            return wrong_arity("function");
        };
        let reply = if is(sub, "LOAD") && args.len() >= 3 {
            let replace = args.len() == 4 && is(&args[2], "REPLACE");
            if args.len() > 4 || (args.len() == 4 && !replace) {
                return Reply::error(format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(&args[2])
                ));
            }
            let code = &args[args.len() - 1];
            let reply = self.functions.load(&self.interp, code, replace);
            if !reply.is_error() {
                self.log.push(vec![
                    b"FUNCTION".to_vec(),
                    b"LOAD".to_vec(),
                    b"REPLACE".to_vec(),
                    code.clone(),
                ]);
            }
            return reply;
        } else if is(sub, "LIST") {
            return self.functions.list(&args[2..]);
        } else if is(sub, "DELETE") && args.len() == 3 {
            self.functions.delete(&String::from_utf8_lossy(&args[2]))
        } else if is(sub, "FLUSH") && args.len() <= 3 {
            self.functions.flush();
            Reply::ok()
        } else {
            return Reply::error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(sub)
            ));
        };
        if !reply.is_error() {
            self.log.push(args.to_vec());
        }
        reply
    }

    /// INFO: the server section, with the run id the engine watches.
    fn info(&mut self) -> Reply {
        let keys = self.db.keys().len();
        let expires = self.db.expiring();
        Reply::bulk(format!(
            "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nrun_id:{}\r\n\r\n# Keyspace\r\ndb0:keys={keys},expires={expires},avg_ttl=0\r\n",
            self.run_id
        ))
    }
}

/// CLIENT SETINFO / SETNAME / GETNAME / ID, which clients send on connect.
fn client(args: &[Vec<u8>]) -> Reply {
    let Some(sub) = args.get(1) else {
        return wrong_arity("client");
    };
    if (is(sub, "SETINFO") && args.len() == 4) || (is(sub, "SETNAME") && args.len() == 3) {
        Reply::ok()
    } else if is(sub, "GETNAME") && args.len() == 2 {
        Reply::Nil
    } else if is(sub, "ID") && args.len() == 2 {
        Reply::Int(1)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}

/// Redis's answer to a command it does not have.
fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let shown: String = args[1..]
        .iter()
        .map(|a| format!("'{}' ", String::from_utf8_lossy(a)))
        .collect();
    Reply::error(format!(
        "ERR unknown command '{}', with args beginning with: {shown}",
        String::from_utf8_lossy(&args[0])
    ))
}
