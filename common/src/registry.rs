//! Cluster membership: who is alive, where it listens and how loaded it is.
//!
//! A cluster keeps members in etcd (a lease per node, kept alive while the node runs);
//! `shoal standalone` keeps them in memory. Both look the same to masters and workers.
//! The registry also elects leaders (the master that fires cron schedules).

use crate::error::{Error, Result};
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp, WatchOptions,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

mod lease_clock;
use lease_clock::LeaseClock;

const PREFIX: &str = "/shoal/nodes/";
const LEADER_PREFIX: &str = "/shoal/leader/";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Master,
    Worker,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }
}

/// What a node publishes about itself; the payload of its registry entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub role: Role,
    /// host:port of the node's gRPC server; unique per node.
    pub addr: String,
    pub groups: Vec<String>,
    pub slots: u32,
    pub running: u32,
    pub weight: u32,
    pub started_at: i64,
    /// Leases this node lost (and registered again after). A worker drops what it ran
    /// under a lost lease; when etcd kept its entry meanwhile (etcd itself restarted),
    /// this count is how masters learn of it.
    #[serde(default)]
    pub lapses: u64,
    /// Why a master claims no new commands now (`--max-cpu-load`, `--min-free-memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<String>,
}

impl NodeInfo {
    fn key(&self) -> String {
        format!("{PREFIX}{}/{}", self.role.as_str(), self.addr)
    }
}

type Members = BTreeMap<String, NodeInfo>;

#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

// One per process: the size of the etcd variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Local(watch::Sender<Members>),
    Etcd { client: Client, ttl_secs: i64 },
}

/// A registered node's handle to publish a new heartbeat payload.
#[derive(Clone)]
pub struct Membership {
    payload: watch::Sender<NodeInfo>,
    lost: watch::Receiver<u64>,
    gate: LeaseGate,
}

/// Whether the node's lease is fresh: renewed recently enough that nobody can have taken
/// its work over yet. A node that was frozen (SIGSTOP, VM pause) sees a stale lease the
/// moment it runs again, before any timer of its own fires.
#[derive(Clone)]
pub struct LeaseGate {
    /// None: an in-process registry, always fresh.
    renewed: Option<watch::Receiver<tokio::time::Instant>>,
    ttl: Duration,
}

impl LeaseGate {
    /// A lease of `ttl` whose renewals are sent at the instants `renewed` holds.
    pub fn new(renewed: watch::Receiver<tokio::time::Instant>, ttl: Duration) -> LeaseGate {
        LeaseGate {
            renewed: Some(renewed),
            ttl,
        }
    }

    pub fn fresh(&self) -> bool {
        self.renewed
            .as_ref()
            .is_none_or(|r| r.borrow().elapsed() < self.ttl * 2 / 3)
    }
}

impl Membership {
    pub fn update(&self, f: impl FnOnce(&mut NodeInfo)) {
        self.payload.send_modify(f);
    }

    /// Counts the times the node's lease went unrenewed long enough that it may expire
    /// (others may then act for it: take over its instances, re-run its tasks). The count
    /// moves on the node's own clock, before etcd can expire the lease, even while etcd
    /// does not answer; a node renews or registers again after it.
    pub fn lost(&self) -> watch::Receiver<u64> {
        self.lost.clone()
    }

    pub fn gate(&self) -> LeaseGate {
        self.gate.clone()
    }
}

/// The live nodes of one role, kept current in the background.
#[derive(Clone)]
pub struct NodeWatch {
    role: Role,
    members: watch::Receiver<Members>,
}

impl NodeWatch {
    pub fn current(&self) -> Vec<NodeInfo> {
        self.members
            .borrow()
            .values()
            .filter(|n| n.role == self.role)
            .cloned()
            .collect()
    }

    /// Waits until the membership changes. Cancellation-safe.
    pub async fn changed(&mut self) -> Result<()> {
        self.members
            .changed()
            .await
            .map_err(|_| Error::Registry("membership watch ended".into()))
    }
}

