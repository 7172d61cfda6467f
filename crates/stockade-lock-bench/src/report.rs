//! The report: one result per library, as JSON (`{"results": [...]}`) and as
//! a markdown table.

use serde::Serialize;

use crate::LockBenchOptions;
use crate::harness::Measurement;

/// The results of one run.
#[derive(Debug, Clone, Serialize)]
pub struct LockBenchReport {
    /// One entry per library: `stockade-lock`, then `rslock`.
    pub results: Vec<StrategyResult>,
    /// What was run (not serialized).
    #[serde(skip)]
    pub options: LockBenchOptions,
}

/// One library's numbers. Serializes to exactly `strategy`,
/// `handoff_p50_us`, `handoff_p99_us`, `acquisitions_per_second` and
/// `redis_cmds_per_acquisition`.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyResult {
    /// `stockade-lock` or `rslock`.
    pub strategy: String,
    /// Median hand-off: release call to the next holder's acquire, µs.
    pub handoff_p50_us: f64,
    /// 99th percentile hand-off, µs.
    pub handoff_p99_us: f64,
    /// Acquisitions per second while a crowd drains through the lock.
    pub acquisitions_per_second: f64,
    /// Commands Redis executed per acquisition (`INFO commandstats`,
    /// commands inside Lua scripts included).
    pub redis_cmds_per_acquisition: f64,
    /// Counts behind the numbers (not serialized).
    #[serde(skip)]
    pub details: StrategyDetails,
}

/// The counts behind a [`StrategyResult`].
#[derive(Debug, Clone, Default)]
pub struct StrategyDetails {
    /// Acquisitions in the window.
    pub acquisitions: u64,
    /// Hand-offs timed.
    pub handoffs: u64,
    /// Crowds drained.
    pub rounds: u64,
    /// The window, seconds.
    pub seconds: f64,
    /// Requests clients sent per acquisition (round trips).
    pub requests_per_acquisition: f64,
    /// Commands Redis ran in the window, most frequent first.
    pub commands: Vec<(String, u64)>,
}

fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

impl StrategyResult {
    pub(crate) fn from_measurement(
        strategy: &str,
        measurement: &Measurement,
        script_commands: &[&str],
    ) -> Self {
        let micros = |quantile| measurement.handoffs.value_at_quantile(quantile) as f64 / 1000.0;
        let acquisitions = measurement.acquisitions.max(1) as f64;
        let seconds = measurement.draining.as_secs_f64().max(f64::MIN_POSITIVE);
        Self {
            strategy: strategy.to_owned(),
            handoff_p50_us: round(micros(0.50), 1),
            handoff_p99_us: round(micros(0.99), 1),
            acquisitions_per_second: round(measurement.acquisitions as f64 / seconds, 1),
            redis_cmds_per_acquisition: round(
                measurement.commands.total() as f64 / acquisitions,
                2,
            ),
            details: StrategyDetails {
                acquisitions: measurement.acquisitions,
                handoffs: measurement.handoffs.len(),
                rounds: measurement.rounds,
                seconds: measurement.window.as_secs_f64(),
                requests_per_acquisition: round(
                    measurement.commands.requests(script_commands) as f64 / acquisitions,
                    2,
                ),
                commands: measurement.commands.breakdown(),
            },
        }
    }
}

impl LockBenchReport {
    /// The results as a markdown table, with the hand-off ratio against
    /// `rslock`.
    pub fn to_markdown(&self) -> String {
        let options = &self.options;
        let mut out = format!(
            "crowds of {} waiters over {} clients per library, hold {:?}, lease {:?}, {:?} window after {:?} warm-up\n\n",
            options.waiters,
            options.clients,
            options.hold,
            options.lease,
            options.duration,
            options.warmup
        );
        out.push_str(
            "| strategy | hand-off p50 (µs) | hand-off p99 (µs) | acquisitions/s | Redis commands/acquisition | client requests/acquisition | hand-offs measured |\n",
        );
        out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for result in &self.results {
            out.push_str(&format!(
                "| {} | {:.1} | {:.1} | {:.0} | {:.2} | {:.2} | {} |\n",
                result.strategy,
                result.handoff_p50_us,
                result.handoff_p99_us,
                result.acquisitions_per_second,
                result.redis_cmds_per_acquisition,
                result.details.requests_per_acquisition,
                result.details.handoffs,
            ));
        }
        let find = |name: &str| self.results.iter().find(|r| r.strategy == name);
        if let (Some(ours), Some(theirs)) = (find("stockade-lock"), find("rslock"))
            && ours.handoff_p50_us > 0.0
        {
            out.push_str(&format!(
                "\nhand-off p50: rslock / stockade-lock = {:.1}×; p99: {:.1}×\n",
                theirs.handoff_p50_us / ours.handoff_p50_us,
                theirs.handoff_p99_us / ours.handoff_p99_us.max(f64::MIN_POSITIVE),
            ));
            if theirs.redis_cmds_per_acquisition > 0.0 {
                out.push_str(&format!(
                    "Redis commands per acquisition: stockade-lock / rslock = {:.2}×\n",
                    ours.redis_cmds_per_acquisition / theirs.redis_cmds_per_acquisition,
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_exactly_the_agreed_fields() {
        let report = LockBenchReport {
            results: vec![StrategyResult {
                strategy: "rslock".to_owned(),
                handoff_p50_us: 1.5,
                handoff_p99_us: 2.5,
                acquisitions_per_second: 3.0,
                redis_cmds_per_acquisition: 4.0,
                details: StrategyDetails::default(),
            }],
            options: LockBenchOptions::default(),
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"results": [{
                "strategy": "rslock",
                "handoff_p50_us": 1.5,
                "handoff_p99_us": 2.5,
                "acquisitions_per_second": 3.0,
                "redis_cmds_per_acquisition": 4.0
            }]})
        );
        assert!(report.to_markdown().contains("| rslock | 1.5 | 2.5 | 3 |"));
    }
}
