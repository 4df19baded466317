//! Where a Kubernetes task's API server is and how the worker authenticates: the task's
//! `api` (with the token of its `token_secret`); else the worker's in-cluster service
//! account; else its `KUBECONFIG` (or `~/.kube/config`).

use base64::Engine;
use serde_json::Value;
use shoal_common::definition::KubernetesSpec;
use std::path::{Path, PathBuf};

const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Where the API server is and how the worker authenticates.
pub(super) struct Target {
    pub(super) server: String,
    pub(super) token: Option<String>,
    pub(super) ca: Option<Vec<u8>>,
    /// Client certificate and key, PEM, one after the other.
    pub(super) identity: Option<Vec<u8>>,
    pub(super) insecure: bool,
}

/// The API server of a task: its own `api`, else in-cluster, else the kubeconfig.
pub(super) fn target(k: &KubernetesSpec) -> Result<Target, String> {
    if let Some(api) = &k.api {
        return Ok(Target {
            server: api.clone(),
            token: k.token.clone(),
            ca: None,
            identity: None,
            insecure: false,
        });
    }
    if let (Ok(host), Ok(port)) = (
        std::env::var("KUBERNETES_SERVICE_HOST"),
        std::env::var("KUBERNETES_SERVICE_PORT"),
    ) {
        let dir = Path::new(SERVICE_ACCOUNT);
        let token = std::fs::read_to_string(dir.join("token"))
            .map_err(|e| format!("in-cluster: cannot read {SERVICE_ACCOUNT}/token: {e}"))?;
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        return Ok(Target {
            server: format!("https://{host}:{port}"),
            token: k.token.clone().or(Some(token.trim().to_string())),
            ca: std::fs::read(dir.join("ca.crt")).ok(),
            identity: None,
            insecure: false,
        });
    }
    let path = std::env::var_os("KUBECONFIG")
        .and_then(|p| std::env::split_paths(&p).next())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")))
        .ok_or("no Kubernetes API server: the task names no api, the worker runs outside a cluster and has no KUBECONFIG")?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "no Kubernetes API server: the task names no api, the worker runs outside a cluster, and its kubeconfig {}: {e}",
            path.display()
        )
    })?;
    let mut t = kubeconfig(&text, path.parent().unwrap_or(Path::new(".")))
        .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
    if k.token.is_some() {
        t.token = k.token.clone();
    }
    Ok(t)
}

/// The current context of a kubeconfig: server, CA, the user's token or certificate.
fn kubeconfig(text: &str, dir: &Path) -> Result<Target, String> {
    let doc: Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let current = doc["current-context"]
        .as_str()
        .ok_or("no current-context")?;
    let named = |list: &str, name: &str| -> Result<Value, String> {
        doc[list]
            .as_array()
            .and_then(|l| l.iter().find(|e| e["name"].as_str() == Some(name)))
            .cloned()
            .ok_or_else(|| format!("no {list} entry '{name}'"))
    };
    let context = named("contexts", current)?;
    let cluster_name = context["context"]["cluster"]
        .as_str()
        .ok_or("context without cluster")?;
    let cluster = named("clusters", cluster_name)?["cluster"].clone();
    let user = match context["context"]["user"].as_str() {
        Some(u) => named("users", u)?["user"].clone(),
        None => Value::Null,
    };
    let data = |v: &Value, key: &str| -> Result<Option<Vec<u8>>, String> {
        if let Some(b64) = v[format!("{key}-data")].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| format!("{key}-data: {e}"))?;
            return Ok(Some(bytes));
        }
        match v[key].as_str() {
            Some(file) => {
                let path = dir.join(file);
                std::fs::read(&path)
                    .map(Some)
                    .map_err(|e| format!("{key} {}: {e}", path.display()))
            }
            None => Ok(None),
        }
    };
    let identity = match (
        data(&user, "client-certificate")?,
        data(&user, "client-key")?,
    ) {
        (Some(mut cert), Some(key)) => {
            cert.push(b'\n');
            cert.extend(key);
            Some(cert)
        }
        _ => None,
    };
    let token = match (user["token"].as_str(), user["tokenFile"].as_str()) {
        (Some(t), _) => Some(t.to_string()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(dir.join(f))
                .map_err(|e| format!("tokenFile {f}: {e}"))?
                .trim()
                .to_string(),
        ),
        _ => None,
    };
    if user.get("exec").is_some() && token.is_none() && identity.is_none() {
        return Err("the user's credentials come from an exec plugin, which the worker does not run; give the task a token_secret".into());
    }
    Ok(Target {
        server: cluster["server"]
            .as_str()
            .ok_or("cluster without server")?
            .to_string(),
        token,
        ca: data(&cluster, "certificate-authority")?,
        identity,
        insecure: cluster["insecure-skip-tls-verify"].as_bool() == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_s_current_context_gives_server_ca_and_token() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "file-token\n").unwrap();
        let text = r#"
apiVersion: v1
kind: Config
current-context: b
contexts:
- {name: a, context: {cluster: one, user: u1}}
- {name: b, context: {cluster: two, user: u2}}
clusters:
- {name: one, cluster: {server: "https://one:6443"}}
- {name: two, cluster: {server: "https://two:6443", certificate-authority-data: "Q0E=", insecure-skip-tls-verify: false}}
users:
- {name: u1, user: {token: t1}}
- {name: u2, user: {tokenFile: tok}}
"#;
        let t = kubeconfig(text, dir.path()).unwrap();
        assert_eq!(t.server, "https://two:6443");
        assert_eq!(t.token.as_deref(), Some("file-token"));
        assert_eq!(t.ca.as_deref(), Some(&b"CA"[..]));
        assert!(!t.insecure && t.identity.is_none());
        let exec = text.replace("{tokenFile: tok}", "{exec: {command: aws}}");
        let e = kubeconfig(&exec, dir.path()).err().unwrap();
        assert!(e.contains("exec plugin"), "{e}");
    }
}
