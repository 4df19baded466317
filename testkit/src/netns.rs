//! Separate network hosts on one machine: each host is a network namespace (`ip netns
//! add`) with a veth pair onto a bridge of the test's own in the root namespace, on a
//! private /24 (`10.213.<n>.0/24`, the bridge is `.1`, hosts `.2` and up). Links are cut
//! with iptables DROP rules inside a host's namespace (packets black-hole: connections stay
//! open, nothing passes), one way or both, and degraded with `tc netem`.
//!
//! Names start with `shnp<n>` (the bridge `shnp<n>`, namespaces `shnp<n>-<host>`); `<n>` is
//! claimed by creating the bridge, so tests in parallel processes never share one. The
//! bridge's alias records the owner's pid: a run removes what a crashed run left (its pid
//! gone), its processes killed, before it claims its own. Everything goes in Drop; rules
//! live in the namespaces and go with them.
//!
//! Needs root (CAP_NET_ADMIN) and a kernel with network namespaces: [`Net::new`] says
//! why not otherwise, and the test skips with that reason ([`Net::or_skip`]).

use crate::text;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const PREFIX: &str = "shnp";
/// Third octets tried for a test's /24.
const INDICES: std::ops::Range<u8> = 1..250;

/// One host: a network namespace with one address on the test's bridge.
#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    pub ns: String,
    pub ip: Ipv4Addr,
}

impl Host {
    /// `ip netns exec <ns> <program>`: the program and arguments that run `program` on
    /// this host (`ip` execs it, so the pid is the program's).
    pub fn wrap<'a>(&'a self, program: &'a str) -> Vec<&'a str> {
        vec!["netns", "exec", &self.ns, program]
    }
}

/// Which packets of a link a cut drops, seen from the host the rule is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// What the host sends to the peer.
    Out,
    /// What the peer sends to the host.
    In,
    Both,
}

/// The other end of a link: an address, and the TCP port of a server there (None: every
/// packet to and from the address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub ip: Ipv4Addr,
    pub port: Option<u16>,
}

impl Peer {
    pub fn host(h: &Host) -> Peer {
        Peer {
            ip: h.ip,
            port: None,
        }
    }
}

/// A cut in force: the namespace it is in and its iptables rule (after `-A`/`-D`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    ns: String,
    spec: Vec<String>,
}

/// One test's network: its bridge, its hosts and the cuts in force.
pub struct Net {
    bridge: String,
    octet: u8,
    hosts: Mutex<Vec<Host>>,
    rules: Mutex<Vec<Rule>>,
    /// Names every host resolves ([`Net::set_name`]).
    names: Mutex<Vec<(String, Ipv4Addr)>>,
}

impl Net {
    /// A bridge and a /24 of the test's own, once what crashed runs left is removed; Err
    /// with the reason when this machine cannot make namespaces (not root, no kernel
    /// support, no `ip`).
    pub fn new(test: &str) -> Result<Net, String> {
        probe()?;
        remove_stale();
        for octet in INDICES {
            let bridge = format!("{PREFIX}{octet}");
            let out = ip(&["link", "add", &bridge, "type", "bridge"]);
            match out {
                Ok(()) => {}
                Err(e) if e.contains("exists") => continue,
                Err(e) => return Err(format!("cannot create a bridge: {e}")),
            }
            let net = Net {
                bridge: bridge.clone(),
                octet,
                hosts: Mutex::new(vec![]),
                rules: Mutex::new(vec![]),
                names: Mutex::new(vec![]),
            };
            let alias = format!("pid={} test={test}", std::process::id());
            let gw = format!("{}/24", net.gateway());
            for args in [
                &["link", "set", &bridge, "alias", &alias][..],
                &["addr", "add", &gw, "dev", &bridge],
                &["link", "set", &bridge, "up"],
            ] {
                ip(args).map_err(|e| format!("cannot set the bridge up: {e}"))?;
            }
            return Ok(net);
        }
        Err(format!("every bridge {PREFIX}1..{PREFIX}249 is taken"))
    }

    /// [`Net::new`], or None after printing why the test skips. Where the environment
    /// sets `SHOAL_REQUIRE_NETNS` (CI, as root) it panics instead: a skip there would hide
    /// that the tests did not run.
    pub fn or_skip(test: &str) -> Option<Net> {
        match Net::new(test) {
            Ok(net) => Some(net),
            Err(why) if std::env::var_os("SHOAL_REQUIRE_NETNS").is_some() => {
                panic!("[{test}] SHOAL_REQUIRE_NETNS is set but: {why}")
            }
            Err(why) => {
                eprintln!("SKIP: [{test}] needs network namespaces: {why}");
                None
            }
        }
    }

