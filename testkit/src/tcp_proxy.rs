//! A TCP proxy in front of any server that can swallow what clients send: their
//! connections stay open and the server's messages reach them, but nothing they send
//! reaches the server (an acknowledgement a client sends is lost, as if the client had
//! died just before sending it).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct TcpProxy {
    pub port: u16,
    swallow: Arc<AtomicBool>,
}

impl TcpProxy {
    /// Listens on a free local port and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> TcpProxy {
        TcpProxy::start_on("127.0.0.1", upstream)
    }

    /// The same on a free port of the local address `bind` (e.g. a test bridge's, for
    /// hosts in network namespaces).
    pub fn start_on(bind: &str, upstream: &str) -> TcpProxy {
        let listener = TcpListener::bind((bind, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let swallow = Arc::new(AtomicBool::new(false));
        let (upstream, accepting) = (upstream.to_string(), swallow.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let swallow = accepting.clone();
                let (c, s) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(s, c, None));
                std::thread::spawn(move || pipe(client, server, Some(swallow)));
            }
        });
        TcpProxy { port, swallow }
    }

    /// From now on (`true`) or no longer, what clients send is dropped.
    pub fn swallow_requests(&self, on: bool) {
        self.swallow.store(on, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either ends, dropping what `swallow` says; then closes both.
fn pipe(mut from: TcpStream, mut to: TcpStream, swallow: Option<Arc<AtomicBool>>) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        let dropped = swallow.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
        if n == 0 || (!dropped && to.write_all(&buf[..n]).is_err()) {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