impl Registry {
    /// The in-process registry of `shoal standalone`.
    pub fn local() -> Registry {
        Registry {
            inner: Arc::new(Inner::Local(watch::Sender::new(Members::new()))),
        }
    }

    /// An etcd-backed registry; a node's entry disappears `ttl_secs` after it stops
    /// renewing its lease.
    pub async fn etcd(endpoints: &[String], ttl_secs: i64) -> Result<Registry> {
        let client = Client::connect(endpoints, None).await.map_err(|e| {
            Error::Registry(format!(
                "cannot connect to etcd at {}: {e}",
                endpoints.join(",")
            ))
        })?;
        Ok(Registry {
            inner: Arc::new(Inner::Etcd {
                client,
                ttl_secs: ttl_secs.max(2),
            }),
        })
    }

    /// Registers the node and keeps its entry alive until `shutdown` is cancelled, when
    /// the entry is removed.
    pub async fn register(
        &self,
        node: NodeInfo,
        shutdown: CancellationToken,
    ) -> Result<Membership> {
        let (payload, rx) = watch::channel(node);
        let (lost_tx, lost) = watch::channel(0);
        let gate = match &*self.inner {
            Inner::Local(members) => {
                let members = members.clone();
                tokio::spawn(keep_local(members, rx, shutdown));
                LeaseGate {
                    renewed: None,
                    ttl: Duration::MAX,
                }
            }
            Inner::Etcd { client, ttl_secs } => {
                let node = rx.borrow().clone();
                let lease = put_with_lease(&mut client.clone(), &node, *ttl_secs).await?;
                let ttl = Duration::from_secs(*ttl_secs as u64);
                let clock = LeaseClock::new(ttl, lost_tx);
                let renewed = clock.renewed();
                tokio::spawn(clock.clone().fence(shutdown.clone()));
                let keep = KeepEtcd {
                    client: client.clone(),
                    ttl: *ttl_secs,
                    lease,
                    clock,
                };
                tokio::spawn(keep.run(rx, lost.clone(), shutdown));
                LeaseGate::new(renewed, ttl)
            }
        };
        Ok(Membership {
            payload,
            lost,
            gate,
        })
    }

    /// Every live node, read once (for listings; schedulers keep a [`NodeWatch`]).
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>> {
        match &*self.inner {
            Inner::Local(members) => Ok(members.borrow().values().cloned().collect()),
            Inner::Etcd { client, .. } => {
                let (tx, _rx) = watch::channel(Members::new());
                load_members(&mut client.clone(), &tx).await?;
                Ok(tx.borrow().values().cloned().collect())
            }
        }
    }

    /// Live nodes of `role`.
    pub async fn watch(&self, role: Role, shutdown: CancellationToken) -> Result<NodeWatch> {
        let members = match &*self.inner {
            Inner::Local(members) => members.subscribe(),
            Inner::Etcd { client, .. } => {
                let (tx, rx) = watch::channel(Members::new());
                let rev = load_members(&mut client.clone(), &tx).await?;
                tokio::spawn(follow_etcd(client.clone(), tx, rev, shutdown));
                rx
            }
        };
        Ok(NodeWatch { role, members })
    }
}

/// Whether this node leads (see [`Registry::lead`]).
#[derive(Clone)]
pub struct Leadership {
    /// None: an in-process registry, which always leads. Otherwise the time the lead was
    /// last renewed, None while another node leads.
    term: Option<watch::Receiver<Option<tokio::time::Instant>>>,
    ttl: Duration,
}

impl Leadership {
    /// True while this node holds the lead and renewed it within 2/3 of the TTL: a node
    /// that was frozen stops acting as leader before another can have taken over.
    pub fn is_leader(&self) -> bool {
        match &self.term {
            None => true,
            Some(term) => term
                .borrow()
                .is_some_and(|renewed| renewed.elapsed() < self.ttl * 2 / 3),
        }
    }
}