    /// The bridge's address in the root namespace: where the test itself and what it
    /// runs there (a proxy to Postgres) are reached from the hosts.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.octet, 1)
    }

    /// A new host named `name` (unique in this net): its namespace, loopback up, a veth
    /// pair on the bridge with the next address.
    pub fn host(&self, name: &str) -> Host {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = hosts.iter().find(|h| h.name == name) {
            return h.clone();
        }
        let n = hosts.len() as u8 + 2;
        let ns = format!("{}-{name}", self.bridge);
        let (outer, inner) = (
            format!("{}h{n}", self.bridge),
            format!("{}p{n}", self.bridge),
        );
        let ip_addr = Ipv4Addr::new(10, 213, self.octet, n);
        let addr = format!("{ip_addr}/24");
        // A link of a crashed run's host may outlive its namespace for a moment.
        let _ = ip(&["link", "del", &outer]);
        for args in [
            &["netns", "add", &ns][..],
            &["-n", &ns, "link", "set", "lo", "up"],
            &[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", &ns,
            ],
            &["link", "set", &outer, "master", &self.bridge],
            &["link", "set", &outer, "up"],
            &["-n", &ns, "link", "set", &inner, "name", "eth0"],
            &["-n", &ns, "addr", "add", &addr, "dev", "eth0"],
            &["-n", &ns, "link", "set", "eth0", "up"],
        ] {
            ip(args).unwrap_or_else(|e| panic!("host {name}: ip {}: {e}", args.join(" ")));
        }
        let h = Host {
            name: name.to_string(),
            ns,
            ip: ip_addr,
        };
        write_hosts_file(&h.ns, &self.names.lock().unwrap_or_else(|e| e.into_inner()));
        hosts.push(h.clone());
        h
    }

    /// Every host, those made from now on too, resolves `name` to `ip`: the
    /// `/etc/netns/<ns>/hosts` that `ip netns exec` mounts on `/etc/hosts`, rewritten in
    /// place, so that running processes see the change on their next lookup.
    pub fn set_name(&self, name: &str, ip: Ipv4Addr) {
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.retain(|(n, _)| n != name);
        names.push((name.to_string(), ip));
        for h in hosts.iter() {
            write_hosts_file(&h.ns, &names);
        }
    }

    /// Drops the packets of `way` between `host` and `peer` (in `host`'s namespace), until
    /// [`Net::heal`].
    pub fn cut(&self, host: &Host, peer: Peer, way: Way) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for rule in rules_of(host, peer, way) {
            if rules.contains(&rule) {
                continue;
            }
            iptables(&rule, "-A").unwrap_or_else(|e| panic!("cut {host:?} {peer:?}: {e}"));
            rules.push(rule);
        }
    }

    /// Lets `way` of the link between `host` and `peer` pass again.
    pub fn heal(&self, host: &Host, peer: Peer, way: Way) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for rule in rules_of(host, peer, way) {
            if let Some(i) = rules.iter().position(|r| *r == rule) {
                iptables(&rule, "-D").unwrap_or_else(|e| panic!("heal {host:?} {peer:?}: {e}"));
                rules.remove(i);
            }
        }
    }

    /// Every cut healed.
    pub fn heal_all(&self) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for rule in rules.drain(..) {
            let _ = iptables(&rule, "-D");
        }
    }

    /// Delays what `host` sends by `delay` ± `jitter` and loses `loss_pct` % of it (`tc
    /// qdisc replace ... netem`); Err with tc's reason where the kernel has no netem.
    pub fn degrade(
        &self,
        host: &Host,
        delay: Duration,
        jitter: Duration,
        loss_pct: f64,
    ) -> Result<(), String> {
        let (d, j) = (
            format!("{}ms", delay.as_millis()),
            format!("{}ms", jitter.as_millis()),
        );
        let loss = format!("{loss_pct}%");
        ip_tc(
            &host.ns,
            &[
                "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", &d, &j, "loss", &loss,
            ],
        )
    }

    /// `host`'s link back to normal speed.
    pub fn restore(&self, host: &Host) {
        let _ = ip_tc(&host.ns, &["qdisc", "del", "dev", "eth0", "root"]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // The veth first: a deleted namespace's links go only later, asynchronously, and
        // the next test to claim this bridge's number would meet them.
        for (i, h) in self
            .hosts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
        {
            let _ = ip(&["link", "del", &format!("{}h{}", self.bridge, i + 2)]);
            let _ = ip(&["netns", "del", &h.ns]);
            let _ = std::fs::remove_dir_all(etc_dir(&h.ns));
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// The directory of a namespace's own files under /etc (`ip netns exec` mounts them).
fn etc_dir(ns: &str) -> std::path::PathBuf {
    std::path::Path::new("/etc/netns").join(ns)
}

/// `ns`'s /etc/hosts: localhost and `names`; nothing where no name was set.
fn write_hosts_file(ns: &str, names: &[(String, Ipv4Addr)]) {
    if names.is_empty() {
        return;
    }
    let mut text = String::from("127.0.0.1 localhost\n");
    for (name, ip) in names {
        text.push_str(&format!("{ip} {name}\n"));
    }
    let dir = etc_dir(ns);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    // Truncated and written in place: the file mounted on a running process's /etc/hosts
    // is this inode.
    std::fs::write(dir.join("hosts"), text).unwrap_or_else(|e| panic!("{ns} hosts: {e}"));
}

fn rules_of(host: &Host, peer: Peer, way: Way) -> Vec<Rule> {
    let mut out = vec![];
    let ip = peer.ip.to_string();
    let rule = |chain: &str, addr_flag: &str, port_flag: &str| {
        let mut spec: Vec<String> = [chain, addr_flag, &ip]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(port) = peer.port {
            spec.extend(["-p", "tcp", port_flag, &port.to_string()].map(String::from));
        }
        spec.extend(["-j", "DROP"].map(String::from));
        Rule {
            ns: host.ns.clone(),
            spec,
        }
    };
    if way != Way::In {
        out.push(rule("OUTPUT", "-d", "--dport"));
    }
    if way != Way::Out {
        out.push(rule("INPUT", "-s", "--sport"));
    }
    out
}

fn iptables(rule: &Rule, op: &str) -> Result<(), String> {
    let mut args = vec!["netns", "exec", &rule.ns, "iptables", "-w", op];
    args.extend(rule.spec.iter().map(String::as_str));
    ip(&args)
}

fn ip_tc(ns: &str, args: &[&str]) -> Result<(), String> {
    let mut all = vec!["netns", "exec", ns, "tc"];
    all.extend(args);
    ip(&all)
}

/// Runs `ip args`; Err with its stderr.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            text(&out.stderr).trim()
        ))
    }
}

