//! A TLS front for a server that speaks plain TCP, as a broker's TLS listener is: clients
//! connect with TLS (a certificate of [`crate::support::make_certs`]) and what they send goes on to
//! the server in the clear.

use crate::support::Certs;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

pub struct TlsProxy {
    pub port: u16,
    _runtime: tokio::runtime::Runtime,
}

impl TlsProxy {
    /// Listens on a free local port with `certs` and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str, certs: &Certs) -> TlsProxy {
        let chain: Vec<CertificateDer> = CertificateDer::pem_file_iter(&certs.cert)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&certs.key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = upstream.to_string();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends its handshake here.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                });
            }
        });
        TlsProxy {
            port,
            _runtime: runtime,
        }
    }
}
