//! What `container` and `kubernetes` tasks are given: an image and its command, run by a
//! container runtime on the worker (podman or docker) or as a Job of a Kubernetes cluster.

use super::DefinitionError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A container's command: an argv, or one string the image's `sh -c` runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ContainerCommand {
    Argv(Vec<String>),
    Shell(String),
}

impl ContainerCommand {
    /// The argv given to the runtime: a string becomes `sh -c STRING`.
    pub fn argv(&self) -> Vec<String> {
        match self {
            ContainerCommand::Argv(argv) => argv.clone(),
            ContainerCommand::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
        }
    }

    fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            ContainerCommand::Argv(argv) => argv.iter_mut().collect(),
            ContainerCommand::Shell(s) => vec![s],
        }
    }

    fn texts(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            ContainerCommand::Argv(argv) => Box::new(argv.iter().map(String::as_str)),
            ContainerCommand::Shell(s) => Box::new(std::iter::once(s.as_str())),
        }
    }
}

/// When the runtime pulls the image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Only when the worker does not have it yet.
    #[default]
    Missing,
    /// Never: the image must be on the worker.
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Missing => "missing",
            PullPolicy::Never => "never",
        }
    }
}

/// `container`: an image run by podman or docker on the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerSpec {
    pub image: String,
    /// Default: the image's own entrypoint and command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<ContainerCommand>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `/host/path:/container/path` or `...:ro`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// The working directory inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    #[serde(default)]
    pub pull: PullPolicy,
}

/// `kubernetes`: a Job of one pod, created through the Kubernetes API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KubernetesSpec {
    /// Default `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A PodSpec (as the Kubernetes API takes it); or give `image` (and `command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<std::collections::HashMap<String, serde_json::Value>>)]
    pub pod: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<ContainerCommand>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How long the cluster keeps the finished Job (`ttlSecondsAfterFinished`).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1h")]
    pub ttl: Option<Duration>,
    /// The API server's URL; default: the worker's in-cluster config, else its KUBECONFIG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// A project secret holding the bearer token for `api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret: Option<String>,
    /// Set by the master from `token_secret` for the worker; never in a definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub token: Option<String>,
}

impl ContainerSpec {
    /// The texts parameters are expanded in.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.image.as_str())
            .chain(self.command.iter().flat_map(|c| c.texts()))
            .chain(self.env.values().map(String::as_str))
            .chain(self.volumes.iter().map(String::as_str))
            .chain(self.workdir.as_deref())
    }

    pub fn texts_mut(&mut self) -> Vec<&mut String> {
        let mut all = vec![&mut self.image];
        all.extend(self.command.iter_mut().flat_map(|c| c.texts_mut()));
        all.extend(self.env.values_mut());
        all.extend(self.volumes.iter_mut());
        all.extend(self.workdir.as_mut());
        all
    }
}

impl KubernetesSpec {
    /// The texts parameters are expanded in (a pod spec's strings too).
    pub fn texts(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self.image.iter().map(String::as_str).collect();
        all.extend(self.command.iter().flat_map(|c| c.texts()));
        all.extend(self.env.values().map(String::as_str));
        all.extend(self.namespace.as_deref());
        all.extend(self.api.as_deref());
        if let Some(pod) = &self.pod {
            json_strings(pod, &mut all);
        }
        all
    }

    pub fn texts_mut(&mut self) -> Vec<&mut String> {
        let mut all: Vec<&mut String> = self.image.iter_mut().collect();
        all.extend(self.command.iter_mut().flat_map(|c| c.texts_mut()));
        all.extend(self.env.values_mut());
        all.extend(self.namespace.as_mut());
        all.extend(self.api.as_mut());
        if let Some(pod) = &mut self.pod {
            json_strings_mut(pod, &mut all);
        }
        all
    }

    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
}

fn json_strings<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(o) => o.values().for_each(|v| json_strings(v, out)),
        _ => {}
    }
}

