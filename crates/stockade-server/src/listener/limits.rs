//! [`HttpLimits`]: the listener's timeouts, connection caps and shutdown
//! bound, and the open-file limit the connection cap's default derives from.

use std::time::Duration;

/// File descriptors kept out of the connection cap's default and bound:
/// the store's pool, Redis connections, the listener, logs, the SQLite
/// files.
pub const RESERVED_FILES: u64 = 128;

/// The default cap is never above this, however high the open-file limit.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 10_000;

/// Timeouts, the connection cap and the shutdown bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client may take to send a request head, counted from when
    /// it connected or its previous response was sent; and then its body,
    /// counted from the end of the head.
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection may stay open without a request.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open connections of one client address at most.
    pub max_connections_per_client: usize,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_timeout: Duration,
}

impl HttpLimits {
    /// The default cap for an open-file limit: the limit less
    /// [`RESERVED_FILES`], at most [`DEFAULT_MAX_CONNECTIONS`], at least 16.
    pub fn default_max_connections(open_file_limit: u64) -> usize {
        open_file_limit
            .saturating_sub(RESERVED_FILES)
            .clamp(16, DEFAULT_MAX_CONNECTIONS) as usize
    }

    /// The highest cap allowed under an open-file limit.
    pub fn most_connections(open_file_limit: u64) -> usize {
        open_file_limit.saturating_sub(RESERVED_FILES).max(16) as usize
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(75),
            max_connections: Self::default_max_connections(open_file_limit()),
            max_connections_per_client: crate::client_cap::DEFAULT_PER_CLIENT,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// The process's open-file limit (`ulimit -n`, the soft limit).
pub fn open_file_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1_024, |(soft, _)| soft)
}

/// Raises the open-file soft limit to the hard limit (as Go's runtime
/// does), so that the default connection cap is not held at a distribution's
/// historical 1,024. Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => open_file_limit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cap_stays_inside_the_open_file_limit() {
        assert_eq!(HttpLimits::default_max_connections(1_024), 896);
        assert_eq!(HttpLimits::default_max_connections(1 << 20), 10_000);
        assert_eq!(HttpLimits::default_max_connections(64), 16);
        assert_eq!(HttpLimits::most_connections(4_096), 3_968);
    }
}
