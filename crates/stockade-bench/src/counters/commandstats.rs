//! Redis's work from its own counters: calls and time per command from
//! `INFO commandstats`, CPU time from `INFO cpu`, and the delta of a run.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;

use crate::strategy::StrategyError;

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

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=100,usec=900,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_get:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_client|setinfo:calls=4,usec=2,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=3,usec=70,usec_per_call=23.33,rejected_calls=0,failed_calls=0\r\n";

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
