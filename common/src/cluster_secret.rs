//! The cluster secret. Every gRPC call between shoal's processes (master → worker,
//! worker → master, master → master, api-server → master and worker) carries it, and
//! masters and workers refuse a call without it: a machine that can reach a worker's port
//! cannot make it run a command, nor feed a master false task events.
//!
//! It also says how nodes reach each other: over the network, or, between the nodes of
//! one `shoal standalone`, in process ([`crate::in_process`]).

use crate::cluster_tls::{CA_ENV, CERT_ENV, ClusterTls, KEY_ENV, host_of};
use crate::in_process::{InProcess, Served, Transport};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::service::{Interceptor, Routes};
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Status};

/// The metadata key the secret travels in.
pub const METADATA_KEY: &str = "x-shoal-cluster-secret";
/// The environment variable the CLI reads it from (`--cluster-secret`).
pub const ENV: &str = "SHOAL_CLUSTER_SECRET";
/// Shorter secrets are refused: they could be guessed.
pub const MIN_LEN: usize = 16;

/// How a cluster's nodes prove to each other that they belong: a shared secret, mutual
/// TLS ([`ClusterTls`]), both, or neither (a development cluster on loopback, or one
/// started with `--insecure`). Cloning is cheap.
#[derive(Clone, Default)]
pub struct ClusterSecret {
    secret: Option<Arc<AsciiMetadataValue>>,
    tls: Option<Arc<ClusterTls>>,
    /// The nodes served in this process (standalone's), called without the network.
    in_process: Option<InProcess>,
}

/// A channel whose calls carry the cluster secret.
pub type PeerChannel = InterceptedService<Transport, ClusterSecret>;

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = if self.secret.is_some() { "***" } else { "none" };
        write!(f, "secret {secret}, tls {}", self.tls.is_some())
    }
}

impl ClusterSecret {
    /// A secret as the operator gave it: at least [`MIN_LEN`] visible ASCII characters
    /// (it travels as gRPC metadata).
    pub fn new(secret: &str) -> Result<ClusterSecret, String> {
        if secret.len() < MIN_LEN || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "the cluster secret must be at least {MIN_LEN} visible ASCII characters \
                 (no spaces), e.g. the output of `openssl rand -hex 32`"
            ));
        }
        let value = AsciiMetadataValue::try_from(secret).map_err(|e| e.to_string())?;
        Ok(ClusterSecret {
            secret: Some(Arc::new(value)),
            ..ClusterSecret::default()
        })
    }

    /// A fresh random secret, for the processes of one `shoal standalone`.
    pub fn random() -> std::io::Result<ClusterSecret> {
        let hex = crate::access::random_hex(32)?;
        Ok(ClusterSecret::new(&hex).expect("64 hex digits are a valid secret"))
    }

    /// These credentials with mutual TLS too.
    pub fn with_tls(self, tls: ClusterTls) -> ClusterSecret {
        ClusterSecret {
            tls: Some(Arc::new(tls)),
            ..self
        }
    }

    /// These credentials for nodes that share this process: a node serving gRPC with them
    /// is called in process by the others ([`ClusterSecret::serve_in_process`]).
    pub fn in_process(self) -> ClusterSecret {
        ClusterSecret {
            in_process: Some(InProcess::default()),
            ..self
        }
    }

    /// Serves `routes` in process under the node's advertised `addr` while the guard
    /// lives (nothing when these credentials are not [`ClusterSecret::in_process`]).
    pub fn serve_in_process(&self, addr: &str, routes: Routes) -> Option<Served> {
        (self.in_process.as_ref()).map(|local| local.serve(addr, routes))
    }

    /// Whether calls between nodes are authenticated (by the secret, TLS or both).
    pub fn is_set(&self) -> bool {
        self.secret.is_some() || self.tls.is_some()
    }

    /// The channel to the node at `addr`, `net` (made from [`ClusterSecret::endpoint`])
    /// unless the node is served in this process, every call carrying the secret.
    pub fn channel(&self, addr: &str, net: Channel) -> PeerChannel {
        let transport = Transport::new(addr, self.in_process.clone(), net);
        InterceptedService::new(transport, self.clone())
    }

    /// The endpoint of the node at `addr` (`host:port`): `https` with the node's
    /// certificate under mutual TLS, `http` otherwise.
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, String> {
        let Some(tls) = &self.tls else {
            return Endpoint::from_shared(format!("http://{addr}")).map_err(|e| e.to_string());
        };
        Endpoint::from_shared(format!("https://{addr}"))
            .and_then(|e| e.tls_config(tls.client(host_of(addr))))
            .map_err(|e| e.to_string())
    }

    /// A gRPC server builder: it requires a client certificate of the cluster's CA under
    /// mutual TLS. The error (a certificate or key that does not load) names the problem.
    pub fn server(&self) -> Result<Server, String> {
        let builder = Server::builder();
        match &self.tls {
            None => Ok(builder),
            Some(tls) => builder.tls_config(tls.server()).map_err(|e| {
                format!(
                    "cannot use the TLS certificate and key ({CERT_ENV}, {KEY_ENV}, {CA_ENV}): {e}"
                )
            }),
        }
    }

    /// The check a server puts in front of its services.
    pub fn guard(&self) -> Guard {
        Guard(self.secret.clone())
    }
}