impl Registry {
    /// Campaigns for the lead of `name` as `me` until `shutdown`. On etcd the leader holds
    /// `/shoal/leader/<name>` under a lease of the registry's TTL, renewed every third of
    /// it; others try to take the key as often. A dead leader's key goes with its lease
    /// (after at most a TTL), a stopping leader revokes its lease so that another takes
    /// over at once. The in-process registry has one node, which always leads.
    pub fn lead(&self, name: &str, me: &str, shutdown: CancellationToken) -> Leadership {
        match &*self.inner {
            Inner::Local(_) => Leadership {
                term: None,
                ttl: Duration::MAX,
            },
            Inner::Etcd { client, ttl_secs } => {
                let (tx, rx) = watch::channel(None);
                let campaign = Campaign {
                    client: client.clone(),
                    key: format!("{LEADER_PREFIX}{name}"),
                    me: me.to_string(),
                    ttl: *ttl_secs,
                    term: tx,
                };
                tokio::spawn(campaign.run(shutdown));
                Leadership {
                    term: Some(rx),
                    ttl: Duration::from_secs(*ttl_secs as u64),
                }
            }
        }
    }
}

struct Campaign {
    client: Client,
    key: String,
    me: String,
    ttl: i64,
    term: watch::Sender<Option<tokio::time::Instant>>,
}

impl Campaign {
    async fn run(mut self, shutdown: CancellationToken) {
        let period = Duration::from_secs(self.ttl as u64) / 3;
        let mut lease: Option<i64> = None;
        loop {
            match lease {
                None => match self.try_acquire().await {
                    Ok(Some(l)) => {
                        info!(key = %self.key, me = %self.me, "became leader");
                        lease = Some(l);
                        self.term.send_replace(Some(tokio::time::Instant::now()));
                    }
                    Ok(None) => {}
                    Err(e) => warn!(key = %self.key, error = %e, "leader campaign failed"),
                },
                Some(l) => match renew_once(&mut self.client, l, period).await {
                    Ok(()) => {
                        self.term.send_replace(Some(tokio::time::Instant::now()));
                    }
                    Err(e) => {
                        warn!(key = %self.key, error = %e, "leadership lost");
                        self.term.send_replace(None);
                        lease = None;
                        continue;
                    }
                },
            }
            // Both arms are cancellation-safe: a sleep and a token.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(period) => {}
            }
        }
        self.term.send_replace(None);
        if let Some(l) = lease
            && let Err(e) = self.client.lease_revoke(l).await
        {
            warn!(error = %e, "leader lease revoke failed on shutdown");
        }
    }

    /// Takes the key if nobody holds it; returns the lease it is held under.
    async fn try_acquire(&mut self) -> Result<Option<i64>> {
        let lease = self.client.lease_grant(self.ttl, None).await?.id();
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(
                self.key.clone(),
                self.me.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        if self.client.txn(txn).await?.succeeded() {
            return Ok(Some(lease));
        }
        self.client.lease_revoke(lease).await?;
        Ok(None)
    }
}

async fn keep_local(
    members: watch::Sender<Members>,
    mut payload: watch::Receiver<NodeInfo>,
    shutdown: CancellationToken,
) {
    let key = payload.borrow().key();
    loop {
        let node = payload.borrow_and_update().clone();
        members.send_modify(|m| {
            m.insert(key.clone(), node);
        });
        tokio::select! {
            _ = shutdown.cancelled() => break,
            r = payload.changed() => if r.is_err() {
                // The Membership handle was dropped: the payload is final, but the node
                // stays registered until it shuts down.
                shutdown.cancelled().await;
                break;
            },
        }
    }
    members.send_modify(|m| {
        m.remove(&key);
    });
}

