//! Runs the lock benchmark and prints the markdown table and the JSON report.
//!
//! ```text
//! cargo run --release -p stockade-lock-bench --example lock_bench [-- redis://host:port]
//! ```
//!
//! Without a URL it starts a throwaway redis-server.

use stockade_lock_bench::{LockBenchOptions, run};
use stockade_test_support::RedisServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, url) = match std::env::args().nth(1) {
        Some(url) => (None, url),
        None => {
            let server = RedisServer::start()?;
            let url = server.url();
            (Some(server), url)
        }
    };
    let report = run(&url, &LockBenchOptions::default(), |progress| {
        eprintln!("{progress}");
    })
    .await?;
    println!("{}", report.to_markdown());
    if std::env::var_os("LOCK_BENCH_COMMANDS").is_some() {
        for result in &report.results {
            eprintln!("{}: {:?}", result.strategy, result.details.commands);
        }
    }
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
