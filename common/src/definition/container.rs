//! What `container` and `kubernetes` tasks are given: an image and its command, run by a
//! container runtime on the worker (podman or docker) or as a Job of a Kubernetes cluster.

use super::DefinitionError;
use crate::params::Lang;
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

    /// Each text with the language it is read in ([`argv_langs`]).
    fn texts_mut(&mut self) -> Vec<(&mut String, Lang)> {
        match self {
            ContainerCommand::Argv(argv) => with_langs(argv.iter_mut().collect()),
            ContainerCommand::Shell(s) => vec![(s, Lang::Shell)],
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

    /// The texts parameters are expanded in, each with the language it is read in: the
    /// command's script is code, every other field one argument of the runtime.
    pub fn texts_mut(&mut self) -> Vec<(&mut String, Lang)> {
        let mut all = vec![(&mut self.image, Lang::Text)];
        all.extend(self.command.iter_mut().flat_map(|c| c.texts_mut()));
        let fields = self.env.values_mut().chain(self.volumes.iter_mut());
        all.extend(fields.chain(self.workdir.as_mut()).map(|t| (t, Lang::Text)));
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

    /// As [`ContainerSpec::texts_mut`]; in a pod spec, each container's `command` and
    /// `args` make its argv.
    pub fn texts_mut<'a>(&'a mut self) -> Vec<(&'a mut String, Lang)> {
        let mut all: Vec<(&'a mut String, Lang)> = Vec::new();
        all.extend(self.command.iter_mut().flat_map(|c| c.texts_mut()));
        let fields = self.image.iter_mut().chain(self.env.values_mut());
        let fields = fields
            .chain(self.namespace.as_mut())
            .chain(self.api.as_mut());
        all.extend(fields.map(|t| (t, Lang::Text)));
        if let Some(pod) = &mut self.pod {
            pod_texts_mut(pod, &mut all);
        }
        // The kubelet expands `$(NAME)` in what is not code here too.
        let kube =
            |(t, l): (&'a mut String, Lang)| (t, if l == Lang::Text { Lang::KubeText } else { l });
        all.into_iter().map(kube).collect()
    }

    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }

    /// Refuses, once parameters are in, a namespace that is not a DNS label (a value could
    /// lead the API path elsewhere) and an api that is not an http(s) URL.
    pub fn check_target(&self) -> Result<(), String> {
        let api = self.api.as_deref().and_then(api_error);
        namespace_error(self.namespace())
            .or(api)
            .map_or(Ok(()), Err)
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

/// A pod spec's strings: a container's (of `containers`, `initContainers`,
/// `ephemeralContainers`) `command` followed by its `args` is an argv, read as
/// [`argv_langs`] says; every other string is text.
fn pod_texts_mut<'a>(v: &'a mut serde_json::Value, out: &mut Vec<(&'a mut String, Lang)>) {
    use serde_json::Value;
    match v {
        Value::String(s) => out.push((s, Lang::Text)),
        Value::Array(a) => a.iter_mut().for_each(|v| pod_texts_mut(v, out)),
        Value::Object(o) => {
            let mut argv: [Vec<&'a mut String>; 2] = [Vec::new(), Vec::new()];
            for (key, v) in o.iter_mut() {
                let slot = match key.as_str() {
                    "command" => 0,
                    "args" => 1,
                    _ => {
                        pod_texts_mut(v, out);
                        continue;
                    }
                };
                match v {
                    Value::Array(a) => argv[slot].extend(a.iter_mut().filter_map(|v| match v {
                        Value::String(s) => Some(s),
                        _ => None,
                    })),
                    v => pod_texts_mut(v, out),
                }
            }
            let [command, args] = argv;
            out.extend(with_langs(command.into_iter().chain(args).collect()));
        }
        _ => {}
    }
}

/// Shells, which run the first argument after their options as code when given `-c`.
const SHELLS: [&str; 9] = [
    "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "yash", "hush",
];

/// The language each argument of an argv is read in. The interpreter is the first
/// argument that names a shell (`sh`, `bash`, ...) or a python, so wrappers before it
/// (`env -i`, `tini --`, `timeout 60`, `busybox`) do not hide it. A shell given `-c`
/// (alone or in a cluster such as `-ec`) runs its first argument after the options as
/// shell code, and `python -c` its code (attached, or the next argument) as python: those
/// are [`Lang::Shell`] and [`Lang::Python`], as a shell or python task's script is, so an
/// outside value cannot become code there. Every other argument is one argument of a
/// program ([`Lang::Text`]); a program that runs an argument as code in another way
/// (`perl -e`, `node -e`) should read values from its environment instead. Guarding an
/// argument that is not code costs nothing, so where unsure this guards.
pub fn argv_langs(argv: &[&str]) -> Vec<Lang> {
    let mut langs = vec![Lang::Text; argv.len()];
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_string();
    let found = argv.iter().enumerate().find_map(|(i, a)| {
        let name = base(a);
        if SHELLS.contains(&name.as_str()) {
            Some((i, Lang::Shell))
        } else if name.starts_with("python") {
            Some((i, Lang::Python))
        } else {
            None
        }
    });
    let code = match found {
        Some((at, Lang::Shell)) => shell_script(argv, at).map(|i| (i, Lang::Shell)),
        Some((at, _)) => python_code(argv, at).map(|i| (i, Lang::Python)),
        None => None,
    };
    if let Some((i, lang)) = code {
        langs[i] = lang;
    }
    langs
}

/// The index of the script a shell at `at` runs with `-c`: its first argument after the
/// options (`-o NAME` and `-O NAME` take one; `--` ends them).
fn shell_script(argv: &[&str], at: usize) -> Option<usize> {
    let mut c = false;
    let mut i = at + 1;
    while let Some(a) = argv.get(i) {
        if *a == "--" {
            i += 1;
            break;
        }
        if a.starts_with("--") {
            // Long options; those two take a file.
            i += if matches!(*a, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        c |= flags.contains('c');
        i += if flags.contains(['o', 'O']) { 2 } else { 1 };
    }
    (c && i < argv.len()).then_some(i)
}

/// The index of the code `python -c` runs, for a python at `at`: the `-c` argument itself
/// when the code is attached (`-cprint(1)`), else the next. `-W` and `-X` take an
/// argument; a script file, `-m` or `-` ends the options without code.
fn python_code(argv: &[&str], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while let Some(a) = argv.get(i) {
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        // A script file or `-` (stdin) ends the options: no code.
        let flags = a.strip_prefix('-').filter(|f| !f.is_empty())?;
        let mut takes_next = false;
        for (j, ch) in flags.char_indices() {
            let rest = &flags[j + ch.len_utf8()..];
            match ch {
                'c' if rest.is_empty() => return (i + 1 < argv.len()).then_some(i + 1),
                'c' => return Some(i),
                'W' | 'X' => {
                    takes_next = rest.is_empty();
                    break;
                }
                'm' => return None,
                _ => {}
            }
        }
        i += if takes_next { 2 } else { 1 };
    }
    None
}

/// Pairs each argument of an argv with its language ([`argv_langs`]).
fn with_langs(argv: Vec<&mut String>) -> Vec<(&mut String, Lang)> {
    let langs = argv_langs(&argv.iter().map(|a| a.as_str()).collect::<Vec<_>>());
    argv.into_iter().zip(langs).collect()
}

/// A volume's host and container paths, when it is `/host:/container` or
/// `/host:/container:ro` (or `:rw`).
pub fn volume_parts(v: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = v.split(':').collect();
    let (host, ctr) = match parts.as_slice() {
        [host, ctr] => (*host, *ctr),
        [host, ctr, "ro" | "rw"] => (*host, *ctr),
        _ => return None,
    };
    (host.starts_with('/') && ctr.starts_with('/')).then_some((host, ctr))
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
    if let Some(k) = c.env.keys().find(|k| !env_name(k)) {
        return bad(format!(
            "container env name '{k}' is not a variable name (letters, digits, _ . -; not a digit first)"
        ));
    }
    for v in &c.volumes {
        // A parameter may stand for a path: checked when it runs.
        if volume_parts(v).is_none() && !v.contains("${") {
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
    // A parameter may stand for them: checked again when the task runs.
    fn fixed(t: Option<&str>) -> Option<&str> {
        t.filter(|t| !t.contains("${"))
    }
    if let Some(e) = fixed(k.namespace.as_deref()).and_then(namespace_error) {
        return bad(e);
    }
    if let Some(e) = fixed(k.api.as_deref()).and_then(api_error) {
        return bad(e);
    }
    if let Some(s) = &k.token_secret
        && !super::valid_identifier(s)
    {
        return Err(DefinitionError::BadName {
            what: "kubernetes token_secret",
            value: s.clone(),
        });
    }
    Ok(())
}

/// A variable name a runtime's `--env-file` carries as it is.
fn env_name(k: &str) -> bool {
    k.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn namespace_error(ns: &str) -> Option<String> {
    (!dns_label(ns)).then(|| format!("kubernetes namespace '{ns}' is not a DNS label"))
}

fn api_error(api: &str) -> Option<String> {
    let http = api.starts_with("http://") || api.starts_with("https://");
    (!http).then(|| format!("kubernetes api '{api}' is not an http(s) URL"))
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
    fn a_shell_s_or_python_s_c_script_is_code_and_other_arguments_are_text() {
        use Lang::{Python as P, Shell as S, Text as T};
        let cases: [(&[&str], &[Lang]); 19] = [
            (&["sh", "-c", "s", "a0", "a1"], &[T, T, S, T, T]),
            (&["/bin/bash", "-ec", "s"], &[T, T, S]),
            (&["sh", "-xc", "s"], &[T, T, S]),
            (&["bash", "-o", "pipefail", "-c", "s"], &[T, T, T, T, S]),
            (&["sh", "-c", "-o", "pipefail", "s"], &[T, T, T, T, S]),
            (&["bash", "-co", "pipefail", "s"], &[T, T, T, S]),
            (&["bash", "--rcfile", "f", "-c", "s"], &[T, T, T, T, S]),
            (&["sh", "-c", "--", "s", "a0"], &[T, T, T, S, T]),
            (&["busybox", "sh", "-c", "s"], &[T, T, T, S]),
            (
                &["env", "-i", "A=1", "dash", "-c", "s"],
                &[T, T, T, T, T, S],
            ),
            (
                &["tini", "--", "/usr/bin/mksh", "-c", "s"],
                &[T, T, T, T, S],
            ),
            (&["python3", "-u", "-c", "s", "a"], &[T, T, T, P, T]),
            (&["python", "-cs"], &[T, P]),
            (
                &["python3", "-Wignore::DeprecationWarning", "-c", "s"],
                &[T, T, T, P],
            ),
            (
                &["python3", "-W", "ignore", "-X", "dev", "-Ic", "s"],
                &[T, T, T, T, T, T, P],
            ),
            (
                &["python3", "-m", "http.server", "-c", "x"],
                &[T, T, T, T, T],
            ),
            (&["sh", "script.sh", "a"], &[T, T, T]),
            (&["bash", "--norc", "x"], &[T, T, T]),
            (&["echo", "-c", "x"], &[T, T, T]),
        ];
        for (argv, want) in cases {
            assert_eq!(argv_langs(argv), want, "{argv:?}");
        }
        let mut c: ContainerSpec =
            serde_json::from_value(serde_json::json!({"image": "i", "command": "echo"})).unwrap();
        let langs: Vec<Lang> = c.texts_mut().into_iter().map(|(_, l)| l).collect();
        assert_eq!(langs, [T, S], "a string command is a script");
        let mut k: KubernetesSpec = serde_json::from_value(serde_json::json!({"pod": {
            "initContainers": [{"name": "i", "command": ["sh"], "args": ["-c", "s"]}],
            "containers": [{"name": "m", "image": "x", "args": ["-c", "s"], "command": ["python"]}],
        }}))
        .unwrap();
        let mut code: Vec<(String, Lang)> = k
            .texts_mut()
            .into_iter()
            .map(|(t, l)| (t.clone(), l))
            .filter(|(_, l)| *l != Lang::KubeText)
            .collect();
        code.sort_by_key(|(_, l)| *l == S);
        assert_eq!(
            code,
            [("s".to_string(), P), ("s".to_string(), S)],
            "the rest is text the kubelet reads"
        );
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
                "env name 'A=B' is not a variable name",
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
