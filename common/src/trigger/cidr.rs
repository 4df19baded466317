//! CIDR blocks (`10.0.0.0/8`, `2001:db8::/32`, or a bare address for one host): a
//! trigger's `allow_ips` and the api-server's `--trusted-proxy` addresses.

use serde::{Serialize, Serializer};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A network: an address whose host bits are zero, and its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in this network. An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`,
    /// what a server bound to `::` sees of an IPv4 client) counts as that IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(ip)), 32, self.prefix) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(ip), 128, self.prefix) == u128::from(net)
            }
            _ => false,
        }
    }
}

/// `bits` (an address `width` bits wide) with all but its first `prefix` bits cleared.
fn masked(bits: u128, width: u8, prefix: u8) -> u128 {
    let host = u32::from(width - prefix);
    // A shift by the whole width (a /0 of IPv6) overflows: nothing is left.
    bits.checked_shr(host).map_or(0, |b| b << host)
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = addr.trim().parse().map_err(|_| {
            format!("'{text}' is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, 2001:db8::/32)")
        })?;
        let width = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(|| {
                    format!(
                        "'{text}': the prefix length after '/' must be a number from 0 to {width}"
                    )
                })?,
        };
        let bits = match network {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        if masked(bits, width, prefix) != bits {
            return Err(format!(
                "'{text}' has bits set past its /{prefix} prefix: write the network's first address, or /{width} for the one host"
            ));
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
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
