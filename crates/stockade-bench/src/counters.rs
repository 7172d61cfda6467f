//! What the servers did during a run, from their own counters: Redis
//! commands and their time from `INFO commandstats`, Redis's CPU time from
//! `INFO cpu`, PostgreSQL transactions from `pg_stat_database`, read before
//! and after the measured run.
//!
//! `INFO commandstats` counts every command Redis executed, including those
//! a Lua script runs with `redis.call`: it is the work Redis did, not the
//! number of round trips. It counts every client's commands, so on a shared
//! server the figure includes other traffic.
//!
//! Redis's time per purchase is measured two ways, since each misses
//! something. The commands' time (`usec` of `INFO commandstats`) is spent
//! executing commands only, measured by the wall clock (so a descheduled
//! server inflates it); a script's time includes the commands it runs,
//! which are also listed on their own, so those are counted once (see
//! [`RedisWork::command_us`]). The CPU time (`used_cpu_sys` +
//! `used_cpu_user`) is the whole server process: reading requests, writing
//! replies and the event loop as well, which for small commands is most of
//! it.
//!
//! PostgreSQL sessions report their transactions to the statistics system
//! lazily (up to seconds later). The strategies therefore force a report
//! before the first reading (`pg_stat_force_next_flush()`, PostgreSQL 15+),
//! and close their sessions before the second one: an ending session
//! reports everything. The monitor reads from another database when it can,
//! so that its own queries are not counted; when it must share the bench's
//! database it counts its own transactions and subtracts them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, Row};

use crate::strategy::StrategyError;
use crate::strategy::pg_schema::APPLICATION_NAME;

/// How long to wait for the strategy's sessions to end after the run
/// before ending them (an sqlx pool that is closed can, rarely, leave a
/// session or two open).
const SESSIONS_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for them in all.
const SESSIONS_END_TIMEOUT: Duration = Duration::from_secs(10);

/// The commands that run a Lua script or function: their time in `INFO
/// commandstats` already includes every command the script ran.
pub const SCRIPT_RUNNERS: [&str; 6] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// `INFO` calls one [`RedisMonitor::read`] makes (`commandstats`, then
/// `cpu`; two calls rather than one `INFO commandstats cpu`, which Redis
/// before 7.0 refuses). The next reading counts them.
const INFO_CALLS_PER_READING: u64 = 2;

/// Reads Redis's command and CPU counters.
pub struct RedisMonitor {
    conn: MultiplexedConnection,
}

impl RedisMonitor {
    /// Connects to the Redis at `url`.
    pub async fn connect(url: &str) -> Result<Self, StrategyError> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self { conn })
    }

    /// Calls and time per command, and the server's CPU time, so far.
    pub async fn read(&mut self) -> Result<RedisReading, StrategyError> {
        let commandstats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await?;
        let cpu: String = redis::cmd("INFO")
            .arg("cpu")
            .query_async(&mut self.conn)
            .await?;
        RedisReading::parse(&commandstats, &cpu).map_err(StrategyError::Other)
    }
}

/// One command's line of `INFO commandstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandStat {
    /// Times the command ran.
    pub calls: u64,
    /// Time spent running it, in microseconds (wall-clock time inside the
    /// command, so a descheduled server inflates it).
    pub usec: u64,
}

/// Redis's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisReading {
    /// By command (`get`, `evalsha`, `client|setinfo`, ...).
    pub commands: BTreeMap<String, CommandStat>,
    /// `used_cpu_sys` + `used_cpu_user` of `INFO cpu`: the CPU time of the
    /// whole server process (commands, networking, event loop), in
    /// microseconds.
    pub cpu_us: u64,
}

impl RedisReading {
    /// Reads the text of `INFO commandstats` and `INFO cpu`.
    pub fn parse(commandstats: &str, cpu: &str) -> Result<Self, String> {
        let field = |name: &str| -> Result<u64, String> {
            let seconds: f64 = cpu
                .lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .ok_or_else(|| format!("INFO cpu has no {name}"))?
                .parse()
                .map_err(|e| format!("INFO cpu: {name} is not a number: {e}"))?;
            Ok((seconds * 1e6).round() as u64)
        };
        Ok(Self {
            commands: parse_commandstats(commandstats),
            cpu_us: field("used_cpu_sys")? + field("used_cpu_user")?,
        })
    }

