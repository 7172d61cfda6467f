//! A simulated flash sale: `buyers` distinct buyers arrive at once for
//! `stock` items, each asking for one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use stockade_core::{Engine, EngineError, Purchase, PurchaseOutcome, SaleSpec};

use crate::latency::Latencies;

/// The shape of a simulated sale.
#[derive(Debug, Clone)]
pub struct FlashSale {
    buyers: usize,
    stock: u32,
    concurrency: usize,
}

/// Why a simulated sale could not run.
#[derive(Debug, thiserror::Error)]
pub enum FlashSaleError {
    /// The parameters are out of range.
    #[error("{0}")]
    Invalid(String),
    /// The engine failed while setting up or checking the sale.
    #[error("the engine failed: {0}")]
    Engine(#[from] EngineError),
}

impl FlashSale {
    /// `buyers` (at least 1) buyers for `stock` (1 to 1,000,000,000) items,
    /// all of them in flight at once.
    pub fn new(buyers: usize, stock: u32) -> Result<Self, FlashSaleError> {
        if buyers == 0 {
            return Err(FlashSaleError::Invalid(
                "--buyers must be at least 1".into(),
            ));
        }
        SaleSpec::builder("check", stock)
            .map_err(|e| FlashSaleError::Invalid(format!("--stock {}", e.reason)))?;
        Ok(Self {
            buyers,
            stock,
            concurrency: buyers,
        })
    }

    /// Limits how many buyers are in flight at once (default: all).
    pub fn with_concurrency(mut self, concurrency: usize) -> Result<Self, FlashSaleError> {
        if concurrency == 0 {
            return Err(FlashSaleError::Invalid(
                "--concurrency must be at least 1".into(),
            ));
        }
        self.concurrency = concurrency.min(self.buyers);
        Ok(self)
    }
}

/// What happened, and whether the invariants held.
#[derive(Debug, Clone, Serialize)]
pub struct FlashSaleReport {
    /// The engine's name.
    pub engine: String,
    /// Buyers who arrived.
    pub buyers: usize,
    /// Items on sale.
    pub stock: u32,
    /// Buyers who got an item.
    pub purchased: usize,
    /// Buyers turned away because the stock was gone.
    pub sold_out: usize,
    /// Stock left according to the engine afterwards.
    pub remaining: u32,
    /// Items sold beyond the stock (must be 0).
    pub oversold: usize,
    /// Buyers who got more than one order (must be 0).
    pub duplicate_buyers: usize,
    /// Requests that failed with an engine error (must be 0).
    pub errors: usize,
    /// Answers other than purchased / sold out (must be 0 in this scenario).
    pub unexpected: usize,
    /// Wall time from the first request to the last answer.
    pub elapsed_ms: f64,
    /// Requests answered per second.
    pub per_second: f64,
    /// Median answer time.
    pub p50_us: u64,
    /// 99th percentile answer time.
    pub p99_us: u64,
    /// Slowest answer.
    pub max_us: u64,
    /// Whether every invariant held: purchased = min(stock, buyers), no
    /// oversell, no duplicate buyer, remaining = stock − purchased, no errors.
    pub ok: bool,
}

impl FlashSaleReport {
    /// The same report for a crowd sent through the HTTP service
    /// (`stockade load`'s result), so both kinds of demo print alike.
    pub fn from_http(engine: &str, result: &crate::report::BenchResult) -> Self {
        Self {
            engine: engine.to_owned(),
            buyers: result.buyers as usize,
            stock: result.stock,
            purchased: result.purchased as usize,
            sold_out: result.sold_out as usize,
            remaining: result
                .remaining
                .map_or(0, |r| r.clamp(0, i64::from(u32::MAX)) as u32),
            oversold: result.oversold as usize,
            duplicate_buyers: result.duplicate_buyers as usize,
            errors: result.failed as usize,
            unexpected: result.already_purchased as usize,
            elapsed_ms: result.elapsed_ms,
            per_second: result.per_second,
            p50_us: result.p50_us,
            p99_us: result.p99_us,
            max_us: result.max_us,
            ok: result.ok,
        }
    }

