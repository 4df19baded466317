//! A real single-member etcd (`etcd` on the PATH) per test.

use crate::{Host, Proc, free_port, wait_for};
use std::path::Path;
use std::time::Duration;

/// A real etcd on free loopback ports with its data under `dir/etcd`, serving; returns it
/// and its client URL.
pub fn start_etcd(dir: &Path) -> (Proc, String) {
    let client = free_port();
    let peer = std::iter::repeat_with(free_port)
        .find(|p| *p != client)
        .unwrap();
    start_etcd_on(dir, "etcd", client, peer)
}

/// A real etcd on the given loopback ports with its data under `dir/etcd`, once it serves;
/// starting it again with the same ports and dir is an etcd restart (members, leases and
/// keys kept). `name` names the log file (`dir/<name>.log`).
///
/// It returns only once its own log says it serves on `client`: a port taken meanwhile by
/// another process (another test's etcd) makes it exit, and the test would otherwise talk
/// to that other process.
pub fn start_etcd_on(dir: &Path, name: &str, client: u16, peer: u16) -> (Proc, String) {
    start_etcd_in(None, dir, name, client, peer)
}

/// The same on `host` (its address, in its network namespace) when given.
pub fn start_etcd_in(
    host: Option<&Host>,
    dir: &Path,
    name: &str,
    client: u16,
    peer: u16,
) -> (Proc, String) {
    let ip = host.map_or("127.0.0.1".to_string(), |h| h.ip.to_string());
    let url = format!("http://{ip}:{client}");
    let peer_url = format!("http://{ip}:{peer}");
    let data = dir.join("etcd");
    let cluster = format!("default={peer_url}");
    let mut args = host.map_or(vec![], |h| h.wrap("etcd"));
    let program = if host.is_some() { "ip" } else { "etcd" };
    args.extend([
        "--data-dir",
        data.to_str().unwrap(),
        "--listen-client-urls",
        &url,
        "--advertise-client-urls",
        &url,
        "--listen-peer-urls",
        &peer_url,
        "--initial-advertise-peer-urls",
        &peer_url,
        "--initial-cluster",
        &cluster,
    ]);
    let mut etcd = Proc::spawn(name, dir, program, &args, &[]);
    // etcd 3.4: "serving insecure client requests on <addr>"; 3.5: "serving client
    // traffic insecurely" with the address in a field of the same line.
    let addr = format!("{ip}:{client}");
    wait_for(
        &format!("{name} to serve on {addr}"),
        Duration::from_secs(60),
        || {
            let serving = etcd
                .log_text()
                .lines()
                .any(|l| l.contains("serving") && l.contains("insecure") && l.contains(&addr));
            assert!(serving || !etcd.exited(), "{name} exited before it served");
            serving.then_some(())
        },
    );
    (etcd, url)
}
