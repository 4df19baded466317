//! HTTPS for the REST API and the web UI (`--https-cert`, `--https-key`): tokens travel in
//! every request, so an API reached over a network needs it (or a TLS proxy in front).
//!
//! axum serves any [`Listener`]; this one hands it connections whose TLS handshake is done.
//! Handshakes run in tasks of their own, each bounded by [`HANDSHAKE_TIMEOUT`] and at most
//! [`HANDSHAKES_AT_ONCE`] of them, so a client that connects and never finishes its
//! handshake holds up no other, and many such clients cannot take every file descriptor.

use axum::serve::Listener;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once; beyond that, connections wait in the kernel's backlog.
const HANDSHAKES_AT_ONCE: usize = 512;

/// Handshaken connections waiting for axum to take them.
const READY_BACKLOG: usize = 64;

/// The server's certificate chain and key, ready to serve HTTPS.
#[derive(Clone)]
pub struct Https {
    config: Arc<ServerConfig>,
}

impl Https {
    /// Reads the certificate chain (PEM, the server's certificate first) and its private
    /// key (PEM: PKCS#8, PKCS#1 or SEC1); errors name the file and what is wrong with it.
    pub fn load(cert: &Path, key: &Path) -> Result<Https, String> {
        let shown = |path: &Path| path.display().to_string();
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read the certificate {}: {e}", shown(cert)))?;
        if chain.is_empty() {
            return Err(format!(
                "the certificate file {} holds no PEM certificate",
                shown(cert)
            ));
        }
        let key_der = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("cannot read the private key {}: {e}", shown(key)))?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| {
                format!(
                    "the certificate {} and the key {} do not make a server identity: {e}",
                    shown(cert),
                    shown(key)
                )
            })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Https {
            config: Arc::new(config),
        })
    }

    /// Accepts on `listener` and handshakes each connection in a task of its own.
    pub(crate) fn listen(&self, listener: TcpListener) -> io::Result<HttpsListener> {
        let local = listener.local_addr()?;
        let (ready, rx) = mpsc::channel(READY_BACKLOG);
        let acceptor = TlsAcceptor::from(self.config.clone());
        let accepting = tokio::spawn(accept_loop(listener, acceptor, ready)).abort_handle();
        Ok(HttpsListener {
            ready: rx,
            local,
            accepting,
        })
    }
}

/// Connections whose handshake is done; stops accepting when dropped.
pub(crate) struct HttpsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: AbortHandle,
}

impl Drop for HttpsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl Listener for HttpsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends when it is aborted, which is when this is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(HANDSHAKES_AT_ONCE));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return; // never closed
        };
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            // A client that went away before it was accepted: take the next one.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors, mostly: wait for some to be closed, as axum does.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await;
            drop(slot);
            match handshake {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}