    /// The result as a two-column Markdown table.
    pub fn to_table(&self) -> String {
        let rows: [(&str, String); 14] = [
            ("engine", self.engine.clone()),
            ("buyers", self.buyers.to_string()),
            ("stock", self.stock.to_string()),
            ("purchased", self.purchased.to_string()),
            ("sold out", self.sold_out.to_string()),
            ("remaining", self.remaining.to_string()),
            ("oversold", self.oversold.to_string()),
            ("duplicate buyers", self.duplicate_buyers.to_string()),
            ("errors", self.errors.to_string()),
            ("elapsed", format!("{:.1} ms", self.elapsed_ms)),
            ("requests per second", format!("{:.0}", self.per_second)),
            ("latency p50", format!("{} µs", self.p50_us)),
            ("latency p99", format!("{} µs", self.p99_us)),
            (
                "invariants",
                if self.ok { "held" } else { "BROKEN" }.to_owned(),
            ),
        ];
        let mut table = String::from("| measure | value |\n| --- | ---: |\n");
        for (name, value) in rows {
            table.push_str(&format!("| {name} | {value} |\n"));
        }
        table
    }
}

/// What one worker saw.
#[derive(Default)]
struct WorkerTally {
    latencies: Latencies,
    orders: Vec<usize>,
    sold_out: usize,
    unexpected: usize,
    errors: usize,
}

/// Runs the sale on `engine` and checks the result. `on_answer` is called
/// once per answered request (for a progress bar).
pub async fn run(
    engine: &Arc<dyn Engine>,
    sale: &FlashSale,
    on_answer: impl Fn() + Send + Sync + 'static,
) -> Result<FlashSaleReport, FlashSaleError> {
    let sale_id = format!("flash-{}", uuid::Uuid::now_v7().simple());
    let spec = SaleSpec::builder(sale_id.clone(), sale.stock)
        .and_then(|b| b.build())
        .map_err(|e| FlashSaleError::Invalid(e.to_string()))?;
    engine.create_sale(&spec).await?;

    let next_buyer = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(tokio::sync::Barrier::new(sale.concurrency + 1));
    let on_answer = Arc::new(on_answer);
    let workers: Vec<_> = (0..sale.concurrency)
        .map(|_| {
            let engine = Arc::clone(engine);
            let next_buyer = Arc::clone(&next_buyer);
            let start = Arc::clone(&start);
            let on_answer = Arc::clone(&on_answer);
            let sale_id = sale_id.clone();
            let buyers = sale.buyers;
            tokio::spawn(async move {
                let mut tally = WorkerTally::default();
                start.wait().await;
                loop {
                    let buyer = next_buyer.fetch_add(1, Ordering::Relaxed);
                    if buyer >= buyers {
                        return tally;
                    }
                    let purchase = Purchase::new(sale_id.as_str(), format!("buyer-{buyer}"), 1)
                        .expect("generated ids are valid");
                    let asked = Instant::now();
                    let answer = engine.purchase(&purchase).await;
                    tally.latencies.record(asked.elapsed());
                    match answer {
                        Ok(PurchaseOutcome::Purchased { .. }) => tally.orders.push(buyer),
                        Ok(PurchaseOutcome::SoldOut) => tally.sold_out += 1,
                        Ok(_) => tally.unexpected += 1,
                        Err(_) => tally.errors += 1,
                    }
                    on_answer();
                }
            })
        })
        .collect();
    start.wait().await;
    let started = Instant::now();
    let mut total = WorkerTally::default();
    for worker in workers {
        let tally = worker
            .await
            .map_err(|e| FlashSaleError::Invalid(format!("a buyer task failed: {e}")))?;
        total.latencies.merge(&tally.latencies);
        total.orders.extend(tally.orders);
        total.sold_out += tally.sold_out;
        total.unexpected += tally.unexpected;
        total.errors += tally.errors;
    }
    let elapsed = started.elapsed();

    let snapshot = engine
        .snapshot(spec.id())
        .await?
        .ok_or_else(|| FlashSaleError::Invalid(format!("sale {sale_id} vanished")))?;
    Ok(report(
        engine.name(),
        sale,
        total,
        snapshot.remaining,
        elapsed,
    ))
}

fn report(
    engine: &str,
    sale: &FlashSale,
    total: WorkerTally,
    remaining: u32,
    elapsed: Duration,
) -> FlashSaleReport {
    let purchased = total.orders.len();
    let mut per_buyer: HashMap<usize, usize> = HashMap::new();
    for buyer in &total.orders {
        *per_buyer.entry(*buyer).or_default() += 1;
    }
    let duplicate_buyers = per_buyer.values().filter(|n| **n > 1).count();
    let oversold = purchased.saturating_sub(sale.stock as usize);
    let expected = sale.buyers.min(sale.stock as usize);
    let stock_adds_up =
        purchased <= sale.stock as usize && remaining as usize == sale.stock as usize - purchased;
    let ok = purchased == expected
        && oversold == 0
        && duplicate_buyers == 0
        && stock_adds_up
        && total.errors == 0
        && total.unexpected == 0;
    let answered = total.latencies.count() as f64;
    FlashSaleReport {
        engine: engine.to_owned(),
        buyers: sale.buyers,
        stock: sale.stock,
        purchased,
        sold_out: total.sold_out,
        remaining,
        oversold,
        duplicate_buyers,
        errors: total.errors,
        unexpected: total.unexpected,
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
        per_second: answered / elapsed.as_secs_f64().max(1e-9),
        p50_us: total.latencies.quantile_us(0.5),
        p99_us: total.latencies.quantile_us(0.99),
        max_us: total.latencies.max_us(),
        ok,
    }
}

#[cfg(test)]
mod tests {
    use stockade_core::SystemClock;
    use stockade_engine::MemoryEngine;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crowd_on_the_memory_engine_sells_exactly_the_stock() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new(Arc::new(SystemClock)));
        let answers = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&answers);
        let report = run(&engine, &FlashSale::new(2_000, 300).unwrap(), move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .await
        .unwrap();
        assert_eq!(report.purchased, 300);
        assert_eq!(report.sold_out, 1_700);
        assert_eq!(report.remaining, 0);
        assert_eq!(report.oversold, 0);
        assert_eq!(report.duplicate_buyers, 0);
        assert!(report.ok);
        assert_eq!(answers.load(Ordering::Relaxed), 2_000);
        assert!(report.to_table().contains("| purchased | 300 |"));
    }

    #[test]
    fn a_report_with_an_oversell_is_not_ok() {
        let sale = FlashSale::new(3, 1).unwrap();
        let tally = WorkerTally {
            orders: vec![0, 1],
            ..WorkerTally::default()
        };
        let oversold = report("fake", &sale, tally, 0, Duration::from_millis(1));
        assert_eq!(oversold.oversold, 1);
        assert!(!oversold.ok);
        let tally = WorkerTally {
            orders: vec![0, 0],
            ..WorkerTally::default()
        };
        let twice = report(
            "fake",
            &FlashSale::new(3, 5).unwrap(),
            tally,
            3,
            Duration::from_millis(1),
        );
        assert_eq!(twice.duplicate_buyers, 1);
        assert!(!twice.ok);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(FlashSale::new(0, 10).is_err());
        assert!(FlashSale::new(10, 0).is_err());
        assert!(FlashSale::new(10, 10).unwrap().with_concurrency(0).is_err());
    }
}
