//! Runs one seed: `cargo run -p stockade-sim --example seed -- SEED [BUYERS]`.
fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut size = stockade_sim::Size::default();
    if let Some(b) = args.next().and_then(|s| s.parse().ok()) {
        size.buyers = b;
    }
    let started = std::time::Instant::now();
    let report = stockade_sim::run(seed, size);
    println!(
        "seed {seed}: {} ms simulated in {:?}, hash {}, {} log lines",
        report.simulated_ms,
        started.elapsed(),
        report.hash,
        report.log.len()
    );
    for v in &report.violations {
        println!("VIOLATION {v}");
    }
    if std::env::var("LOG").is_ok() {
        for l in &report.log {
            println!("{l}");
        }
    }
}
