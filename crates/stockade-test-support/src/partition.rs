//! A TCP proxy that can black-hole its traffic: a network partition
//! between one process and a server, for the tests that cut one instance
//! off from Redis while the others still reach it.
//!
//! While cut, the proxy forwards nothing in either direction, but every
//! connection stays open and new ones are accepted: the client sees a
//! silent peer (its requests time out), not a refused port, as across a
//! real partition. Bytes sent during the cut are held and delivered once
//! healed, as TCP retransmission would deliver them.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::TestSupportError;

/// How often a held pump looks whether the cut has healed.
const POLL: Duration = Duration::from_millis(5);

/// A proxy from a loopback port to `target`. Stops (and closes every
/// connection) when dropped.
#[derive(Debug)]
pub struct PartitionProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl PartitionProxy {
    /// Starts forwarding a free loopback port to `target`.
    pub fn start(target: SocketAddr) -> Result<Self, TestSupportError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestSupportError::Io("binding the partition proxy".into(), e))?;
        let port = listener
            .local_addr()
            .map_err(|e| TestSupportError::Io("reading the proxy's port".into(), e))?
            .port();
        let proxy = Self {
            port,
            cut: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            streams: Arc::new(Mutex::new(Vec::new())),
        };
        let (cut, stop, streams) = (proxy.cut.clone(), proxy.stop.clone(), proxy.streams.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let pairs = [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ];
                {
                    let mut open = streams.lock().unwrap();
                    open.push(client);
                    open.push(server);
                }
                for (from, to) in pairs {
                    let (Ok(from), Ok(to)) = (from, to) else {
                        continue;
                    };
                    let (cut, stop) = (cut.clone(), stop.clone());
                    thread::spawn(move || pump(from, to, &cut, &stop));
                }
            }
        });
        Ok(proxy)
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops forwarding: the partition begins.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
    }

    /// Forwards again, delivering what was held: the partition heals.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::Release);
    }
}

impl Drop for PartitionProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.cut.store(false, Ordering::Release);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Wakes the accept loop so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to`, holding what it read while the proxy is cut.
fn pump(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool, stop: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while cut.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
            thread::sleep(POLL);
        }
        if stop.load(Ordering::Acquire) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_holds_the_bytes_and_a_heal_delivers_them() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = server.local_addr().unwrap();
        let echo = thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let proxy = PartitionProxy::start(target).unwrap();
        let mut client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        proxy.cut();
        client.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        let silent = client.read_exact(&mut buf);
        assert!(silent.is_err(), "nothing may cross a cut proxy");
        proxy.heal();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        client.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        echo.join().unwrap();
    }
}
