//! `--chart FILE`: an SVG of a comparison, two panels side by side,
//! requests per second and p99 latency per strategy, both on log scales
//! (the strategies differ by orders of magnitude). Broken strategies are
//! drawn in red and labelled BROKEN.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{BenchReport, BenchResult, format_rate};

const WIDTH: u32 = 1_200;
const ROW: u32 = 44;
const OK_COLOR: RGBColor = RGBColor(52, 101, 164);
const BROKEN_COLOR: RGBColor = RGBColor(204, 0, 0);

/// Why the chart could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Nothing to draw.
    #[error("no strategy produced a result to chart")]
    Empty,
    /// Drawing failed.
    #[error("drawing the chart: {0}")]
    Draw(String),
    /// Writing the file failed.
    #[error("writing the chart to {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// Renders `report` as SVG, under `title`.
pub fn render_svg(report: &BenchReport, title: &str) -> Result<String, ChartError> {
    if report.results.is_empty() {
        return Err(ChartError::Empty);
    }
    let height = 110 + ROW * report.results.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let root = root.titled(title, ("sans-serif", 20)).map_err(draw_error)?;
        let (left, right) = root.split_horizontally(WIDTH / 2);
        panel(
            &left,
            "requests answered per second (more is better)",
            &report.results,
            |r| r.per_second,
            format_rate,
        )?;
        panel(
            &right,
            "p99 answer time (less is better)",
            &report.results,
            |r| r.p99_us as f64,
            |v| compact_us(v.round() as u64),
        )?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// Renders `report` and writes it to `path`.
pub fn write_svg(report: &BenchReport, title: &str, path: &Path) -> Result<(), ChartError> {
    let svg = render_svg(report, title)?;
    std::fs::write(path, svg).map_err(|source| ChartError::Write {
        path: path.display().to_string(),
        source,
    })
}

fn draw_error(error: impl std::fmt::Display) -> ChartError {
    ChartError::Draw(error.to_string())
}

/// Microseconds, short: `850 µs`, `1.2 ms`, `10 ms`, `2.61 s`.
fn compact_us(us: u64) -> String {
    let trim = |value: f64| {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    };
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{} ms", trim(us as f64 / 1e3)),
        _ => format!("{} s", trim(us as f64 / 1e6)),
    }
}

/// The axis range: whole powers of ten around the values, and one more
/// decade on the right for the labels written after the bars.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let positive: Vec<f64> = values.filter(|v| *v > 0.0).collect();
    let low = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let high = positive.iter().copied().fold(0.0, f64::max);
    if positive.is_empty() {
        return (1.0, 10.0);
    }
    let low = 10f64.powf(low.log10().floor());
    let high = 10f64.powf((high * 1.5).log10().ceil() + 1.0);
    (low, high.max(low * 100.0))
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    results: &[BenchResult],
    value: impl Fn(&BenchResult) -> f64,
    format: impl Fn(f64) -> String,
) -> Result<(), ChartError> {
    let n = results.len();
    let (low, high) = log_range(results.iter().map(&value));
    // Row 0 is drawn at the bottom: put the first strategy on top.
    let row_of = |i: usize| n - 1 - i;
    let names: Vec<&str> = results.iter().map(|r| r.strategy.as_str()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(140)
        // Integer ranges are inclusive here: 0..n-1 makes n rows.
        .build_cartesian_2d((low..high).log_scale(), (0..n - 1).into_segmented())
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .label_style(("sans-serif", 13))
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(row) if *row < n => names[n - 1 - row].to_owned(),
            _ => String::new(),
        })
        .x_label_formatter(&|v| format(*v))
        .draw()
        .map_err(draw_error)?;
    chart
        .draw_series(
            results
                .iter()
                .enumerate()
                .filter(|(_, r)| value(r) > 0.0)
                .map(|(i, r)| {
                    let color = if r.ok { OK_COLOR } else { BROKEN_COLOR };
                    let row = row_of(i);
                    let mut bar = Rectangle::new(
                        [
                            (low, SegmentValue::Exact(row)),
                            (value(r), SegmentValue::Exact(row + 1)),
                        ],
                        color.filled(),
                    );
                    bar.set_margin(6, 6, 0, 0);
                    bar
                }),
        )
        .map_err(draw_error)?;
    chart
        .draw_series(results.iter().enumerate().map(|(i, r)| {
            let v = value(r);
            let label = match (v > 0.0, r.ok) {
                (false, _) => "no answers".to_owned(),
                (true, true) => format!(" {}", format(v)),
                (true, false) => format!(" {}  BROKEN", format(v)),
            };
            Text::new(
                label,
                (v.max(low), SegmentValue::CenterOf(row_of(i))),
                ("sans-serif", 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )
        }))
        .map_err(draw_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(strategy: &str, per_second: f64, p99_us: u64, ok: bool) -> BenchResult {
        BenchResult {
            strategy: strategy.to_owned(),
            scenario: "seed-100".to_owned(),
            buyers: 100,
            requests: 100,
            stock: 100,
            skus: 1,
            concurrency: 100,
            purchased: 100,
            sold_out: 0,
            already_purchased: 0,
            failed: 0,
            remaining: Some(0),
            oversold: 0,
            duplicate_buyers: 0,
            elapsed_ms: 1.0,
            per_second,
            p50_us: 1,
            p99_us,
            p999_us: 1,
            max_us: 1,
            redis_cmds_per_purchase: None,
            redis_commands: None,
            redis_us_per_purchase: None,
            redis_cpu_us_per_purchase: None,
            db_tx_per_purchase: None,
            ok,
            problems: Vec::new(),
            notes: Vec::new(),
            timeline: Vec::new(),
        }
    }

    #[test]
    fn the_chart_names_every_strategy_and_marks_the_broken_ones() {
        let report = BenchReport {
            results: vec![
                result("pg-for-update", 850.0, 120_000, true),
                result("redis-decr", 40_000.0, 900, false),
                result("stockade-memory", 400_000.0, 3, true),
            ],
        };
        let svg = render_svg(&report, "seed-100").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        for name in [
            "pg-for-update",
            "redis-decr",
            "stockade-memory",
            "BROKEN",
            "seed-100",
        ] {
            assert!(svg.contains(name), "{name} missing");
        }
    }

    #[test]
    fn log_ranges_are_whole_powers_of_ten() {
        assert_eq!(
            log_range([850.0, 400_000.0].into_iter()),
            (100.0, 10_000_000.0)
        );
        assert_eq!(log_range(std::iter::empty()), (1.0, 10.0));
        assert_eq!(compact_us(10_000), "10 ms");
        assert_eq!(compact_us(2_610_000), "2.61 s");
    }
}
