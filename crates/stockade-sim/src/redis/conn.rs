//! A client's connection: the real `redis` client on one end of an
//! in-memory duplex pipe, a task reading RESP2 requests on the other and
//! answering them in order.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::SimRedis;
use super::resp::{Reply, parse_request};

/// Bytes the pipe buffers each way.
const PIPE_BYTES: usize = 256 * 1024;

/// Opens a connection of the real client to `server`.
pub async fn connect(
    server: &SimRedis,
    config: AsyncConnectionConfig,
) -> RedisResult<MultiplexedConnection> {
    let (client, server_end) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(serve(server.clone(), server_end));
    let (connection, driver) =
        MultiplexedConnection::new_with_config(&RedisConnectionInfo::default(), client, config)
            .await?;
    tokio::spawn(driver);
    Ok(connection)
}

/// Answers the requests of one connection until the client goes away or
/// the server restarts (which drops the pipe: the client sees it broken).
async fn serve(server: SimRedis, mut stream: DuplexStream) {
    let mut status = server.status();
    let generation = status.borrow().generation;
    let mut buffer = Vec::new();
    // Set once a reply was dropped: later requests are lost unanswered.
    let mut hung = false;
    loop {
        loop {
            let (args, used) = match parse_request(&buffer) {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(error) => {
                    let mut out = Vec::new();
                    Reply::error(format!("ERR {}", error.0)).encode(&mut out);
                    let _ = stream.write_all(&out).await;
                    return;
                }
            };
            buffer.drain(..used);
            if args.is_empty() {
                continue;
            }
            // A frozen server reads but does not answer until thawed.
            let live = status
                .wait_for(|s| s.generation != generation || !s.frozen)
                .await
                .map(|s| s.generation == generation);
            if !matches!(live, Ok(true)) {
                return;
            }
            if hung {
                continue;
            }
            let Some(reply) = server.answer(&args) else {
                hung = true;
                continue;
            };
            let mut out = Vec::new();
            reply.encode(&mut out);
            if stream.write_all(&out).await.is_err() {
                return;
            }
            if args[0].eq_ignore_ascii_case(b"QUIT") {
                return;
            }
        }
        tokio::select! {
            read = stream.read_buf(&mut buffer) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return;
                }
            }
            changed = status.wait_for(|s| s.generation != generation) => {
                let _ = changed;
                return;
            }
        }
    }
}
