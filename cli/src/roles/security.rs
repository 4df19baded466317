//! What a role checks before it listens: API auth on a public address, the first admin's
//! token, the cluster secret and TLS, the key of stored secrets.

use super::args::ClusterArgs;
use super::options::TlsArgs;
use anyhow::Context;
use shoal_api_server::Auth;
use shoal_common::access::{new_token, token_hash};
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::cluster_tls::ClusterTls;
use shoal_common::secret_key::SecretKey;
use shoal_store::{BOOTSTRAP_ADMIN, Store};
use std::net::IpAddr;
use tracing::{info, warn};

/// How the API of `role` authenticates. Without auth, only a loopback --bind is accepted,
/// unless --insecure.
pub(super) fn api_auth(role: &str, bind: IpAddr, on: bool, insecure: bool) -> anyhow::Result<()> {
    guard_public_bind(
        role,
        bind,
        on,
        insecure,
        Need {
            what: "auth",
            risk: "start workflows (which run commands)",
            fix: "pass --auth (or set SHOAL_TOKEN)",
        },
    )
}

/// Auth on, with `token` (SHOAL_TOKEN) as a global admin's if given. Without one, the first
/// start on a store without users creates the global admin and prints its token, once.
pub(super) async fn token_auth(store: &Store, token: Option<String>) -> anyhow::Result<Auth> {
    let token = token.filter(|t| !t.is_empty());
    if token.is_none() {
        let bootstrap = new_token().context("cannot read /dev/urandom")?;
        if store.bootstrap_admin(&token_hash(&bootstrap)).await? {
            info!(
                user = BOOTSTRAP_ADMIN,
                "created the first user, a global admin"
            );
            println!(
                "\nCreated the global admin '{BOOTSTRAP_ADMIN}'. Its API token, shown this once:\n\n    \
                 {bootstrap}\n\nSign in to the web UI with it, or `export SHOAL_TOKEN=...` for the CLI; \
                 `shoal user create` adds users, `shoal token create` more tokens.\n"
            );
        }
    }
    Ok(Auth::tokens(token))
}

/// What a listener on a public address needs, for the refusal and the warning.
pub(super) struct Need {
    what: &'static str,
    risk: &'static str,
    fix: &'static str,
}

/// A `role` listening on a non-loopback `bind` without what it `needs` refuses to start,
/// unless `insecure`: then it warns, at every start.
pub(super) fn guard_public_bind(
    role: &str,
    bind: IpAddr,
    protected: bool,
    insecure: bool,
    need: Need,
) -> anyhow::Result<()> {
    let Need { what, risk, fix } = need;
    if protected || bind.is_loopback() {
        return Ok(());
    }
    if !insecure {
        anyhow::bail!(
            "the {role} listens on {bind} without {what}, so anyone who reaches its port could \
             {risk}: {fix}, bind to 127.0.0.1, or pass --insecure on a trusted network"
        );
    }
    warn!(%bind, "{role} runs WITHOUT {what} (--insecure): anyone who reaches its port can {risk}; {fix}");
    Ok(())
}

/// The `--cluster-secret` given, checked (none when not given), with mutual TLS when
/// `tls` names the files.
pub(super) fn given_secret(secret: Option<&str>, tls: &TlsArgs) -> anyhow::Result<ClusterSecret> {
    let secret = secret.map(ClusterSecret::new).transpose();
    let secret = secret
        .map_err(|e| anyhow::anyhow!("--cluster-secret: {e}"))?
        .unwrap_or_default();
    match (&tls.tls_cert, &tls.tls_key, &tls.tls_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            let tls = ClusterTls::load(cert, key, ca).map_err(anyhow::Error::msg)?;
            Ok(secret.with_tls(tls))
        }
        _ => Ok(secret),
    }
}

impl ClusterArgs {
    /// The secret this node requires and carries. Without one, only a loopback --bind is
    /// accepted, unless --insecure.
    pub(super) fn secret(&self, role: &str) -> anyhow::Result<ClusterSecret> {
        let secret = given_secret(self.cluster_secret.as_deref(), &self.tls)?;
        guard_public_bind(
            role,
            self.bind,
            secret.is_set(),
            self.insecure,
            Need {
                what: "a cluster secret",
                risk: "call it",
                fix: "set SHOAL_CLUSTER_SECRET (the same on every node, e.g. `openssl rand -hex 32`) or SHOAL_TLS_CERT, SHOAL_TLS_KEY and SHOAL_TLS_CA",
            },
        )?;
        Ok(secret)
    }
}

/// The `--secret-key` given, checked; none when not given.
pub(super) fn given_secret_key(key: Option<&str>) -> anyhow::Result<Option<SecretKey>> {
    key.filter(|k| !k.is_empty())
        .map(SecretKey::from_hex)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--secret-key: {e}"))
}

/// Standalone's key: the one given, else `<data-dir>/secret.key`, made on the first start
/// (readable by its owner only). Lose it and the stored secrets cannot be read.
pub(super) fn standalone_secret_key(
    given: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<SecretKey> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(key) = given_secret_key(given)? {
        return Ok(key);
    }
    let path = data_dir.join("secret.key");
    if !path.exists() {
        let key = SecretKey::generate().map_err(anyhow::Error::msg)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        std::io::Write::write_all(&mut file, key.as_bytes())?;
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the secret key {}", path.display()))?;
    SecretKey::from_hex(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
