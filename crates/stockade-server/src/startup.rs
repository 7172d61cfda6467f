//! Reaching the database and Redis at start. Before the store or the
//! engine connects, a TCP probe checks that something listens at the URL's
//! host and port: a refused or unanswered connection becomes one error that
//! names the service, its `host:port` (never the password), the setting and
//! what to do, instead of a driver's retries repeating "Connection refused".
//! While the service is unreachable the start waits up to
//! `--startup-wait-ms` (saying so once), for an instance started alongside
//! its database.

use backon::{ConstantBuilder, Retryable};
use std::io;
use std::time::Duration;

use tokio::time::Instant;

use stockade_core::redact::endpoint;

/// How long one probe connection may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Something the service needs at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The PostgreSQL order store (and engine).
    Postgres,
    /// The Redis engine.
    Redis,
}

impl Backend {
    /// The product's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "PostgreSQL",
            Self::Redis => "Redis",
        }
    }
}

/// Why a backend cannot be reached.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot reach {} at {endpoint} ({setting}): {reason}; check that it is running there and that the URL is right{}",
    backend.name(),
    waited.map_or(String::new(), |w| format!(" (waited {} s)", w.as_secs()))
)]
pub struct Unreachable {
    /// Which backend.
    pub backend: Backend,
    /// `host:port`.
    pub endpoint: String,
    /// The setting the URL came from, as it was given.
    pub setting: String,
    /// What the probe met: refused, timed out, unknown host.
    pub reason: String,
    /// How long the start waited for it, if it did.
    pub waited: Option<Duration>,
}

/// Waits until something accepts TCP connections at `url` (given as
/// `setting`)'s host and port, for at most `wait`. URLs that name several
/// hosts (Sentinel) or a socket path are left to the driver.
pub async fn reach(
    backend: Backend,
    url: &str,
    setting: &str,
    wait: Duration,
) -> Result<(), Unreachable> {
    let target = endpoint(url);
    if target.is_empty() || target.contains(',') || target.starts_with('(') {
        return Ok(());
    }
    let started = Instant::now();
    let said_so = std::sync::atomic::AtomicBool::new(false);
    let probed = (|| probe(&target))
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(250))
                .without_max_times(),
        )
        .when(|error| matches!(error, Probe::Transient(_)) && started.elapsed() < wait)
        .notify(|error, _| {
            if !said_so.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    "{} at {target} is not reachable yet ({}); waiting up to {} s for it (--startup-wait-ms / STOCKADE_STARTUP_WAIT_MS)",
                    backend.name(),
                    error.reason(),
                    wait.as_secs()
                );
            }
        })
        .await;
    probed.map_err(|error| Unreachable {
        backend,
        endpoint: target.clone(),
        setting: setting.to_owned(),
        reason: error.into_reason(),
        waited: said_so.into_inner().then(|| started.elapsed()),
    })
}

enum Probe {
    /// Worth waiting for: refused, reset, timed out.
    Transient(String),
    /// Waiting will not help: the host name does not resolve.
    Permanent(String),
}

impl Probe {
    fn reason(&self) -> &str {
        match self {
            Self::Transient(reason) | Self::Permanent(reason) => reason,
        }
    }

    fn into_reason(self) -> String {
        match self {
            Self::Transient(reason) | Self::Permanent(reason) => reason,
        }
    }
}

async fn probe(target: &str) -> Result<(), Probe> {
    let addresses: Vec<_> = match tokio::net::lookup_host(target).await {
        Ok(addresses) => addresses.collect(),
        Err(error) => return Err(Probe::Permanent(format!("unknown host ({error})"))),
    };
    let mut last = Probe::Permanent("the host name has no address".to_owned());
    for address in addresses {
        match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(address)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(error)) => last = Probe::Transient(describe(&error)),
            Err(_) => {
                last = Probe::Transient(format!("no answer within {} s", PROBE_TIMEOUT.as_secs()));
            }
        }
    }
    Err(last)
}

fn describe(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        io::ErrorKind::TimedOut => "connection timed out".to_owned(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_port_is_named_once_with_what_to_do() {
        // A port nobody listens on: bind one, then free it.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("postgres://app:s3cret@127.0.0.1:{port}/orders");
        let error = reach(Backend::Postgres, &url, "--database-url", Duration::ZERO)
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.contains("--database-url"), "{text}");
        assert_eq!(text.matches("refused").count(), 1, "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[tokio::test]
    async fn a_listening_port_is_reached() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "redis://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        reach(Backend::Redis, &url, "--redis-url", Duration::ZERO)
            .await
            .unwrap();
    }
}
