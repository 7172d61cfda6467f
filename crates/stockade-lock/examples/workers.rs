//! Ten workers sharing two lock clients take turns on one job; each
//! turn runs under the lock with its fencing token.
//!
//! ```text
//! cargo run -p stockade-lock --example workers [-- redis://127.0.0.1:6379]
//! ```
//!
//! Without a URL it starts a throwaway redis-server.

use std::time::Duration;

use stockade_lock::Locks;
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
    // Two clients, as if two service instances shared the lock.
    let clients = [Locks::connect(&url).await?, Locks::connect(&url).await?];
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..10 {
        let locks = clients[worker % 2].clone();
        workers.spawn(async move {
            locks
                .run("nightly-job", async |guard| {
                    // Pass guard.fence() along with every write this protects.
                    println!(
                        "worker {worker} holds the lock, fencing token {}",
                        guard.fence()
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                })
                .await
        });
    }
    while let Some(turn) = workers.join_next().await {
        turn??;
    }
    Ok(())
}
