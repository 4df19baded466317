//! Mutual TLS between a cluster's nodes: each has a certificate signed by the cluster's
//! CA, presents it on every connection, and accepts only peers that present one too. It
//! encrypts what the cluster secret alone leaves in clear (task specs, with the secrets a
//! task was given; task logs) and ties each node to a certificate. docs/security.md shows
//! how to make the CA and the node certificates with openssl.

use std::path::Path;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The environment variables of the three files (`--tls-cert`, `--tls-key`, `--tls-ca`).
pub const CERT_ENV: &str = "SHOAL_TLS_CERT";
pub const KEY_ENV: &str = "SHOAL_TLS_KEY";
pub const CA_ENV: &str = "SHOAL_TLS_CA";

pub struct ClusterTls {
    ca: Certificate,
    identity: Identity,
}

impl ClusterTls {
    /// The node's certificate and key and the cluster's CA certificate, PEM files.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<ClusterTls, String> {
        let read = |what: &str, path: &Path| {
            let pem = std::fs::read(path)
                .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
            if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
                return Err(format!("the {what} {} is not a PEM file", path.display()));
            }
            Ok(pem)
        };
        let (cert, key, ca) = (
            read("certificate", cert)?,
            read("private key", key)?,
            read("CA certificate", ca)?,
        );
        Ok(ClusterTls {
            ca: Certificate::from_pem(ca),
            identity: Identity::from_pem(cert, key),
        })
    }

    /// A server's: presents the node's certificate, requires one of the CA from clients.
    pub fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
    }

    /// A client's, to `host`: trusts only the CA, presents the node's certificate.
    pub fn client(&self, host: &str) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone())
            .domain_name(host)
    }
}

/// The host part of `host:port` (an IPv6 address without its brackets).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_cut_from_addresses() {
        assert_eq!(host_of("10.0.0.7:1234"), "10.0.0.7");
        assert_eq!(host_of("worker-1.internal:1234"), "worker-1.internal");
        assert_eq!(host_of("[::1]:5678"), "::1");
    }

    #[test]
    fn missing_or_non_pem_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let missing = dir.path().join("missing.pem");
        let e = ClusterTls::load(&missing, &junk, &junk).err().unwrap();
        assert!(
            e.contains("cannot read the certificate") && e.contains("missing.pem"),
            "{e}"
        );
        let e = ClusterTls::load(&junk, &junk, &junk).err().unwrap();
        assert!(e.contains("is not a PEM file"), "{e}");
    }
}
