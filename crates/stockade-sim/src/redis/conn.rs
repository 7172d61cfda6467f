//! A client's connection: the real `redis` client on one end of an
//! in-memory duplex pipe, a task reading RESP2 requests on the other and
//! answering them in order, while neither its server is frozen nor its
//! link cut (one gate for both: what is read waits, then is answered in
//! order).

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

use super::resp::{Reply, parse_request};
use super::{SimRedis, Status};

/// Bytes the pipe buffers each way.
const PIPE_BYTES: usize = 256 * 1024;

/// How a connection's link delivers.
pub struct Delivery {
    /// It delivers while this is false (a closed one delivers).
    pub cut: watch::Receiver<bool>,
    /// Each script call's answer comes this many ms after the call is
    /// read (and delivered), as from a loaded server; 0: at once.
    pub script_ms: u64,
}

/// Opens a connection of the real client to `server`, over `link`.
pub async fn connect(
    server: &SimRedis,
    config: AsyncConnectionConfig,
    link: Delivery,
) -> RedisResult<MultiplexedConnection> {
    let (client, server_end) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(serve(server.clone(), server_end, link));
    let (connection, driver) =
        MultiplexedConnection::new_with_config(&RedisConnectionInfo::default(), client, config)
            .await?;
    tokio::spawn(driver);
    Ok(connection)
}

/// Answers the requests of one connection until the client goes away or
/// the server restarts (which drops the pipe: the client sees it broken,
/// once its link delivers).
async fn serve(server: SimRedis, mut stream: DuplexStream, link: Delivery) {
    let Delivery { mut cut, script_ms } = link;
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
            if !delivering(&mut status, &mut cut, generation).await {
                return;
            }
            if hung {
                continue;
            }
            if script_ms > 0 && is_script(&args[0]) {
                // The call runs after the wait, as the server gets to it.
                tokio::time::sleep(std::time::Duration::from_millis(script_ms)).await;
                if !delivering(&mut status, &mut cut, generation).await {
                    return;
                }
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
        let restarted = tokio::select! {
            read = stream.read_buf(&mut buffer) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return;
                }
                false
            }
            _ = status.wait_for(|s| s.generation != generation) => true,
        };
        if restarted {
            // The client learns of it once its link delivers.
            let _ = cut.wait_for(|cut| !cut).await;
            return;
        }
    }
}

/// Waits until the connection delivers: its server not frozen and its
/// link not cut (what was read meanwhile is answered after, in order).
/// False if the server restarted: the connection is gone.
async fn delivering(
    status: &mut watch::Receiver<Status>,
    cut: &mut watch::Receiver<bool>,
    generation: u64,
) -> bool {
    loop {
        // A cut link hides a restart too, until it delivers again.
        let _ = cut.wait_for(|cut| !cut).await;
        let live = status
            .wait_for(|s| s.generation != generation || !s.frozen)
            .await
            .map(|s| s.generation == generation);
        if !matches!(live, Ok(true)) {
            return false;
        }
        if !*cut.borrow() {
            return true;
        }
    }
}

/// Whether `command` runs a script (a function or an EVAL).
fn is_script(command: &[u8]) -> bool {
    [
        &b"EVALSHA"[..],
        b"EVAL",
        b"FCALL",
        b"EVALSHA_RO",
        b"EVAL_RO",
        b"FCALL_RO",
    ]
    .iter()
    .any(|name| command.eq_ignore_ascii_case(name))
}