fn json_strings_mut<'a>(v: &'a mut serde_json::Value, out: &mut Vec<&'a mut String>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|v| json_strings_mut(v, out)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|v| json_strings_mut(v, out)),
        _ => {}
    }
}

pub(super) fn check_container(task: &str, c: &ContainerSpec) -> Result<(), DefinitionError> {
    let bad = |reason: String| {
        Err(DefinitionError::BadBranch {
            task: task.to_string(),
            reason,
        })
    };
    if c.image.trim().is_empty() {
        return bad("container image is empty".into());
    }
    if matches!(&c.command, Some(ContainerCommand::Argv(a)) if a.is_empty()) {
        return bad(
            "container command is an empty list: leave it out to run the image's own".into(),
        );
    }
    if let Some(k) = c.env.keys().find(|k| k.is_empty() || k.contains('=')) {
        return bad(format!("container env name '{k}' is empty or holds '='"));
    }
    for v in &c.volumes {
        let parts: Vec<&str> = v.split(':').collect();
        let ok = match parts.as_slice() {
            [host, ctr] => host.starts_with('/') && ctr.starts_with('/'),
            [host, ctr, mode] => {
                host.starts_with('/') && ctr.starts_with('/') && matches!(*mode, "ro" | "rw")
            }
            _ => false,
        };
        // A parameter may stand for a path: checked when it runs.
        if !ok && !v.contains("${") {
            return bad(format!(
                "container volume '{v}': use /host/path:/container/path or /host/path:/container/path:ro"
            ));
        }
    }
    if let Some(w) = &c.workdir
        && !w.starts_with('/')
        && !w.contains("${")
    {
        return bad(format!("container workdir '{w}' is not an absolute path"));
    }
    Ok(())
}