    /// What Redis did between `before` and `self`, leaving out the `INFO`
    /// calls that took the `before` reading.
    pub fn since(&self, before: &RedisReading) -> RedisWork {
        let mut commands = BTreeMap::new();
        for (command, now) in &self.commands {
            let then = before.commands.get(command).copied().unwrap_or_default();
            let mut stat = CommandStat {
                calls: now.calls.saturating_sub(then.calls),
                usec: now.usec.saturating_sub(then.usec),
            };
            if command == "info" {
                // The monitor's own calls: drop them, and their share of
                // the time.
                let others = stat.calls.saturating_sub(INFO_CALLS_PER_READING);
                stat.usec = (stat.usec * others).checked_div(stat.calls).unwrap_or(0);
                stat.calls = others;
            }
            if stat.calls > 0 {
                commands.insert(command.clone(), stat);
            }
        }
        RedisWork {
            commands,
            cpu_us: self.cpu_us.saturating_sub(before.cpu_us),
        }
    }
}

/// What Redis did during a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisWork {
    /// By command, as `INFO commandstats` counts them: a command run inside
    /// a script is counted both on its own and within the script's
    /// `EVALSHA`.
    pub commands: BTreeMap<String, CommandStat>,
    /// The server's CPU time, in microseconds.
    pub cpu_us: u64,
}

impl RedisWork {
    /// Calls per command.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.commands
            .iter()
            .map(|(command, stat)| (command.clone(), stat.calls))
            .collect()
    }

    /// The time Redis spent in commands, each microsecond counted once.
    ///
    /// A script's `EVALSHA` (or `EVAL`, `FCALL`) time includes the commands
    /// the script ran, which `INFO commandstats` also counts on their own
    /// (checked on Redis 7.0: a script of 200,000 `SET`s shows `SET` with
    /// 200,000 calls and 86 ms, and `EVAL` with 699 ms). So when a script
    /// ran, the commands named in `script_commands` (those the strategy's
    /// scripts call) are left out. A command that the strategy also sends
    /// on its own is then left out too: see [`RedisWork::overlap_us`].
    pub fn command_us(&self, script_commands: &[&str]) -> u64 {
        let scripts_ran = SCRIPT_RUNNERS
            .iter()
            .any(|runner| self.commands.contains_key(*runner));
        self.commands
            .iter()
            .filter(|(command, _)| !(scripts_ran && script_commands.contains(&command.as_str())))
            .map(|(_, stat)| stat.usec)
            .sum()
    }

    /// The time of `commands` (those a strategy sends both on its own and
    /// from its scripts), which [`RedisWork::command_us`] leaves out: the
    /// most it can under-count by.
    pub fn overlap_us(&self, commands: &[&str]) -> u64 {
        commands
            .iter()
            .filter_map(|command| self.commands.get(*command))
            .map(|stat| stat.usec)
            .sum()
    }
}

/// Parses the `cmdstat_NAME:calls=N,usec=M,...` lines of `INFO
/// commandstats`.
pub fn parse_commandstats(info: &str) -> BTreeMap<String, CommandStat> {
    info.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("cmdstat_")?;
            let (name, fields) = rest.split_once(':')?;
            let field = |key: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            Some((
                name.to_owned(),
                CommandStat {
                    calls: field("calls")?,
                    usec: field("usec")?,
                },
            ))
        })
        .collect()
}

/// Where the bench's database is, and where to watch it from.
#[derive(Debug, Clone)]
pub struct DatabaseTarget {
    /// The database the strategy uses.
    pub url: String,
    /// Another database on the same server to read counters from, if known.
    pub monitor_url: Option<String>,
}

/// A reading of the bench database's transaction counter.
#[derive(Debug, Clone, Copy)]
pub struct TransactionReading {
    transactions: u64,
    /// The monitor's own statements before this reading.
    own_before: u64,
}

