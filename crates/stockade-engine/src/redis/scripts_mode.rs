//! How a connection runs Stockade's scripts: the setting
//! (`--redis-scripts`, [`ScriptsMode`]) and what was chosen by it when the
//! connection was opened ([`ScriptRunner`]), shared by every clone.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::ConnectionLike;
use redis::{ErrorKind, ServerErrorKind};

/// How a connection runs Stockade's scripts (`--redis-scripts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScriptsMode {
    /// Functions if the server has them (Redis 7 and later), else EVALSHA.
    #[default]
    Auto,
    /// EVALSHA, whatever the server.
    Eval,
    /// Functions; connecting fails if the server has none.
    Functions,
}

impl ScriptsMode {
    /// The names `FromStr` takes, for messages.
    pub const NAMES: &'static str = "auto, eval or functions";
}

impl FromStr for ScriptsMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "auto" => Ok(Self::Auto),
            "eval" => Ok(Self::Eval),
            "functions" => Ok(Self::Functions),
            other => Err(format!(
                "{other:?} is not a way to run scripts: use {}",
                Self::NAMES
            )),
        }
    }
}

impl fmt::Display for ScriptsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Eval => "eval",
            Self::Functions => "functions",
        })
    }
}

/// How one connection (and its clones) runs scripts, chosen when it was
/// opened (`ScriptRunner::detect`).
#[derive(Debug)]
pub struct ScriptRunner {
    setting: ScriptsMode,
    functions: AtomicBool,
}

impl ScriptRunner {
    /// Asks the server behind `connection` whether it has Functions
    /// (`FUNCTION LIST`) when `setting` leaves it open. Fails if `setting`
    /// is [`ScriptsMode::Functions`] and it has none, or if the server
    /// cannot be asked.
    pub(super) async fn detect(
        connection: &mut impl ConnectionLike,
        setting: ScriptsMode,
    ) -> Result<Arc<Self>, String> {
        let functions = match setting {
            ScriptsMode::Eval => false,
            ScriptsMode::Auto | ScriptsMode::Functions => {
                // Any answer will do: a pattern that matches no library
                // keeps it short.
                let probe = redis::cmd("FUNCTION")
                    .arg("LIST")
                    .arg("LIBRARYNAME")
                    .arg("stockade_probe")
                    .query_async::<redis::Value>(connection)
                    .await;
                match (probe, setting) {
                    (Ok(_), _) => true,
                    (Err(error), ScriptsMode::Auto) if has_no_functions(&error) => {
                        tracing::info!(
                            answer = %error,
                            "this Redis has no Functions (Redis 6?): scripts run with EVALSHA"
                        );
                        false
                    }
                    (Err(error), ScriptsMode::Functions) if has_no_functions(&error) => {
                        return Err(format!(
                            "--redis-scripts functions, but this Redis cannot load Functions \
                             ({error}): it needs Redis 7 or later and a user allowed FUNCTION \
                             and FCALL; use --redis-scripts auto or eval"
                        ));
                    }
                    (Err(error), _) => {
                        return Err(format!("asking whether Redis has Functions: {error}"));
                    }
                }
            }
        };
        Ok(Arc::new(Self {
            setting,
            functions: AtomicBool::new(functions),
        }))
    }

    /// Whether scripts run as Functions (else EVALSHA).
    pub fn functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    /// The setting it was chosen by.
    pub fn setting(&self) -> ScriptsMode {
        self.setting
    }

    pub(super) fn may_fall_back(&self) -> bool {
        self.setting == ScriptsMode::Auto
    }

    pub(super) fn fall_back(&self, error: &redis::RedisError) {
        if self.functions.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                answer = %error,
                "Redis no longer knows FCALL (a failover to an older server?): \
                 scripts run with EVALSHA from now on"
            );
        }
    }
}

/// `ERR unknown command 'FCALL'` (Redis 6, or the command renamed away).
pub(super) fn is_unknown_command(error: &redis::RedisError) -> bool {
    error
        .detail()
        .is_some_and(|detail| detail.starts_with("unknown command"))
}

/// A server without Functions, or a user not allowed them (`NOPERM`).
fn has_no_functions(error: &redis::RedisError) -> bool {
    is_unknown_command(error) || error.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_its_three_names_and_refuses_others() {
        for mode in [ScriptsMode::Auto, ScriptsMode::Eval, ScriptsMode::Functions] {
            assert_eq!(mode.to_string().parse::<ScriptsMode>(), Ok(mode));
        }
        assert_eq!(" eval ".parse::<ScriptsMode>(), Ok(ScriptsMode::Eval));
        let error = "lua".parse::<ScriptsMode>().unwrap_err();
        assert!(error.contains("\"lua\""), "{error}");
        assert!(error.contains(ScriptsMode::NAMES), "{error}");
        assert_eq!(ScriptsMode::default(), ScriptsMode::Auto);
    }
}