async fn put_with_lease(client: &mut Client, node: &NodeInfo, ttl: i64) -> Result<i64> {
    let lease = client.lease_grant(ttl, None).await?.id();
    let value = serde_json::to_vec(node).map_err(|e| Error::Registry(e.to_string()))?;
    client
        .put(node.key(), value, Some(PutOptions::new().with_lease(lease)))
        .await?;
    Ok(lease)
}

struct KeepEtcd {
    client: Client,
    ttl: i64,
    lease: i64,
    clock: Arc<LeaseClock>,
}

impl KeepEtcd {
    /// Renews the lease every quarter of its TTL and republishes the payload when it changes
    /// or a lapse was counted (at most once a second). A lost lease is re-granted: the node
    /// registers again. Lapses are counted by the [`LeaseClock`]'s fence beside this loop.
    async fn run(
        mut self,
        mut payload: watch::Receiver<NodeInfo>,
        mut lost: watch::Receiver<u64>,
        shutdown: CancellationToken,
    ) {
        let ttl = Duration::from_secs(self.ttl as u64);
        // A call to etcd that takes longer has failed: a black-holed link never answers.
        // Three renewals in a row must fail before the fence (9/10 of the TTL) counts a lapse.
        let within = ttl / 4;
        let mut tick = tokio::time::interval(ttl / 4);
        let mut publish = tokio::time::interval(Duration::from_secs(1));
        let mut dirty = false;
        let mut payload_final = false;
        loop {
            // All arms are cancellation-safe: ticks and watch changes lose nothing when dropped.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    let sent = tokio::time::Instant::now();
                    match renew_once(&mut self.client, self.lease, within).await {
                        Ok(()) => self.clock.renewed_at(sent),
                        Err(e) => {
                            warn!(error = %e, "registry lease not renewed, registering again");
                            let mut node = payload.borrow().clone();
                            node.lapses = self.clock.lapses();
                            let sent = tokio::time::Instant::now();
                            let put = put_with_lease(&mut self.client, &node, self.ttl);
                            match tokio::time::timeout(within, put).await {
                                Ok(Ok(l)) => {
                                    self.lease = l;
                                    self.clock.renewed_at(sent);
                                }
                                Ok(Err(e)) => warn!(error = %e, "registry re-registration failed"),
                                Err(_) => warn!("registry re-registration timed out"),
                            }
                        }
                    }
                }
                // Masters learn of a lapse from the payload when the lease itself survived.
                r = lost.changed() => if r.is_ok() { dirty = true },
                // A dropped Membership handle only means no more payload updates.
                r = payload.changed(), if !payload_final => {
                    if r.is_err() { payload_final = true } else { dirty = true }
                }
                _ = publish.tick(), if dirty => {
                    let mut node = payload.borrow_and_update().clone();
                    node.lapses = self.clock.lapses();
                    let value = serde_json::to_vec(&node).unwrap_or_default();
                    let opts = Some(PutOptions::new().with_lease(self.lease));
                    let put = self.client.put(node.key(), value, opts);
                    match tokio::time::timeout(within, put).await {
                        Ok(Ok(_)) => dirty = false,
                        Ok(Err(e)) => warn!(error = %e, "registry heartbeat publish failed"),
                        Err(_) => warn!("registry heartbeat publish timed out"),
                    }
                }
            }
        }
        let revoke = self.client.lease_revoke(self.lease);
        match tokio::time::timeout(within, revoke).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(error = %e, "registry lease revoke failed on shutdown"),
            Err(_) => warn!("registry lease revoke timed out on shutdown"),
        }
        let addr = payload.borrow().addr.clone();
        info!(%addr, "node left the registry");
    }
}

