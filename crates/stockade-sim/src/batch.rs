//! Many runs: seeds in turn (or for a while), some twice to check that a
//! replay does the same, the failures shrunk and printed with the one
//! command that replays them, and what the seeds exercised counted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::run::{Report, run};
use crate::scenario::Size;

/// A seed that broke a promise, or did not replay the same.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The smallest size found that still fails.
    pub size: Size,
    /// What broke.
    pub violations: Vec<String>,
    /// The log lines about the first violation's buyer or order, and the
    /// last lines of the run.
    pub excerpt: Vec<String>,
}

impl Failure {
    /// The command that replays it exactly.
    pub fn replay(&self) -> String {
        replay_command(self.seed, self.size)
    }
}

/// The command that replays `seed` at `size`.
pub fn replay_command(seed: u64, size: Size) -> String {
    format!(
        "cargo run --release --features bench -- sim --seed {seed:#x} --buyers {} --faults {} --span-ms {}",
        size.buyers, size.faults, size.span_ms
    )
}

/// What a batch did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Simulated time covered, ms.
    pub simulated_ms: u64,
    /// Wall time taken.
    pub wall: Duration,
    /// The failures.
    pub failures: Vec<Failure>,
    /// How many seeds exercised each feature and fault kind.
    pub coverage: BTreeMap<&'static str, u64>,
}

/// Which seeds a batch runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Explicit seeds (and sizes) to run first: the regression corpus, or
    /// the one seed asked for.
    pub fixed: Vec<(u64, Size)>,
    /// Then seeds `first`, `first + 1`, … at `size`, this many …
    pub count: u64,
    /// … or for this long (whichever ends first, when both are set).
    pub for_at_most: Option<Duration>,
    /// The first seed of the sequence.
    pub first: u64,
    /// The distance between seeds of the sequence (1; more when several
    /// threads share one sequence).
    pub step: u64,
    /// The size of the sequence's seeds.
    pub size: Size,
    /// The sequence's first this-many seeds are run twice and must log the
    /// same events.
    pub twice: u64,
    /// Shrink each failure before reporting it.
    pub shrink: bool,
}

/// Runs `plan`, calling `progress` after each seed.
pub fn run_plan(plan: &Plan, mut progress: impl FnMut(&Summary)) -> Summary {
    let started = Instant::now();
    let mut summary = Summary::default();
    let sequence = (0..plan.count).map(|i| {
        (
            plan.first.wrapping_add(i.wrapping_mul(plan.step.max(1))),
            plan.size,
            i < plan.twice,
        )
    });
    let fixed = plan.fixed.iter().map(|(seed, size)| (*seed, *size, false));
    for (seed, size, twice) in fixed.chain(sequence) {
        if plan
            .for_at_most
            .is_some_and(|limit| started.elapsed() >= limit)
        {
            break;
        }
        let report = run(seed, size);
        summary.seeds += 1;
        summary.simulated_ms += report.simulated_ms;
        for feature in &report.features {
            *summary.coverage.entry(feature).or_default() += 1;
        }
        let mut violations = report.violations.clone();
        if twice {
            let again = run(seed, size);
            summary.simulated_ms += again.simulated_ms;
            if again.hash != report.hash {
                violations.push(format!(
                    "not deterministic: the event log hashed {} and then {} ({})",
                    report.hash,
                    again.hash,
                    first_difference(&report.log, &again.log)
                ));
            }
        }
        if !violations.is_empty() {
            let (size, report) = if plan.shrink {
                shrink(seed, size, report)
            } else {
                (size, report)
            };
            let violations = if report.violations.is_empty() {
                violations
            } else {
                report.violations.clone()
            };
            summary.failures.push(Failure {
                seed,
                size,
                excerpt: excerpt(&report.log, violations.first().map_or("", String::as_str)),
                violations,
            });
        }
        summary.wall = started.elapsed();
        progress(&summary);
    }
    summary.wall = started.elapsed();
    summary
}

/// The smallest size (fewer buyers, fewer faults) at which `seed` still
/// breaks a promise, and that run.
pub fn shrink(seed: u64, size: Size, report: Report) -> (Size, Report) {
    let mut best = (size, report);
    loop {
        let current = best.0;
        let candidates = [
            Size {
                faults: 0,
                ..current
            },
            Size {
                buyers: current.buyers / 2,
                ..current
            },
            Size {
                buyers: current.buyers * 3 / 4,
                ..current
            },
            Size {
                faults: current.faults.saturating_sub(1),
                ..current
            },
            Size {
                buyers: current.buyers.saturating_sub(1),
                ..current
            },
        ];
        let smaller = candidates
            .into_iter()
            .filter(|c| *c != current && c.buyers > 0)
            .find_map(|candidate| {
                let report = run(seed, candidate);
                (!report.violations.is_empty()).then_some((candidate, report))
            });
        match smaller {
            Some(found) => best = found,
            None => return best,
        }
    }
}

/// Where two logs first differ.
fn first_difference(a: &[String], b: &[String]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("line {}: {:?} then {:?}", i + 1, a[i], b[i]),
        None => format!("one log is longer: {} and {} lines", a.len(), b.len()),
    }
}

/// The log lines naming the buyers and orders `violation` names (at most
/// 30), then the last 10 lines.
fn excerpt(log: &[String], violation: &str) -> Vec<String> {
    let names: Vec<&str> = violation
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| (w.starts_with('u') && w[1..].parse::<u32>().is_ok()) || w.len() == 36)
        .collect();
    let mut lines: Vec<String> = log
        .iter()
        .filter(|line| {
            names
                .iter()
                .any(|n| line.split_whitespace().any(|w| w == *n || w.ends_with(n)))
        })
        .take(30)
        .cloned()
        .collect();
    lines.push("…".into());
    lines.extend(log.iter().rev().take(10).rev().cloned());
    lines
}
