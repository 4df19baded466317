//! A TCP proxy in front of Postgres that can cut a connection right after a COMMIT reached
//! the server and before its answer reaches the client: the transaction is committed, and
//! the client cannot know it (a commit of unknown outcome).
//!
//! It reads the client's side of the protocol: the untyped start-up messages (an SSL
//! request, answered by the server, then the start-up message), then typed messages (a
//! type byte and a length). A simple-protocol query (`Q`) whose text starts with COMMIT is
//! what it cuts after, once armed ([`PgProxy::cut_commits`]). It can also hold every
//! message in either direction for a while ([`PgProxy::delay`]): a slow network.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long the server is given to apply a COMMIT before the connection is cut.
const SETTLE: Duration = Duration::from_millis(150);

pub struct PgProxy {
    pub port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// COMMITs still to cut.
    armed: AtomicUsize,
    /// COMMITs cut so far.
    cut: AtomicUsize,
    /// How long each message waits before it is passed on, in milliseconds.
    delay_ms: AtomicU64,
}

impl Shared {
    fn wait(&self) {
        let ms = self.delay_ms.load(Ordering::Relaxed);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }
}

impl PgProxy {
    /// Listens on a free local port and forwards to the server of the Postgres URL `url`.
    pub fn start(url: &str) -> PgProxy {
        let (_, rest) = url.split_once("://").expect("a URL");
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let upstream = rest.split('/').next().unwrap_or(rest);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let (upstream, accepting) = (upstream.to_string(), shared.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let shared = accepting.clone();
                std::thread::spawn(move || relay(client, server, shared));
            }
        });
        PgProxy { port, shared }
    }

    /// `url` (a Postgres URL) pointed at the proxy instead of its own host and port, and
    /// without TLS (the proxy reads the protocol in the clear).
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let (auth, rest) = rest.rsplit_once('@').map_or(("", rest), |(a, r)| (a, r));
        let path = rest.find('/').map_or("", |i| &rest[i..]);
        let at = if auth.is_empty() { "" } else { "@" };
        let join = if path.contains('?') { '&' } else { '?' };
        format!(
            "{scheme}://{auth}{at}127.0.0.1:{}{path}{join}sslmode=disable",
            self.port
        )
    }

    /// Cuts the connections of the next `n` COMMITs, each once the server had it.
    pub fn cut_commits(&self, n: usize) {
        self.shared.armed.fetch_add(n, Ordering::SeqCst);
    }

    /// Holds each message, both ways, for `delay` before passing it on (zero: no delay).
    pub fn delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    /// How many COMMITs were cut so far.
    pub fn cut(&self) -> usize {
        self.shared.cut.load(Ordering::SeqCst)
    }
}

fn relay(mut client: TcpStream, mut server: TcpStream, shared: Arc<Shared>) {
    let mute = Arc::new(AtomicBool::new(false));
    let (mut from_server, mut to_client) =
        (server.try_clone().unwrap(), client.try_clone().unwrap());
    let (muted, answers) = (mute.clone(), shared.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from_server.read(&mut buf) {
            answers.wait();
            // Muted: the answer to the cut COMMIT never reaches the client.
            if n == 0 || muted.load(Ordering::SeqCst) || to_client.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Both);
    });
    let mut started = false;
    while let Some(message) = next_message(&mut client, started) {
        if !started {
            // The start-up message (protocol 3.0) ends the untyped ones.
            started = message.get(4..8) == Some(&196_608u32.to_be_bytes()[..]);
        }
        let commit = started
            && message.first() == Some(&b'Q')
            && message
                .get(5..11)
                .is_some_and(|q| q.eq_ignore_ascii_case(b"COMMIT"));
        let cut = commit
            && shared
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if cut {
            mute.store(true, Ordering::SeqCst);
        }
        shared.wait();
        if server.write_all(&message).is_err() {
            break;
        }
        if cut {
            std::thread::sleep(SETTLE);
            shared.cut.fetch_add(1, Ordering::SeqCst);
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// The client's next message, whole: typed once `started`, untyped (length first) before.
fn next_message(client: &mut TcpStream, started: bool) -> Option<Vec<u8>> {
    let head = if started { 5 } else { 4 };
    let mut message = vec![0u8; head];
    client.read_exact(&mut message).ok()?;
    let len = u32::from_be_bytes(message[head - 4..head].try_into().ok()?) as usize;
    let rest = len.checked_sub(4)?;
    message.resize(head + rest, 0);
    client.read_exact(&mut message[head..]).ok()?;
    Some(message)
}
