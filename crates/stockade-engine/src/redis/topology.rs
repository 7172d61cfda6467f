//! Which Redis deployment the engine talks to, read from one URL:
//!
//! - `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS): a
//!   single server;
//! - `redis+sentinel://[user:password@]host:26379,host2:26379/service[/db]`:
//!   the primary that Redis Sentinel names for `service`, followed across
//!   failovers (the credentials, database and TLS are the primary's; the
//!   sentinels are asked without credentials);
//! - `redis+cluster://[user:password@]host:6379,host2:6379`: a Redis Cluster
//!   reached through any of the seed nodes.
//!
//! Descriptions and errors name hosts and ports only, never a password.

use std::fmt;
use stockade_core::redact::endpoint;

/// The default port of a sentinel.
const SENTINEL_PORT: u16 = 26379;
/// The default port of a Redis server.
const REDIS_PORT: u16 = 6379;

/// A Redis deployment.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTopology {
    /// One server (`redis://` or `rediss://`).
    Standalone {
        /// The server's URL.
        url: String,
    },
    /// A Redis Cluster.
    Cluster {
        /// `redis://` URLs of seed nodes; the client learns the others.
        nodes: Vec<String>,
    },
    /// The primary of a Sentinel-monitored group.
    Sentinel {
        /// `redis://` URLs of the sentinels (no credentials).
        sentinels: Vec<String>,
        /// The name the sentinels monitor the group under (`mymaster`).
        service: String,
        /// A `redis://` URL carrying the primary's credentials, database and
        /// TLS mode; its host is a placeholder, replaced by whatever primary
        /// the sentinels name.
        primary_settings: String,
    },
}

/// A Redis URL that cannot be used; the message names no password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RedisUrlError(String);

impl RedisTopology {
    /// Reads a Redis URL of any of the forms in the module docs.
    pub fn from_url(url: &str) -> Result<Self, RedisUrlError> {
        let url = url.trim();
        let fail = |reason: String| Err(RedisUrlError(reason));
        let Some((scheme, rest)) = url.split_once("://") else {
            return fail(format!(
                "{:?} is not a URL: use redis://host:port, \
                 redis+sentinel://host:26379,host2:26379/service or \
                 redis+cluster://host:6379,host2:6379",
                endpoint(url)
            ));
        };
        let (tls, kind) = match scheme {
            "redis" => (false, ""),
            "rediss" => (true, ""),
            "redis+sentinel" => (false, "sentinel"),
            "rediss+sentinel" => (true, "sentinel"),
            "redis+cluster" => (false, "cluster"),
            "rediss+cluster" => (true, "cluster"),
            other => {
                return fail(format!(
                    "unknown scheme {other:?}: use redis://, rediss://, redis+sentinel://, \
                     rediss+sentinel://, redis+cluster:// or rediss+cluster://"
                ));
            }
        };
        let node_scheme = if tls { "rediss" } else { "redis" };
        if kind.is_empty() {
            redis::Client::open(url).map_err(|e| {
                RedisUrlError(format!("{} is not a valid Redis URL: {e}", endpoint(url)))
            })?;
            return Ok(Self::Standalone {
                url: url.to_owned(),
            });
        }
        let parts = UrlParts::split(rest, kind)?;
        let default_port = if kind == "sentinel" {
            SENTINEL_PORT
        } else {
            REDIS_PORT
        };
        let hosts = parts
            .hosts
            .iter()
            .map(|host| host_port(host, default_port, kind))
            .collect::<Result<Vec<_>, _>>()?;
        let credentials = parts.userinfo.map_or(String::new(), |u| format!("{u}@"));
        let segments: Vec<&str> = parts.path.split('/').filter(|s| !s.is_empty()).collect();
        let db = |text: &str| {
            text.parse::<u32>().map_err(|_| {
                RedisUrlError(format!("{kind} URL: the database {text:?} is not a number"))
            })
        };
        let topology = if kind == "cluster" {
            match segments.as_slice() {
                [] => {}
                [zero] if db(zero)? == 0 => {}
                _ => {
                    return fail(
                        "cluster URL: a Redis Cluster has only database 0; drop the path".into(),
                    );
                }
            }
            Self::Cluster {
                nodes: hosts
                    .iter()
                    .map(|host| format!("{node_scheme}://{credentials}{host}"))
                    .collect(),
            }
        } else {
            let (service, database) = match segments.as_slice() {
                [service] => (*service, 0),
                [service, database] => (*service, db(database)?),
                _ => {
                    return fail(
                        "sentinel URL: name the monitored service after the hosts, \
                         as in redis+sentinel://host:26379,host2:26379/mymaster (optionally /db)"
                            .into(),
                    );
                }
            };
            Self::Sentinel {
                sentinels: hosts
                    .iter()
                    .map(|host| format!("{node_scheme}://{host}"))
                    .collect(),
                service: service.to_owned(),
                primary_settings: format!("{node_scheme}://{credentials}primary/{database}"),
            }
        };
        // Every URL built above must be one the client accepts.
        for url in topology.urls() {
            redis::Client::open(url.as_str()).map_err(|e| {
                RedisUrlError(format!(
                    "{kind} URL: {} is not a valid node: {e}",
                    endpoint(&url)
                ))
            })?;
        }
        Ok(topology)
    }

