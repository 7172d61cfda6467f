//! Who the client is. The TCP peer, unless the peer is a trusted proxy:
//! then `X-Forwarded-For` is read from the right (the hop nearest to us)
//! and the first address that is not a trusted proxy is the client.
//! Anyone can write `X-Forwarded-For`; only a trusted proxy's word counts.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The proxies (addresses or CIDR ranges) whose `X-Forwarded-For` is
/// believed. Empty: the header is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR ranges, e.g.
    /// `10.0.0.0/8, 192.168.1.7, fd00::/8`.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let range = match item.parse::<IpNet>() {
                Ok(range) => range,
                Err(_) => item.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
                    format!("{item:?} is not an IP address or a CIDR range like 10.0.0.0/8")
                })?,
            };
            ranges.push(range);
        }
        Ok(Self(ranges))
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|range| range.contains(&ip))
    }

    /// Whether any proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The client behind `peer`: `peer` itself unless it is a trusted proxy,
    /// else the nearest untrusted hop of `X-Forwarded-For` (every header
    /// line, in order). A hop that is not an address ends the walk at the
    /// last trusted hop: what lies beyond it cannot be believed.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.contains(client) {
            return client;
        }
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .collect();
        for hop in hops.iter().rev() {
            let Some(ip) = parse_hop(hop) else {
                return client;
            };
            client = ip.to_canonical();
            if !self.contains(client) {
                return client;
            }
        }
        client
    }
}

/// An `X-Forwarded-For` hop: an address, perhaps with a port
/// (`1.2.3.4:5678`, `[2001:db8::1]:443`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    hop.parse::<std::net::SocketAddr>().ok().map(|s| s.ip())
}

/// The key a client is limited under: an IPv4 address, or an IPv6
/// client's /64 (one household or host gets a whole /64 to pick from).
pub fn limit_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            format!("{}/64", Ipv6Addr::from(prefix))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn forwarded_for_counts_only_from_trusted_proxies() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 192.168.1.7").unwrap();
        let forged = headers(&["6.6.6.6"]);
        // An untrusted peer is the client, whatever it claims.
        assert_eq!(
            trusted.client(ip("203.0.113.9"), &forged),
            ip("203.0.113.9")
        );
        // A trusted proxy's word counts: the nearest untrusted hop.
        assert_eq!(trusted.client(ip("10.1.2.3"), &forged), ip("6.6.6.6"));
        let chain = headers(&["6.6.6.6, 198.51.100.4", "10.9.9.9"]);
        assert_eq!(
            trusted.client(ip("192.168.1.7"), &chain),
            ip("198.51.100.4")
        );
        // Garbage beyond a trusted hop stops the walk there.
        let garbage = headers(&["6.6.6.6, nonsense, 10.2.2.2"]);
        assert_eq!(trusted.client(ip("10.1.1.1"), &garbage), ip("10.2.2.2"));
        // Ports and IPv4-mapped IPv6 addresses.
        let ported = headers(&["[2001:db8::1]:443"]);
        assert_eq!(
            trusted.client(ip("::ffff:10.0.0.1"), &ported),
            ip("2001:db8::1")
        );
        // No header: the proxy itself.
        assert_eq!(
            trusted.client(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // Nobody trusted: the header is ignored.
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.1"), &forged),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn trusted_proxies_parse_or_say_what_is_wrong() {
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(
            TrustedProxies::parse("::1, fd00::/8")
                .unwrap()
                .contains(ip("fd00::7"))
        );
        let error = TrustedProxies::parse("10.0.0.0/8, proxy.local").unwrap_err();
        assert!(error.contains("proxy.local"), "{error}");
    }

    #[test]
    fn ipv6_clients_are_limited_by_their_64() {
        assert_eq!(limit_key(ip("2001:db8:1:2:3:4:5:6")), "2001:db8:1:2::/64");
        assert_eq!(limit_key(ip("::ffff:192.0.2.1")), "192.0.2.1");
    }
}