/// Reads PostgreSQL's transaction counters for one database.
pub struct PgMonitor {
    conn: PgConnection,
    database: String,
    /// Whether the monitor sits in the bench's database (its own
    /// transactions are then counted there, and subtracted).
    same_database: bool,
    /// Whether this session may force its statistics out at once.
    can_flush: bool,
    own_statements: u64,
}

impl PgMonitor {
    /// Connects to `target.monitor_url` if it can, else to the bench's
    /// database itself.
    pub async fn connect(target: &DatabaseTarget) -> Result<Self, StrategyError> {
        let options: PgConnectOptions = target.url.parse()?;
        let database = options
            .get_database()
            .map(str::to_owned)
            // PostgreSQL's default database is named after the user.
            .unwrap_or_else(|| options.get_username().to_owned());
        let elsewhere = match &target.monitor_url {
            Some(url) => PgConnection::connect(url).await.ok(),
            None => None,
        };
        let (conn, same_database) = match elsewhere {
            Some(conn) => (conn, false),
            None => (PgConnection::connect(&target.url).await?, true),
        };
        let mut monitor = Self {
            conn,
            database,
            same_database,
            can_flush: true,
            own_statements: 0,
        };
        if same_database {
            // Find out whether this role may force its statistics out; a
            // refusal is remembered and the reading becomes approximate.
            monitor.own_statements += 1;
            monitor.can_flush = sqlx::raw_sql("SELECT pg_stat_force_next_flush()")
                .execute(&mut monitor.conn)
                .await
                .is_ok();
        }
        Ok(monitor)
    }

    /// Whether readings are exact (false when the monitor shares the bench
    /// database and cannot force its own statistics out).
    pub fn exact(&self) -> bool {
        !self.same_database || self.can_flush
    }

    /// Committed plus rolled-back transactions of the bench database so far.
    pub async fn read(&mut self) -> Result<TransactionReading, StrategyError> {
        Ok(self.sample(false).await?.0)
    }

