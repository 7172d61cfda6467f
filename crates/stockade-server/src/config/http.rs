//! Where the service listens and how it treats connections: the address,
//! the public URL, the HTTP server's timeouts, connection caps and
//! shutdown bound.

use std::net::SocketAddr;
use std::time::Duration;

use super::group::settings_group;
use super::{ConfigError, Sources, invalid};
use crate::listener::HttpLimits;

settings_group! {
    /// Listening and connections.
    #[command(next_help_heading = "Listening and connections")]
    pub struct HttpSettings {
        /// Address to listen on.
        #[arg(long, env = "STOCKADE_LISTEN", value_name = "ADDR", default_value = "127.0.0.1:8080")]
        pub listen: Option<String>,
        /// The address browsers reach the service at, e.g.
        /// `https://shop.example.com`. With https:// the dashboard's session
        /// cookie is marked Secure; a request header never decides that.
        /// Default: none, the cookie is not Secure.
        #[arg(long, env = "STOCKADE_PUBLIC_URL", value_name = "URL")]
        pub public_url: Option<String>,
        /// How long a client may take to send a request's headers, counted
        /// from when it connected or got its previous answer, and then the
        /// body they announce; slower clients are disconnected (1 to
        /// 300000).
        #[arg(long, env = "STOCKADE_HEADER_READ_TIMEOUT_MS", value_name = "MS", default_value = "5000")]
        pub header_read_timeout_ms: Option<u64>,
        /// How long a keep-alive connection may stay open without a
        /// request: longer than a load balancer's usual 60 s, so the
        /// balancer closes first (1 to 3600000).
        #[arg(long, env = "STOCKADE_IDLE_TIMEOUT_MS", value_name = "MS", default_value = "75000")]
        pub idle_timeout_ms: Option<u64>,
        /// Most open connections; one more is answered 503 with
        /// Retry-After: 1 and closed at once. Default: the open-file limit
        /// less 128, at most 10000.
        #[arg(long, env = "STOCKADE_MAX_CONNECTIONS", value_name = "N")]
        pub max_connections: Option<u64>,
        /// Most open connections of one client address (an IPv6 client by
        /// its /64); one more is answered 503 too_many_connections and
        /// closed, unless its request carries the admin token. Trusted
        /// proxies are not capped; raise it for a load generator.
        #[arg(long, env = "STOCKADE_MAX_CONNECTIONS_PER_CLIENT", value_name = "N", default_value = "256")]
        pub max_connections_per_client: Option<u64>,
        /// On SIGTERM or Ctrl-C: how long requests in flight get to finish
        /// before every connection is closed; then the writer commits what
        /// it holds and the process exits. Longer than the commit deadline.
        #[arg(long, env = "STOCKADE_SHUTDOWN_TIMEOUT_MS", value_name = "MS", default_value = "10000")]
        pub shutdown_timeout_ms: Option<u64>,
    }
}

impl HttpSettings {
    /// `listen`: an address like 127.0.0.1:8080.
    pub(super) fn resolve_listen(&self, sources: &Sources) -> Result<SocketAddr, ConfigError> {
        let text = self.listen.as_deref().unwrap_or_default();
        text.parse().map_err(|_| {
            invalid(
                &sources.name("listen"),
                format!("{text:?} is not an address like 127.0.0.1:8080"),
            )
        })
    }

    /// The HTTP server's limits: timeouts within bounds, the connection cap
    /// within the open-file limit, a shutdown long enough to answer the
    /// purchases in flight (whose wait is `commit_deadline`).
    pub(super) fn resolve_limits(
        &self,
        commit_deadline: Duration,
        sources: &Sources,
    ) -> Result<HttpLimits, ConfigError> {
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        let millis = |key: &str, value: Option<u64>, max: u64| {
            let value = value.unwrap_or_default();
            if !(1..=max).contains(&value) {
                return Err(bad(
                    key,
                    format!("must be between 1 and {max} (it is {value})"),
                ));
            }
            Ok(Duration::from_millis(value))
        };
        let header_read_timeout = millis(
            "header_read_timeout_ms",
            self.header_read_timeout_ms,
            300_000,
        )?;
        let idle_timeout = millis("idle_timeout_ms", self.idle_timeout_ms, 3_600_000)?;
        let shutdown_timeout = millis("shutdown_timeout_ms", self.shutdown_timeout_ms, 600_000)?;
        if shutdown_timeout <= commit_deadline {
            return Err(bad(
                "shutdown_timeout_ms",
                format!(
                    "must be longer than the commit deadline ({} = {} ms), or purchases in flight at shutdown could go unanswered",
                    sources.name("commit_deadline_ms"),
                    commit_deadline.as_millis()
                ),
            ));
        }
        let file_limit = crate::listener::open_file_limit();
        let max_connections = match self.max_connections {
            None => HttpLimits::default_max_connections(file_limit),
            Some(n) => {
                let most = HttpLimits::most_connections(file_limit);
                if !(1..=most as u64).contains(&n) {
                    return Err(bad(
                        "max_connections",
                        format!(
                            "must be between 1 and {most} (it is {n}): each connection is a file descriptor and the process may open {file_limit} (ulimit -n), {} of which are kept for the store, Redis and logs; raise the limit or lower the setting",
                            crate::listener::RESERVED_FILES
                        ),
                    ));
                }
                n as usize
            }
        };
        let per_client = self.max_connections_per_client.unwrap_or_default();
        if !(1..=1_000_000).contains(&per_client) {
            return Err(bad(
                "max_connections_per_client",
                format!("must be between 1 and 1000000 (it is {per_client})"),
            ));
        }
        Ok(HttpLimits {
            header_read_timeout,
            idle_timeout,
            max_connections,
            max_connections_per_client: per_client as usize,
            shutdown_timeout,
        })
    }
}

/// Where browsers reach the service (`--public-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    /// Whether browsers reach the service over TLS: then its cookies are
    /// `Secure`.
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    /// The address as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl HttpSettings {
    /// `public_url`: an `http://` or `https://` address with a host.
    pub(super) fn resolve_public_url(
        &self,
        sources: &Sources,
    ) -> Result<Option<PublicUrl>, ConfigError> {
        let url = self
            .public_url
            .as_deref()
            .map(str::trim)
            .unwrap_or_default();
        if url.is_empty() {
            return Ok(None);
        }
        let host = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .map(|rest| rest.split('/').next().unwrap_or(""));
        match host {
            Some(host) if !host.is_empty() && !url.contains(char::is_whitespace) => {
                Ok(Some(PublicUrl(url.trim_end_matches('/').to_owned())))
            }
            _ => Err(invalid(
                &sources.name("public_url"),
                format!(
                    "{url:?} is not an address like https://shop.example.com (http:// or https://, then a host)"
                ),
            )),
        }
    }
}