fn ip_out(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default()
}

/// Whether this machine lets us make a namespace and a rule in it.
fn probe() -> Result<(), String> {
    let ns = format!("{PREFIX}probe{}", std::process::id());
    ip(&["netns", "add", &ns])?;
    let rule = ip(&["netns", "exec", &ns, "iptables", "-w", "-L", "INPUT", "-n"]);
    let _ = ip(&["netns", "del", &ns]);
    rule.map_err(|e| format!("iptables does not work in a namespace: {e}"))
}

/// Removes the bridges and namespaces of runs whose process is gone.
fn remove_stale() {
    let alive = |pid: &str| std::path::Path::new(&format!("/proc/{pid}")).exists();
    let namespaces: Vec<String> = ip_out(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect();
    let links: Vec<String> = ip_out(&["-o", "link", "show"])
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    let mut removed = vec![];
    for line in ip_out(&["-o", "link", "show", "type", "bridge"]).lines() {
        // "7: shnp3: <...> ... alias pid=123 test=x"
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        if !name.starts_with(PREFIX) {
            continue;
        }
        let Some(pid) = line
            .split("alias pid=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        else {
            continue; // being set up by a live run
        };
        if alive(pid) {
            continue;
        }
        for ns in namespaces
            .iter()
            .filter(|n| n.starts_with(&format!("{name}-")))
        {
            // The crashed run's nodes outlived it (nothing killed them).
            for pid in ip_out(&["netns", "pids", ns]).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).output();
            }
            let _ = ip(&["netns", "del", ns]);
            let _ = std::fs::remove_dir_all(etc_dir(ns));
        }
        let _ = ip(&["link", "del", name]);
        removed.push(name.to_string());
    }
    // Host links (`shnp<n>h<m>`) of a bridge that is gone: a deleted namespace's links
    // outlive it for a while.
    for link in &links {
        let bridge = link[PREFIX.len()..]
            .split_once('h')
            .map(|(n, _)| format!("{PREFIX}{n}"));
        if let Some(bridge) = bridge
            && (removed.contains(&bridge) || !links.contains(&bridge))
        {
            let _ = ip(&["link", "del", link]);
        }
    }
    // Probes of runs that died while probing.
    for ns in &namespaces {
        if let Some(pid) = ns.strip_prefix(&format!("{PREFIX}probe"))
            && !alive(pid)
        {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
