//! TLS to brokers: the broker's certificate is checked against the system's trust store,
//! as for every other outbound TLS connection (`SSL_CERT_FILE` or `SSL_CERT_DIR` name
//! another, e.g. a private CA's bundle).

use rustls::ClientConfig;
use rustls::crypto::ring;
use rustls_platform_verifier::BuilderVerifierExt;
use std::sync::{Arc, OnceLock};

/// A client configuration that trusts what the system trusts; made once per process,
/// since the trust store is read when it is made.
pub(super) fn client_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .and_then(|b| b.with_platform_verifier())
                .map_err(|e| format!("cannot set up TLS to brokers: {e}"))?
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}