    /// Waits until every session the strategies opened on the bench
    /// database has ended (an ending session reports its statistics), then
    /// reads. The flag is false if some sessions were still open after the
    /// timeout.
    pub async fn read_when_sessions_end(
        &mut self,
    ) -> Result<(TransactionReading, bool), StrategyError> {
        let started = Instant::now();
        let mut terminated = false;
        loop {
            // Past the grace period, end the sessions left over: a session
            // ended by pg_terminate_backend still reports its statistics.
            let terminate = !terminated && started.elapsed() > SESSIONS_GRACE;
            terminated |= terminate;
            let (reading, sessions) = self.sample(terminate).await?;
            if sessions == 0 {
                return Ok((reading, true));
            }
            if started.elapsed() > SESSIONS_END_TIMEOUT {
                return Ok((reading, false));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// One statement, in the simple query protocol (exactly one
    /// transaction, no prepare step that would count as another), that
    /// reads the transaction counter and the strategy's open sessions. In
    /// the bench's own database it also forces its statistics out, so it
    /// is counted at once. (Separate statements for the two did not always
    /// report at once: keep it one.)
    async fn sample(
        &mut self,
        terminate: bool,
    ) -> Result<(TransactionReading, i64), StrategyError> {
        let database = quote_literal(&self.database);
        let application = quote_literal(&APPLICATION_NAME);
        let flush = if self.same_database && self.can_flush {
            " FROM (SELECT pg_stat_force_next_flush()) AS flushed"
        } else {
            ""
        };
        let sessions = format!(
            "FROM pg_stat_activity WHERE datname = {database} AND application_name = {application}"
        );
        let end_sessions = if terminate {
            format!(", (SELECT count(pg_terminate_backend(pid)) {sessions})")
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT (SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database \
                     WHERE datname = {database}), \
                    (SELECT count(*) {sessions}){end_sessions}{flush}"
        );
        let own_before = self.own_statements;
        self.own_statements += 1;
        let row = sqlx::raw_sql(&sql).fetch_one(&mut self.conn).await?;
        let transactions: i64 = row.try_get(0)?;
        let sessions: i64 = row.try_get(1)?;
        Ok((
            TransactionReading {
                transactions: transactions.max(0) as u64,
                own_before,
            },
            sessions,
        ))
    }

    /// The bench's transactions between two readings.
    pub fn since(&self, before: TransactionReading, after: TransactionReading) -> u64 {
        let own = if self.same_database {
            after.own_before - before.own_before
        } else {
            0
        };
        after
            .transactions
            .saturating_sub(before.transactions)
            .saturating_sub(own)
    }

    /// Closes the monitor's connection.
    pub async fn close(self) {
        let _ = self.conn.close().await;
    }
}

/// `text` as an SQL string literal.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=100,usec=900,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_get:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_client|setinfo:calls=4,usec=2,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=3,usec=70,usec_per_call=23.33,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn literals_are_quoted() {
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    const CPU: &str = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.000001\r\n\
        used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n";

    fn reading(commands: &[(&str, u64, u64)], cpu_us: u64) -> RedisReading {
        RedisReading {
            commands: commands
                .iter()
                .map(|(name, calls, usec)| {
                    (
                        (*name).to_owned(),
                        CommandStat {
                            calls: *calls,
                            usec: *usec,
                        },
                    )
                })
                .collect(),
            cpu_us,
        }
    }

    #[test]
    fn commandstats_and_cpu_are_parsed() {
        let reading = RedisReading::parse(INFO, CPU).unwrap();
        assert_eq!(
            reading.commands["evalsha"],
            CommandStat {
                calls: 100,
                usec: 900
            }
        );
        assert_eq!(reading.commands["client|setinfo"].calls, 4);
        assert_eq!(reading.commands.len(), 4);
        assert_eq!(reading.cpu_us, 3_250_001);
    }

    #[test]
    fn a_reading_without_cpu_time_is_refused() {
        let error = RedisReading::parse(INFO, "# CPU\r\nused_cpu_sys:0.5\r\n").unwrap_err();
        assert!(error.contains("used_cpu_user"), "{error}");
        let error = RedisReading::parse(INFO, "used_cpu_sys:x\r\nused_cpu_user:1\r\n").unwrap_err();
        assert!(error.contains("not a number"), "{error}");
    }

    #[test]
    fn the_delta_leaves_out_the_readings_themselves() {
        let before = RedisReading::parse(INFO, CPU).unwrap();
        let after = reading(
            &[
                ("evalsha", 250, 2_400),
                ("get", 100, 50),
                ("client|setinfo", 4, 2),
                // The two INFO calls of the first reading.
                ("info", 5, 130),
                ("sismember", 150, 75),
            ],
            before.cpu_us + 4_000,
        );
        let work = after.since(&before);
        assert_eq!(work.commands.get("info"), None);
        assert_eq!(work.commands.get("get"), None);
        assert_eq!(
            work.commands["evalsha"],
            CommandStat {
                calls: 150,
                usec: 1_500
            }
        );
        assert_eq!(work.calls().values().sum::<u64>(), 300);
        assert_eq!(work.cpu_us, 4_000);
    }

    #[test]
    fn commands_run_by_a_script_are_timed_once() {
        // Redis lists the script's SISMEMBER, GET, DECR and SADD on their
        // own and within the EVALSHA's time.
        let before = reading(&[], 0);
        let after = reading(
            &[
                ("evalsha", 1_000, 9_000),
                ("sismember", 1_000, 400),
                ("get", 1_000, 300),
                ("decr", 1_000, 300),
                ("sadd", 1_000, 500),
            ],
            20_000,
        );
        let work = after.since(&before);
        let script = ["decr", "get", "sadd", "sismember"];
        assert_eq!(work.command_us(&script), 9_000);
        // Without scripts in the run, every command counts.
        let plain = reading(&[("decr", 1_000, 300), ("incr", 10, 5)], 0).since(&before);
        assert_eq!(plain.command_us(&script), 305);
        assert_eq!(work.overlap_us(&["get"]), 300);
    }
}
