//! A TCP proxy that can black-hole a link: while cut, nothing passes either way, yet every
//! connection stays open and new ones are accepted (packets dropped by a partition, not a
//! refused connection). Bytes sent meanwhile wait and pass once the link heals, as TCP's
//! retransmissions would deliver them.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct TcpHole {
    pub port: u16,
    cut: Arc<AtomicBool>,
}

impl TcpHole {
    /// Listens on a free local port and forwards to `upstream` (host:port).
    pub fn start(upstream: &str) -> TcpHole {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let (upstream, accepting) = (upstream.to_string(), cut.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, cut) = (upstream.clone(), accepting.clone());
                std::thread::spawn(move || {
                    hold(&cut);
                    let Ok(server) = TcpStream::connect(&upstream) else {
                        return;
                    };
                    let (c, s) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                    let back = cut.clone();
                    std::thread::spawn(move || pipe(s, c, &back));
                    pipe(client, server, &cut);
                });
            }
        });
        TcpHole { port, cut }
    }

    /// Stops every byte, both ways, until [`TcpHole::heal`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn hold(cut: &AtomicBool) {
    while cut.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Copies `from` to `to`, holding what it read while the link is cut.
fn pipe(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        hold(cut);
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}
