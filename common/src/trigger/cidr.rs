//! CIDR blocks (`10.0.0.0/8`, `2001:db8::/32`, or a bare address for one host): a
//! trigger's `allow_ips` and the api-server's `--trusted-proxy` addresses.

use ipnet::IpNet;
use serde::{Serialize, Serializer};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A network: an address whose host bits are zero, and its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    /// Whether `ip` is in this network. An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`,
    /// what a server bound to `::` sees of an IPv4 client) counts as that IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

/// Parsed here rather than by [`IpNet`]'s `FromStr`: a bare address is a host's block,
/// host bits past the prefix are refused (`10.1.2.3/8` is likely a typo), and the error
/// says which part is wrong.
impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = addr.trim().parse().map_err(|_| {
            format!("'{text}' is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, 2001:db8::/32)")
        })?;
        let host = IpNet::from(address);
        let width = host.max_prefix_len();
        let net = match prefix {
            None => Some(host),
            Some(p) => (p.trim().parse::<u8>().ok()).and_then(|p| IpNet::new(address, p).ok()),
        };
        let net = net.ok_or_else(|| {
            format!("'{text}': the prefix length after '/' must be a number from 0 to {width}")
        })?;
        if net.network() != address {
            return Err(format!(
                "'{text}' has bits set past its /{} prefix: write the network's first address, or /{width} for the one host",
                net.prefix_len()
            ));
        }
        Ok(Cidr(net))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn parses_blocks_and_bare_addresses() {
        assert_eq!(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(cidr("192.0.2.7").to_string(), "192.0.2.7/32");
        assert_eq!(cidr(" 0.0.0.0/0 ").to_string(), "0.0.0.0/0");
        assert_eq!(cidr("::1").to_string(), "::1/128");
        assert_eq!(cidr("2001:db8::/32").to_string(), "2001:db8::/32");
        assert_eq!(cidr("::/0").to_string(), "::/0");
    }

    #[test]
    fn refuses_what_is_not_a_block_and_says_why() {
        for (text, says) in [
            ("", "not an IP address"),
            ("10.0.0", "not an IP address"),
            ("example.com", "not an IP address"),
            ("10.0.0.0/", "from 0 to 32"),
            ("10.0.0.0/33", "from 0 to 32"),
            ("10.0.0.0/-1", "from 0 to 32"),
            ("::/129", "from 0 to 128"),
            ("10.1.2.3/8", "bits set past its /8 prefix"),
            ("2001:db8::1/32", "bits set past its /32 prefix"),
            ("10.0.0.0/8/8", "from 0 to 32"),
        ] {
            let e = text.parse::<Cidr>().expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn matches_the_addresses_of_its_network_only() {
        let net = cidr("10.20.0.0/16");
        assert!(net.contains(ip("10.20.0.0")));
        assert!(net.contains(ip("10.20.255.255")));
        assert!(!net.contains(ip("10.21.0.0")));
        assert!(!net.contains(ip("::ffff:10.21.0.1")));
        assert!(
            net.contains(ip("::ffff:10.20.3.4")),
            "IPv4 mapped into IPv6"
        );
        let host = cidr("127.0.0.1");
        assert!(host.contains(ip("127.0.0.1")));
        assert!(!host.contains(ip("127.0.0.2")));
        assert!(cidr("0.0.0.0/0").contains(ip("203.0.113.9")));
        assert!(!cidr("0.0.0.0/0").contains(ip("2001:db8::1")));
        let v6 = cidr("2001:db8::/32");
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
        assert!(cidr("::/0").contains(ip("::1")));
        assert!(cidr("172.16.0.0/12").contains(ip("172.31.255.1")));
        assert!(!cidr("172.16.0.0/12").contains(ip("172.32.0.1")));
    }
}
