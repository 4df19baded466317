//! The caller's address: the TCP peer, or the client a trusted proxy (`--trusted-proxy`)
//! says it forwarded. Trigger checks and the audit log both go by it.

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use shoal_common::trigger::cidr::Cidr;
use std::net::{IpAddr, SocketAddr};

/// The caller's address: the TCP peer, unless the peer is a trusted proxy; then the
/// nearest address of its `X-Forwarded-For` that is not a trusted proxy itself (the
/// header's right end is what the proxy next to us added; anything left of an untrusted
/// hop could be forged). None when the server was not given the peer (tests).
fn client_address(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[Cidr]) -> Option<IpAddr> {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    // A dual-stack listener gives IPv4 peers as `::ffff:a.b.c.d`.
    let mut client = peer?.to_canonical();
    if !is_trusted(client) {
        return Some(client);
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    for hop in hops.into_iter().rev() {
        // Some proxies add the port too.
        let ip = hop
            .parse::<IpAddr>()
            .or_else(|_| hop.parse::<SocketAddr>().map(|a| a.ip()));
        // An unreadable hop ends the trust at the proxy that passed it on.
        let Ok(ip) = ip else { break };
        client = ip.to_canonical();
        if !is_trusted(client) {
            break;
        }
    }
    Some(client)
}

/// The caller of `req`: [`client_address`] of the peer the server recorded on it.
pub(crate) fn request_client(req: &Request, trusted: &[Cidr]) -> Option<IpAddr> {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    client_address(peer, req.headers(), trusted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let trusted: Vec<Cidr> = ["10.0.0.0/8", "::1"]
            .iter()
            .map(|c| c.parse().unwrap())
            .collect();
        let client = |peer: &str, xff: &[&str]| {
            client_address(Some(ip(peer)), &forwarded(xff), &trusted)
                .unwrap()
                .to_string()
        };
        assert_eq!(client("203.0.113.5", &["198.51.100.1"]), "203.0.113.5");
        assert_eq!(client("10.0.0.2", &["198.51.100.1"]), "198.51.100.1");
        assert_eq!(client("10.0.0.2", &[]), "10.0.0.2");
        // The nearest untrusted hop; what it claims before that could be forged.
        assert_eq!(
            client("10.0.0.2", &["1.1.1.1, 198.51.100.1, 10.0.0.9"]),
            "198.51.100.1"
        );
        assert_eq!(
            client("10.0.0.2", &["1.1.1.1", "198.51.100.1"]),
            "198.51.100.1"
        );
        assert_eq!(client("10.0.0.2", &["198.51.100.1:4431"]), "198.51.100.1");
        assert_eq!(client("10.0.0.2", &["[2001:db8::7]:80"]), "2001:db8::7");
        assert_eq!(client("10.0.0.2", &["nonsense"]), "10.0.0.2");
        assert_eq!(
            client("10.0.0.2", &["198.51.100.1, junk, 10.0.0.3"]),
            "10.0.0.3"
        );
        assert_eq!(client("::1", &["::ffff:198.51.100.1"]), "198.51.100.1");
        assert!(client_address(None, &forwarded(&["1.1.1.1"]), &trusted).is_none());
    }
}
