//! `stockade bench servers`: the throwaway servers of the test support
//! crate for a measuring script (scripts/capacity), so the script starts
//! Redis, a Redis Cluster and a durable PostgreSQL as the tests do (free
//! ports, temp dirs, `initdb` as `postgres` under root).
//!
//! Once every server is ready, one JSON line goes to stdout: `redis_url`,
//! `redis_ports` (one per primary), `database_url` and `postgres_pid` (the
//! process whose children are PostgreSQL's backends), each `null` when not
//! asked for. The servers stop when stdin closes (the script exited), on
//! Ctrl-C or on SIGTERM.

use std::process::ExitCode;

use anyhow::Context;
use stockade_test_support::postgres_server::Durability;
use stockade_test_support::{PostgresServer, RedisCluster, RedisServer};
use tokio::io::AsyncReadExt;

use crate::cli::{RedisShape, ServersArgs};

/// Starts the servers, describes them and waits for the end.
pub async fn run(args: ServersArgs) -> anyhow::Result<ExitCode> {
    let (single, cluster) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        Ok(match args.redis {
            RedisShape::None => (None, None),
            RedisShape::Single => (
                Some(RedisServer::start().context("starting redis-server")?),
                None,
            ),
            RedisShape::Cluster => (
                None,
                Some(RedisCluster::start().context("starting a Redis Cluster")?),
            ),
        })
    })
    .await??;
    let postgres = if args.postgres {
        let server =
            tokio::task::spawn_blocking(|| PostgresServer::start_with(Durability::Durable))
                .await?
                .context("starting PostgreSQL")?;
        let url = server
            .fresh_database()
            .await
            .context("creating a database")?;
        Some((server, url))
    } else {
        None
    };
    let (redis_url, redis_ports) = match (&single, &cluster) {
        (Some(server), _) => (Some(server.url()), vec![server.port()]),
        (_, Some(cluster)) => (Some(cluster.url()), cluster.ports()),
        _ => (None, Vec::new()),
    };
    let description = serde_json::json!({
        "redis_url": redis_url,
        "redis_ports": redis_ports,
        "database_url": postgres.as_ref().map(|(_, url)| url),
        "postgres_pid": postgres.as_ref().and_then(|(server, _)| server.pid()),
    });
    println!("{description}");
    let stop = crate::signals::stop_requested()?;
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 64];
        while stdin.read(&mut buffer).await.is_ok_and(|n| n > 0) {}
    };
    tokio::select! {
        () = stop => {}
        () = stdin_closed => {}
    }
    drop((single, cluster, postgres));
    Ok(ExitCode::SUCCESS)
}
