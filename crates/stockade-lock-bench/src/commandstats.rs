//! Counting the commands Redis ran, from `INFO commandstats`.

use std::collections::HashMap;

/// Calls per command name (lower case, subcommands as `script|load`).
#[derive(Debug, Clone, Default)]
pub struct CommandStats(HashMap<String, u64>);

impl CommandStats {
    /// Reads the server's counters.
    pub async fn read(
        connection: &mut redis::aio::MultiplexedConnection,
    ) -> Result<Self, redis::RedisError> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(connection)
            .await?;
        Ok(Self::parse(&info))
    }

    /// Parses the text of `INFO commandstats`.
    pub fn parse(info: &str) -> Self {
        Self(
            info.lines()
                .filter_map(|line| {
                    let (name, stats) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
                    let calls = stats
                        .split(',')
                        .find_map(|field| field.strip_prefix("calls="))?
                        .parse()
                        .ok()?;
                    Some((name.to_owned(), calls))
                })
                .collect(),
        )
    }

    /// What ran between `earlier` and `self`, leaving out `INFO` (the
    /// snapshots themselves).
    pub fn since(&self, earlier: &Self) -> CommandDelta {
        let calls = self
            .0
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(name, calls)| {
                let before = earlier.0.get(name).copied().unwrap_or(0);
                (name.clone(), calls.saturating_sub(before))
            })
            .filter(|(_, calls)| *calls > 0)
            .collect();
        CommandDelta(calls)
    }
}

/// Commands run during a measurement.
#[derive(Debug, Clone, Default)]
pub struct CommandDelta(HashMap<String, u64>);

impl CommandDelta {
    /// Every command Redis executed, commands run inside Lua scripts included
    /// (that is how `INFO commandstats` counts).
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The commands clients sent (round trips): the total less the calls of
    /// `script_commands`, the commands a library only ever runs inside its
    /// scripts.
    pub fn requests(&self, script_commands: &[&str]) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| !script_commands.contains(&name.as_str()))
            .map(|(_, calls)| calls)
            .sum()
    }

    /// Calls per command, most frequent first.
    pub fn breakdown(&self) -> Vec<(String, u64)> {
        let mut calls: Vec<_> = self.0.iter().map(|(n, c)| (n.clone(), *c)).collect();
        calls.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_subtracts() {
        let before = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5\r\ncmdstat_info:calls=1,usec=1\r\n",
        );
        let after = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=15,usec=9\r\ncmdstat_set:calls=5,usec=1\r\ncmdstat_info:calls=3,usec=1\r\ncmdstat_script|load:calls=1,usec=1\r\n",
        );
        let delta = after.since(&before);
        assert_eq!(delta.total(), 11);
        assert_eq!(delta.requests(&["set"]), 6);
        assert_eq!(delta.breakdown()[0], ("evalsha".to_owned(), 5));
    }
}