/// Renews `lease` once, failing when etcd does not answer `within`.
async fn renew_once(client: &mut Client, lease: i64, within: Duration) -> Result<()> {
    let renew = async {
        let (mut keeper, mut stream) = client.lease_keep_alive(lease).await?;
        keeper.keep_alive().await?;
        match stream.message().await? {
            Some(resp) if resp.ttl() > 0 => Ok(()),
            _ => Err(Error::Registry(format!("lease {lease} expired"))),
        }
    };
    tokio::time::timeout(within, renew)
        .await
        .map_err(|_| Error::Registry(format!("etcd did not answer within {within:?}")))?
}

/// Loads every member and returns the revision to watch from.
async fn load_members(client: &mut Client, tx: &watch::Sender<Members>) -> Result<i64> {
    let resp = client
        .get(PREFIX, Some(GetOptions::new().with_prefix()))
        .await?;
    let mut members = Members::new();
    for kv in resp.kvs() {
        if let (Ok(key), Ok(node)) = (kv.key_str(), serde_json::from_slice::<NodeInfo>(kv.value()))
        {
            members.insert(key.to_string(), node);
        }
    }
    tx.send_replace(members);
    Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
}

/// Applies etcd watch events to the member map; reloads and re-watches after an error.
async fn follow_etcd(
    mut client: Client,
    tx: watch::Sender<Members>,
    mut rev: i64,
    shutdown: CancellationToken,
) {
    loop {
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(rev + 1);
        let stream = client.watch(PREFIX, Some(opts)).await;
        if let Ok(mut stream) = stream {
            loop {
                let msg = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    m = stream.message() => m,
                };
                let Ok(Some(resp)) = msg else { break };
                tx.send_modify(|m| {
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let Ok(key) = kv.key_str() else { continue };
                        rev = rev.max(kv.mod_revision());
                        match ev.event_type() {
                            EventType::Put => {
                                if let Ok(node) = serde_json::from_slice(kv.value()) {
                                    m.insert(key.to_string(), node);
                                }
                            }
                            EventType::Delete => {
                                m.remove(key);
                            }
                        }
                    }
                });
            }
        }
        warn!("registry watch interrupted, reloading members");
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if let Ok(r) = load_members(&mut client, &tx).await {
            rev = r;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(addr: &str) -> NodeInfo {
        NodeInfo {
            role: Role::Worker,
            addr: addr.into(),
            groups: vec!["default".into()],
            slots: 4,
            running: 0,
            weight: 100,
            started_at: 0,
            lapses: 0,
            overloaded: None,
        }
    }

    #[test]
    fn the_in_process_registry_always_leads() {
        let lead = Registry::local().lead("cron", "me", CancellationToken::new());
        assert!(lead.is_leader());
    }

    #[tokio::test]
    async fn local_members_come_and_go() {
        let reg = Registry::local();
        let stop = CancellationToken::new();
        let mut workers = reg.watch(Role::Worker, stop.clone()).await.unwrap();
        let masters = reg.watch(Role::Master, stop.clone()).await.unwrap();
        let node_stop = CancellationToken::new();
        let m = reg
            .register(worker("w1:1"), node_stop.clone())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while workers.current().is_empty() {
                workers.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
        assert!(masters.current().is_empty());
        m.update(|n| n.running = 3);
        tokio::time::timeout(Duration::from_secs(5), async {
            while workers.current()[0].running != 3 {
                workers.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
        node_stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), async {
            while !workers.current().is_empty() {
                workers.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_node_stays_registered_after_its_handle_is_dropped() {
        let reg = Registry::local();
        let stop = CancellationToken::new();
        let mut workers = reg.watch(Role::Worker, stop.clone()).await.unwrap();
        let node_stop = CancellationToken::new();
        drop(
            reg.register(worker("w2:1"), node_stop.clone())
                .await
                .unwrap(),
        );
        tokio::time::timeout(Duration::from_secs(5), async {
            while workers.current().is_empty() {
                workers.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
        tokio::task::yield_now().await;
        assert_eq!(workers.current().len(), 1, "still registered");
        node_stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), async {
            while !workers.current().is_empty() {
                workers.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
    }
}
