//! The report as Markdown: the table, what broke, the notes, the ratios, the
//! second-by-second table, and numbers formatted for people.

use std::fmt::Write as _;

use super::{ARTICLE_RATIO, BenchReport};
use crate::strategy::StrategyKind;

impl BenchReport {
    /// The ratios as one line (empty when there is none).
    fn ratios_line(&self) -> String {
        let ratios = self.ratios();
        if ratios.is_empty() {
            return String::new();
        }
        let times = |ratio: Option<f64>, what: &str| ratio.map(|r| format!("{r:.2}× {what}"));
        let mut parts = Vec::new();
        let against_lua: Vec<String> = [
            times(ratios.stockade_redis_to_redis_lua_per_second, "requests/s"),
            times(
                ratios.stockade_redis_to_redis_lua_redis_us,
                "Redis µs per purchase (cmdstats)",
            ),
            times(
                ratios.stockade_redis_to_redis_lua_redis_cpu_us,
                "Redis µs per purchase (cpu)",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !against_lua.is_empty() {
            parts.push(format!(
                "stockade-redis / redis-lua: {}",
                against_lua.join(", ")
            ));
        }
        if let Some(ratio) = times(
            ratios.stockade_redis_to_pg_for_update_per_second,
            "requests/s",
        ) {
            parts.push(format!("stockade-redis / pg-for-update: {ratio}"));
        }
        format!("\nRatios: {}.\n", parts.join("; "))
    }

    /// The table, what broke, the notes, the comparison with the article
    /// and, for timed runs, the second-by-second table.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let any_repeat = self.results.iter().any(|r| r.already_purchased > 0);
        let _ = writeln!(
            out,
            "| strategy | purchased | sold out |{} failed | remaining | elapsed | requests/s | p50 | p99 | p99.9 | max | Redis cmds/req | Redis µs/req (cmdstats) | Redis µs/req (cpu) | DB tx/req | invariants |",
            if any_repeat { " repeat refused |" } else { "" }
        );
        let _ = writeln!(
            out,
            "| --- | ---: | ---: |{} ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            if any_repeat { " ---: |" } else { "" }
        );
        for r in &self.results {
            let repeat = if any_repeat {
                format!(" {} |", r.already_purchased)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} |{repeat} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.strategy,
                r.purchased,
                r.sold_out,
                r.failed,
                r.remaining.map_or("?".to_owned(), |v| v.to_string()),
                format_ms(r.elapsed_ms),
                format_rate(r.per_second),
                format_us(r.p50_us),
                format_us(r.p99_us),
                format_us(r.p999_us),
                format_us(r.max_us),
                r.redis_cmds_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.redis_us_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.redis_cpu_us_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.db_tx_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                if r.ok { "held" } else { "**BROKEN**" },
            );
        }
        out.push_str(&self.ratios_line());
        let broken: Vec<_> = self.results.iter().filter(|r| !r.ok).collect();
        if !broken.is_empty() {
            let _ = writeln!(out, "\nBroken:\n");
            for r in broken {
                let _ = writeln!(out, "- **{}**: {}", r.strategy, r.problems.join("; "));
            }
        }
        let noted: Vec<_> = self
            .results
            .iter()
            .filter(|r| !r.notes.is_empty())
            .collect();
        if !noted.is_empty() {
            let _ = writeln!(out, "\nNotes:\n");
            for r in noted {
                let _ = writeln!(out, "- {}: {}", r.strategy, r.notes.join("; "));
            }
        }
        if let Some(ratio) = self.ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate) {
            let articles_pair = self
                .ratio(StrategyKind::RedisLua, StrategyKind::PgForUpdate)
                .map(|r| format!("; redis-lua, the article's own pair, {r:.1}×"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "\nstockade-redis answered {ratio:.1}× as many requests per second as pg-for-update\
                 {articles_pair} (the founding article measured {ARTICLE_RATIO}× for its Redis Lua \
                 script against its database lock, 100 buyers for 100 items)."
            );
        }
        out.push_str(&self.timeline_markdown());
        out
    }

    fn timeline_markdown(&self) -> String {
        let timed: Vec<_> = self
            .results
            .iter()
            .filter(|r| !r.timeline.is_empty())
            .collect();
        let Some(longest) = timed.iter().map(|r| r.timeline.len()).max() else {
            return String::new();
        };
        let mut out = String::from("\nSecond by second (requests/s, p99):\n\n| second |");
        for r in &timed {
            let _ = write!(out, " {} |", r.strategy);
        }
        out.push_str("\n| ---: |");
        out.push_str(&" ---: |".repeat(timed.len()));
        out.push('\n');
        for i in 0..longest {
            let _ = write!(out, "| {} |", i + 1);
            for r in &timed {
                match r.timeline.get(i) {
                    Some(w) => {
                        let _ = write!(
                            out,
                            " {} ({}) |",
                            format_rate(w.per_second),
                            format_us(w.p99_us)
                        );
                    }
                    None => out.push_str(" |"),
                }
            }
            out.push('\n');
        }
        out
    }
}

/// Microseconds for people: `850 µs`, `1.24 ms`, `2.25 s`.
pub fn format_us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.2} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

fn format_ms(ms: f64) -> String {
    if ms < 1_000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

/// A rate with thousands separators: `12,345`.
pub fn format_rate(rate: f64) -> String {
    let whole = rate.round() as u64;
    let digits = whole.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