pub(super) fn check_kubernetes(task: &str, k: &KubernetesSpec) -> Result<(), DefinitionError> {
    let bad = |reason: String| {
        Err(DefinitionError::BadBranch {
            task: task.to_string(),
            reason,
        })
    };
    if k.token.is_some() {
        return bad(
            "kubernetes: give the token as token_secret (a project secret), not token".into(),
        );
    }
    match (&k.pod, &k.image) {
        (Some(_), Some(_)) => {
            return bad("kubernetes: give either pod (a PodSpec) or image, not both".into());
        }
        (None, None) => return bad("kubernetes needs pod (a PodSpec) or image".into()),
        (Some(pod), None) => {
            if k.command.is_some() || !k.env.is_empty() {
                return bad(
                    "kubernetes: command and env go with image; put them in the pod spec".into(),
                );
            }
            let containers = pod.get("containers").and_then(|c| c.as_array());
            if containers.is_none_or(|c| c.is_empty()) {
                return bad("kubernetes pod spec has no containers".into());
            }
        }
        (None, Some(image)) if image.trim().is_empty() => {
            return bad("kubernetes image is empty".into());
        }
        (None, Some(_)) => {}
    }
    if let Some(ns) = &k.namespace
        && !ns.contains("${")
        && !dns_label(ns)
    {
        return bad(format!("kubernetes namespace '{ns}' is not a DNS label"));
    }
    if let Some(api) = &k.api
        && !(api.starts_with("http://") || api.starts_with("https://") || api.contains("${"))
    {
        return bad(format!("kubernetes api '{api}' is not an http(s) URL"));
    }
    if let Some(s) = &k.token_secret
        && !super::valid_name(s)
    {
        return Err(DefinitionError::BadName {
            what: "kubernetes token_secret",
            value: s.clone(),
        });
    }
    Ok(())
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::super::WorkflowDef;
    use super::*;

    fn parse(task: &str) -> Result<WorkflowDef, String> {
        WorkflowDef::parse(&format!("name: w\ntasks:\n- {task}\n")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_container_task_takes_an_argv_or_a_string() {
        let def = parse(
            "{name: c, type: container, container: {image: 'alpine:3', command: [echo, '${x}'], env: {A: '${secret.s}'}, volumes: ['/in:/in:ro'], workdir: /in, pull: never}}",
        )
        .unwrap();
        let c = def.tasks[0].container.as_ref().unwrap();
        assert_eq!(c.command.as_ref().unwrap().argv(), ["echo", "${x}"]);
        assert_eq!(c.pull, PullPolicy::Never);
        let texts: Vec<&str> = def.tasks[0].texts().collect();
        assert!(
            texts.contains(&"${x}") && texts.contains(&"${secret.s}"),
            "{texts:?}"
        );
        let def =
            parse("{name: c, type: container, container: {image: x, command: 'echo hi'}}").unwrap();
        let c = def.tasks[0].container.as_ref().unwrap();
        assert_eq!(c.command.as_ref().unwrap().argv(), ["sh", "-c", "echo hi"]);
        assert_eq!(c.pull, PullPolicy::Missing);
    }

    #[test]
    fn bad_container_settings_are_named() {
        let cases = [
            (
                "{name: c, type: container}",
                "task 'c' of type container needs 'container'",
            ),
            (
                "{name: c, type: container, container: {image: ' '}}",
                "container image is empty",
            ),
            (
                "{name: c, type: container, container: {image: x, command: []}}",
                "empty list",
            ),
            (
                "{name: c, type: container, container: {image: x, volumes: [data:/d]}}",
                "container volume 'data:/d'",
            ),
            (
                "{name: c, type: container, container: {image: x, volumes: ['/a:/b:rx']}}",
                "container volume '/a:/b:rx'",
            ),
            (
                "{name: c, type: container, container: {image: x, workdir: tmp}}",
                "not an absolute path",
            ),
            (
                "{name: c, type: container, container: {image: x, env: {'A=B': x}}}",
                "env name 'A=B'",
            ),
            (
                "{name: c, type: container, container: {image: x, tag: y}}",
                "unknown field `tag`",
            ),
            (
                "{name: c, type: shell, command: x, container: {image: x}}",
                "'container' applies to container tasks only",
            ),
        ];
        for (task, want) in cases {
            let e = parse(task).unwrap_err();
            assert!(e.contains(want), "{task}: {e}");
        }
    }

    #[test]
    fn a_kubernetes_task_takes_a_pod_spec_or_an_image() {
        let def = parse(
            "{name: k, type: kubernetes, kubernetes: {namespace: jobs, ttl: 1h, token_secret: k8s, pod: {containers: [{name: main, image: 'busybox:${v}', args: [a, 1]}], restartPolicy: Never}}}",
        )
        .unwrap();
        let k = def.tasks[0].kubernetes.as_ref().unwrap();
        assert_eq!(k.namespace(), "jobs");
        assert_eq!(k.ttl, Some(Duration::from_secs(3600)));
        let texts: Vec<&str> = def.tasks[0].texts().collect();
        assert!(texts.contains(&"busybox:${v}"), "{texts:?}");
        let def =
            parse("{name: k, type: kubernetes, kubernetes: {image: busybox, command: 'echo hi'}}")
                .unwrap();
        assert_eq!(
            def.tasks[0].kubernetes.as_ref().unwrap().namespace(),
            "default"
        );
        let cases = [
            (
                "{name: k, type: kubernetes, kubernetes: {}}",
                "needs pod (a PodSpec) or image",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {image: x, pod: {containers: [{name: a}]}}}",
                "either pod",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {pod: {containers: []}}}",
                "no containers",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {pod: {containers: [{name: a}]}, command: [x]}}",
                "put them in the pod spec",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {image: x, namespace: Bad_NS}}",
                "not a DNS label",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {image: x, api: 'ftp://x'}}",
                "not an http(s) URL",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {image: x, token: abc}}",
                "token_secret",
            ),
            (
                "{name: k, type: kubernetes, kubernetes: {image: x, token_secret: 'a b'}}",
                "token_secret",
            ),
        ];
        for (task, want) in cases {
            let e = parse(task).unwrap_err();
            assert!(e.contains(want), "{task}: {e}");
        }
    }
}
