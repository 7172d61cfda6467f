//! The result of each phase of each target, and every result as a
//! Markdown table (with the ratios to the baseline) or as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::Phase;
use crate::report::{format_rate, format_us};

/// One phase of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseResult {
    /// The target's name.
    pub target: String,
    /// The phase.
    pub phase: Phase,
    /// Keep-alive connections, one request in flight on each.
    pub connections: usize,
    /// Requests answered.
    pub requests: u64,
    /// From the first request to the last answer, in seconds.
    pub elapsed_s: f64,
    /// Requests answered per second.
    pub per_second: f64,
    /// Median answer time.
    pub p50_us: u64,
    /// 99th percentile answer time.
    pub p99_us: u64,
    /// Answers by HTTP status (and error code), e.g. `201`,
    /// `409 sold_out`, `no answer`.
    pub statuses: BTreeMap<String, u64>,
    /// The baseline's requests/s in the run just before this one (None for
    /// the baseline itself).
    pub baseline_per_second: Option<f64>,
    /// `per_second` over `baseline_per_second`.
    pub ratio_to_baseline: Option<f64>,
    /// Whether every check held.
    pub ok: bool,
    /// What broke, in words.
    pub problems: Vec<String>,
}

/// Every phase of every target, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HttpBenchReport {
    /// Keep-alive connections.
    pub connections: usize,
    /// Length of each phase, in seconds.
    pub duration_s: f64,
    /// Baseline runs and target runs, each target's run right after the
    /// baseline run it is compared with.
    pub results: Vec<PhaseResult>,
}

impl HttpBenchReport {
    /// Whether every check held.
    pub fn all_ok(&self) -> bool {
        self.results.iter().all(|r| r.ok)
    }

    /// The ratio to the baseline of each target and phase.
    pub fn ratios(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut ratios: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for r in &self.results {
            if let Some(ratio) = r.ratio_to_baseline {
                ratios
                    .entry(r.target.clone())
                    .or_default()
                    .insert(r.phase.as_str().to_owned(), ratio);
            }
        }
        ratios
    }

    /// One JSON object: the settings, `results` and `ratios`.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            report: &'a HttpBenchReport,
            ratios: BTreeMap<String, BTreeMap<String, f64>>,
        }
        serde_json::to_string_pretty(&Json {
            report: self,
            ratios: self.ratios(),
        })
        .expect("a report always serializes")
    }

    /// The table, what broke, and the ratios.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| target | phase | requests/s | p50 | p99 | answers | vs baseline |\n\
             | --- | --- | ---: | ---: | ---: | --- | ---: |\n",
        );
        for r in &self.results {
            let statuses: Vec<String> = r
                .statuses
                .iter()
                .map(|(status, count)| format!("{count} × {status}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.target,
                r.phase,
                format_rate(r.per_second),
                format_us(r.p50_us),
                format_us(r.p99_us),
                statuses.join(", "),
                r.ratio_to_baseline
                    .map_or("–".to_owned(), |ratio| format!("{ratio:.2}×")),
            );
        }
        let broken: Vec<_> = self.results.iter().filter(|r| !r.ok).collect();
        if !broken.is_empty() {
            out.push_str("\nBroken:\n\n");
            for r in broken {
                let _ = writeln!(
                    out,
                    "- **{} {}**: {}",
                    r.target,
                    r.phase,
                    r.problems.join("; ")
                );
            }
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            let parts: Vec<String> = ratios
                .iter()
                .map(|(target, phases)| {
                    let phases: Vec<String> = Phase::ALL
                        .iter()
                        .filter_map(|phase| {
                            phases
                                .get(phase.as_str())
                                .map(|ratio| format!("{phase} {ratio:.2}×"))
                        })
                        .collect();
                    format!("{target}: {}", phases.join(", "))
                })
                .collect();
            let _ = writeln!(
                out,
                "\nRatios to the bare axum baseline (requests/s): {}.",
                parts.join("; ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_bench::BASELINE;

    fn result(target: &str, phase: Phase, per_second: f64, baseline: Option<f64>) -> PhaseResult {
        PhaseResult {
            target: target.to_owned(),
            phase,
            connections: 512,
            requests: 1_000,
            elapsed_s: 1_000.0 / per_second,
            per_second,
            p50_us: 900,
            p99_us: 4_000,
            statuses: BTreeMap::from([("201".to_owned(), 1_000)]),
            baseline_per_second: baseline,
            ratio_to_baseline: baseline.map(|b| per_second / b),
            ok: true,
            problems: Vec::new(),
        }
    }

    #[test]
    fn each_target_is_compared_with_the_baseline_run_before_it() {
        let report = HttpBenchReport {
            connections: 512,
            duration_s: 10.0,
            results: vec![
                result(BASELINE, Phase::Committed, 80_000.0, None),
                result("embedded", Phase::Committed, 20_000.0, Some(80_000.0)),
                result(BASELINE, Phase::SoldOut, 75_000.0, None),
                result("embedded", Phase::SoldOut, 60_000.0, Some(75_000.0)),
            ],
        };
        let ratios = report.ratios();
        assert_eq!(ratios["embedded"]["committed"], 0.25);
        assert_eq!(ratios["embedded"]["sold-out"], 0.8);
        assert!(!ratios.contains_key(BASELINE));
        let table = report.to_markdown();
        assert!(
            table.contains(
                "| embedded | committed | 20,000 | 900 µs | 4.00 ms | 1000 × 201 | 0.25× |"
            ),
            "{table}"
        );
        assert!(
            table.contains("Ratios to the bare axum baseline (requests/s): embedded: committed 0.25×, sold-out 0.80×."),
            "{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["ratios"]["embedded"]["sold-out"], 0.8);
        assert_eq!(json["results"][1]["phase"], "committed");
        assert_eq!(json["connections"], 512);
    }
}
