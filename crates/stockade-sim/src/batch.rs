//! Many runs: seeds in turn (or for a while), some twice to check that a
//! replay does the same, the failures shrunk and printed with the one
//! command that replays them, and what the seeds exercised counted.
//!
//! A batch runs each seed in a process of its own ([`in_child`]), the way
//! its replay command runs it: state a process keeps from one run to the
//! next (tokio seeds each new runtime's scheduler from a process-wide
//! counter, which orders the waiters a `watch` wakes) would otherwise make
//! a seed's run depend on the seeds before it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::run::Report;
use crate::scenario::Size;

/// Runs one seed at one size.
pub type Runner<'a> = &'a (dyn Fn(u64, Size) -> Report + Sync);

/// Runs `seed` at `size` in a child process: `program` with `args`, then
/// `--seed <seed> --buyers .. --faults .. --span-ms .. --report`, which
/// prints the run's [`Report`] as one JSON line (`stockade sim` does).
pub fn in_child(program: &Path, args: &[&str], seed: u64, size: Size) -> Report {
    let output = Command::new(program)
        .args(args)
        .args(["--seed", &format!("{seed:#x}")])
        .args(["--buyers", &size.buyers.to_string()])
        .args(["--faults", &size.faults.to_string()])
        .args(["--span-ms", &size.span_ms.to_string(), "--report"])
        .args(size.flags().map(|flag| format!("--{flag}")))
        .output();
    let broken = |why: String| Report {
        seed,
        size,
        hash: String::new(),
        violations: vec![why],
        log: Vec::new(),
        simulated_ms: 0,
        features: Vec::new(),
        open_findings: Vec::new(),
    };
    let output = match output {
        Ok(output) => output,
        Err(e) => return broken(format!("{} did not start: {e}", program.display())),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
    {
        Some(report) => report,
        None => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let lines: Vec<&str> = stderr.lines().collect();
            broken(format!(
                "the run's process ended ({}) without a report; its last lines:\n{}",
                output.status,
                lines[lines.len().saturating_sub(20)..].join("\n")
            ))
        }
    }
}

/// A number (a seed, a size) in decimal or 0x-hex.
pub fn parse_number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("{text:?} is not a number (decimal or 0x-hex): {e}"))
}

/// The regression corpus in the file at `path` (see [`parse_corpus`]).
pub fn read_corpus(path: &Path) -> Result<Vec<(u64, Size)>, String> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_corpus(&text))
        .map_err(|e| format!("the corpus {}: {e}", path.display()))
}

/// The regression corpus's seeds and sizes: one `seed buyers faults
/// span_ms` per line (numbers in decimal or 0x-hex), then the flags the
/// seed failed with, if any (`standard`, `lost-answers`, as `stockade sim`
/// spells them without the dashes in front); `#` starts a comment.
pub fn parse_corpus(text: &str) -> Result<Vec<(u64, Size)>, String> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split('#').next().unwrap_or_default().trim()))
        .filter(|(_, line)| !line.is_empty())
        .map(|(n, line)| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let (numbers, flags) = words.split_at(words.len().min(4));
            let fields = numbers
                .iter()
                .map(|word| parse_number(word))
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|e| format!("line {n} ({line:?}): {e}"))?;
            let [seed, buyers, faults, span_ms] = fields[..] else {
                return Err(format!(
                    "line {n} ({line:?}): want four numbers: seed buyers faults span_ms"
                ));
            };
            let mut size = Size {
                buyers: buyers as usize,
                faults: faults as usize,
                span_ms,
                standard: false,
                lost_answers: false,
                without_outage: false,
                knobs: false,
            };
            for flag in flags {
                if !size.set_flag(flag) {
                    return Err(format!(
                        "line {n} ({line:?}): {flag:?} is not a flag; \
                         want standard, lost-answers, without-outage or knobs after the four numbers"
                    ));
                }
            }
            Ok((seed, size))
        })
        .collect()
}

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
        "cargo run --release --features bench -- sim --seed {seed:#x} --buyers {} --faults {} --span-ms {}{}",
        size.buyers,
        size.faults,
        size.span_ms,
        size.flags()
            .map(|flag| format!(" --{flag}"))
            .collect::<String>(),
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
    pub coverage: BTreeMap<String, u64>,
    /// Seeds with open findings (see [`crate::run::Report::open_findings`]),
    /// each with how many.
    pub open_findings: Vec<(u64, usize)>,
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

/// Runs `plan`, each seed with `run`, calling `progress` after each seed.
pub fn run_plan(plan: &Plan, run: Runner<'_>, mut progress: impl FnMut(&Summary)) -> Summary {
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
            *summary.coverage.entry(feature.clone()).or_default() += 1;
        }
        if !report.open_findings.is_empty() {
            summary
                .open_findings
                .push((seed, report.open_findings.len()));
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
                shrink(run, seed, size, report)
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
pub fn shrink(run: Runner<'_>, seed: u64, size: Size, report: Report) -> (Size, Report) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_reads_seeds_sizes_and_comments() {
        let corpus = "# found by hand\n0x5eed0001 10 1 60000  # a comment\n\n42 1 0 1000 standard lost-answers\n";
        assert_eq!(
            parse_corpus(corpus).unwrap(),
            vec![
                (
                    0x5eed_0001,
                    Size {
                        buyers: 10,
                        faults: 1,
                        span_ms: 60_000,
                        standard: false,
                        lost_answers: false,
                        without_outage: false,
                        knobs: false,
                    }
                ),
                (
                    42,
                    Size {
                        buyers: 1,
                        faults: 0,
                        span_ms: 1_000,
                        standard: true,
                        lost_answers: true,
                        without_outage: false,
                        knobs: false,
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_bad_corpus_line_is_refused_with_its_number() {
        let error = parse_corpus("1 2 3 4\n0x5eed 10 1\n").unwrap_err();
        assert!(
            error.contains("line 2") && error.contains("four numbers"),
            "{error}"
        );
        let error = parse_corpus("seven 1 1 1\n").unwrap_err();
        assert!(error.contains("line 1"), "{error}");
        let error = parse_corpus("1 2 3 4 lost_answers\n").unwrap_err();
        assert!(
            error.contains("line 1") && error.contains("\"lost_answers\" is not a flag"),
            "{error}"
        );
    }
}