/// Client side: adds the secret to each call.
impl Interceptor for ClusterSecret {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(secret) = &self.secret {
            request
                .metadata_mut()
                .insert(METADATA_KEY, secret.as_ref().clone());
        }
        Ok(request)
    }
}

/// Server side: refuses a call that does not carry the secret (`UNAUTHENTICATED`).
#[derive(Clone)]
pub struct Guard(Option<Arc<AsciiMetadataValue>>);

impl Interceptor for Guard {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(want) = &self.0 else {
            return Ok(request);
        };
        match request.metadata().get(METADATA_KEY) {
            // Timing does not reveal how much of a guessed secret was right.
            Some(got) if got.as_bytes().ct_eq(want.as_bytes()).into() => Ok(request),
            Some(_) => Err(Status::unauthenticated(format!(
                "wrong cluster secret: every shoal node of a cluster needs the same {ENV}"
            ))),
            None => Err(Status::unauthenticated(format!(
                "no cluster secret: shoal's nodes call each other with {ENV}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(guard: &mut Guard, secret: Option<&str>) -> Result<(), Status> {
        let mut request = Request::new(());
        if let Some(s) = secret {
            request
                .metadata_mut()
                .insert(METADATA_KEY, s.parse().unwrap());
        }
        guard.call(request).map(drop)
    }

    #[test]
    fn a_guard_takes_only_its_secret() {
        let secret = ClusterSecret::new("0123456789abcdef-cluster").unwrap();
        let mut guard = secret.guard();
        assert!(call(&mut guard, Some("0123456789abcdef-cluster")).is_ok());
        let wrong = call(&mut guard, Some("0123456789abcdef-clustex")).unwrap_err();
        assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
        assert!(wrong.message().contains("wrong cluster secret"), "{wrong}");
        let prefix = call(&mut guard, Some("0123456789abcdef-cluste")).unwrap_err();
        assert!(
            prefix.message().contains("wrong cluster secret"),
            "{prefix}"
        );
        let none = call(&mut guard, None).unwrap_err();
        assert!(none.message().contains(ENV), "{none}");
        // What the client side adds is what the guard wants.
        let mut client = secret.clone();
        assert!(guard.call(client.call(Request::new(())).unwrap()).is_ok());
        // No secret configured: no check (loopback development, --insecure).
        assert!(call(&mut ClusterSecret::default().guard(), None).is_ok());
    }

    #[test]
    fn short_or_spaced_secrets_are_refused_and_random_ones_differ() {
        assert!(ClusterSecret::new("short").is_err());
        assert!(ClusterSecret::new("sixteen chars ok").is_err());
        let (a, b) = (
            ClusterSecret::random().unwrap(),
            ClusterSecret::random().unwrap(),
        );
        assert!(a.is_set());
        assert_ne!(a.secret.as_deref(), b.secret.as_deref());
        assert_eq!(
            format!("{a:?}"),
            "secret ***, tls false",
            "the value is not shown"
        );
    }
}