    fn urls(&self) -> Vec<String> {
        match self {
            Self::Standalone { url } => vec![url.clone()],
            Self::Cluster { nodes } => nodes.clone(),
            Self::Sentinel {
                sentinels,
                primary_settings,
                ..
            } => {
                let mut urls = sentinels.clone();
                urls.push(primary_settings.clone());
                urls
            }
        }
    }
}

/// Hosts and ports only, for logs and errors.
impl fmt::Display for RedisTopology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts = |urls: &[String]| {
            urls.iter()
                .map(|u| endpoint(u))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Self::Standalone { url } => write!(f, "Redis at {}", endpoint(url)),
            Self::Cluster { nodes } => write!(f, "Redis Cluster via {}", hosts(nodes)),
            Self::Sentinel {
                sentinels, service, ..
            } => write!(
                f,
                "the primary of {service:?} named by Redis Sentinel at {}",
                hosts(sentinels)
            ),
        }
    }
}

impl fmt::Debug for RedisTopology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisTopology({self})")
    }
}

/// A multi-host URL after its scheme: `[userinfo@]host[:port],...[/path]`.
struct UrlParts<'a> {
    userinfo: Option<&'a str>,
    hosts: Vec<&'a str>,
    path: &'a str,
}

impl<'a> UrlParts<'a> {
    fn split(rest: &'a str, kind: &str) -> Result<Self, RedisUrlError> {
        if rest.contains(['?', '#']) {
            return Err(RedisUrlError(format!(
                "{kind} URL: query parameters are not supported; put the database in the path"
            )));
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
        if hosts.iter().any(|h| h.is_empty()) {
            return Err(RedisUrlError(format!(
                "{kind} URL: list at least one host, separated by commas, as in \
                 redis+{kind}://host1:port,host2:port"
            )));
        }
        Ok(Self {
            userinfo,
            hosts,
            path,
        })
    }
}

/// `host:port` with the default port filled in; IPv6 in brackets.
fn host_port(host: &str, default_port: u16, kind: &str) -> Result<String, RedisUrlError> {
    let (name, port) = if let Some(inner) = host.strip_prefix('[') {
        let (address, after) = inner
            .split_once(']')
            .ok_or_else(|| RedisUrlError(format!("{kind} URL: {host:?} lacks the closing `]`")))?;
        (format!("[{address}]"), after.strip_prefix(':'))
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name.to_owned(), Some(port)),
            None => (host.to_owned(), None),
        }
    };
    let port = match port {
        None => default_port,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                RedisUrlError(format!("{kind} URL: {text:?} in {host:?} is not a port"))
            })?,
    };
    if name.is_empty() || name == "[]" {
        return Err(RedisUrlError(format!("{kind} URL: {host:?} has no host")));
    }
    Ok(format!("{name}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_url_is_a_standalone_server() {
        let topology = RedisTopology::from_url("redis://:secret@127.0.0.1:6380/2").unwrap();
        assert_eq!(
            topology,
            RedisTopology::Standalone {
                url: "redis://:secret@127.0.0.1:6380/2".into()
            }
        );
        assert_eq!(topology.to_string(), "Redis at 127.0.0.1:6380");
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_and_the_service() {
        let topology =
            RedisTopology::from_url("redis+sentinel://u:p%40ss@10.0.0.1,10.0.0.2:26380/mymaster/3")
                .unwrap();
        assert_eq!(
            topology,
            RedisTopology::Sentinel {
                sentinels: vec![
                    "redis://10.0.0.1:26379".into(),
                    "redis://10.0.0.2:26380".into()
                ],
                service: "mymaster".into(),
                primary_settings: "redis://u:p%40ss@primary/3".into(),
            }
        );
        let shown = format!("{topology} {topology:?}");
        assert!(shown.contains("10.0.0.1:26379,10.0.0.2:26380"), "{shown}");
        assert!(!shown.contains("p%40ss"), "{shown}");
    }

    #[test]
    fn a_cluster_url_lists_the_seed_nodes() {
        let topology = RedisTopology::from_url("rediss+cluster://:pw@a:7000,[::1]:7001,b").unwrap();
        assert_eq!(
            topology,
            RedisTopology::Cluster {
                nodes: vec![
                    "rediss://:pw@a:7000".into(),
                    "rediss://:pw@[::1]:7001".into(),
                    "rediss://:pw@b:6379".into()
                ]
            }
        );
        assert_eq!(
            topology.to_string(),
            "Redis Cluster via a:7000,[::1]:7001,b:6379"
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (url, expected) in [
            ("http://h:1", "unknown scheme \"http\""),
            ("h:6379", "is not a URL"),
            ("redis+sentinel://:pw@h:26379", "name the monitored service"),
            (
                "redis+sentinel://:pw@h:26379/a/b/c",
                "name the monitored service",
            ),
            (
                "redis+sentinel://:pw@h:26379/svc/x",
                "the database \"x\" is not a number",
            ),
            ("redis+cluster://:pw@h:7000,,g", "list at least one host"),
            ("redis+cluster://:pw@h:70000", "is not a port"),
            ("redis+cluster://:pw@h:7000/1", "only database 0"),
            ("redis+cluster://:pw@h:7000?tls=1", "query parameters"),
            ("redis+sentinel://:pw@:26379/svc", "has no host"),
        ] {
            let error = RedisTopology::from_url(url).unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
            assert!(!error.contains("pw"), "{url}: {error}");
        }
    }
}
