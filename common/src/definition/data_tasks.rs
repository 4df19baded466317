//! The task types a data team reaches for first: `spark` (spark-submit from typed fields)
//! and `notebook` (a Jupyter notebook run with papermill). Their shape, validation, and
//! the texts parameters are expanded in; the worker builds the command line.

use super::{DefinitionError, TaskDef, scalar_map};
use crate::types::TaskType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The Spark master a `spark` task without `master` runs on.
pub const DEFAULT_SPARK_MASTER: &str = "local[2]";
/// Spark's deploy modes.
pub const DEPLOY_MODES: [&str; 2] = ["client", "cluster"];

/// `spark:` a spark-submit command line, one field per option. Each value is one argument
/// of its own, never read by a shell, so a parameter's value cannot become a command.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SparkSpec {
    /// A JVM application: its main class (`--class`), in `app_jar`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_class: Option<String>,
    /// The jar holding `main_class`: an absolute path on the worker or a URL Spark reads
    /// (`hdfs://`, `s3a://`, `local:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_jar: Option<String>,
    /// A Python application instead of `main_class`: its file (a path or URL as `app_jar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub py_file: Option<String>,
    /// Further jars on the driver's and executors' class path (`--jars`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jars: Vec<String>,
    /// `client` (Spark's default) or `cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "client")]
    pub deploy_mode: Option<String>,
    /// `--master`; default `local[2]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "yarn")]
    pub master: Option<String>,
    /// e.g. `2g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_executors: Option<u32>,
    /// Spark properties, each passed as `--conf KEY=VALUE`.
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub conf: BTreeMap<String, String>,
    /// The application's own arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The application's name (`--name`); default: the task's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl SparkSpec {
    /// The master it runs on.
    pub fn master(&self) -> &str {
        self.master.as_deref().unwrap_or(DEFAULT_SPARK_MASTER)
    }

    /// Every text parameters are expanded in.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        [
            &self.main_class,
            &self.app_jar,
            &self.py_file,
            &self.deploy_mode,
            &self.master,
            &self.driver_memory,
            &self.executor_memory,
            &self.name,
        ]
        .into_iter()
        .filter_map(|v| v.as_deref())
        .chain(self.jars.iter().map(String::as_str))
        .chain(self.conf.values().map(String::as_str))
        .chain(self.args.iter().map(String::as_str))
    }

    /// Every text parameters are expanded in, to change in place.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        [
            &mut self.main_class,
            &mut self.app_jar,
            &mut self.py_file,
            &mut self.deploy_mode,
            &mut self.master,
            &mut self.driver_memory,
            &mut self.executor_memory,
            &mut self.name,
        ]
        .into_iter()
        .filter_map(Option::as_mut)
        .chain(self.jars.iter_mut())
        .chain(self.conf.values_mut())
        .chain(self.args.iter_mut())
    }
}

/// `notebook:` a Jupyter notebook run with papermill, which the worker runs as
/// `<python> -m papermill` (its `--python` interpreter).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookSpec {
    /// The notebook (`.ipynb`): an absolute path on the worker, or relative to `cwd`.
    pub path: String,
    /// Where papermill writes the executed notebook too (absolute, or relative to the
    /// kernel's directory); the worker keeps a copy beside the attempt's log either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Values of the notebook's `parameters` cell, expanded like a command; the task's own
    /// `params` are passed too (these win). Typed as papermill's `-p` types them: `3` is
    /// an int, `0.5` a float, `True`/`False` booleans, `None` None, anything else a string.
    #[serde(
        default,
        deserialize_with = "scalar_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub parameters: BTreeMap<String, String>,
    /// The Jupyter kernel; default: the one the notebook names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "python3")]
    pub kernel: Option<String>,
    /// The directory the kernel runs in; default: the notebook's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl NotebookSpec {
    /// Every text parameters are expanded in.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        [&self.output, &self.kernel, &self.cwd]
            .into_iter()
            .filter_map(|v| v.as_deref())
            .chain(std::iter::once(self.path.as_str()))
            .chain(self.parameters.values().map(String::as_str))
    }

    /// Every text parameters are expanded in, to change in place.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        [&mut self.output, &mut self.kernel, &mut self.cwd]
            .into_iter()
            .filter_map(Option::as_mut)
            .chain(std::iter::once(&mut self.path))
            .chain(self.parameters.values_mut())
    }
}

/// A text that holds a `${...}` or `$[...]` reference: judged once expanded, by the worker.
fn expanded_later(text: &str) -> bool {
    text.contains("${") || text.contains("$[")
}

/// The checks of a spark or notebook task's section.
pub(super) fn check(t: &TaskDef) -> Result<(), DefinitionError> {
    let bad = |reason: String| DefinitionError::BadBranch {
        task: t.name.clone(),
        reason,
    };
    let kind = t.kind();
    if t.spark.is_some() && kind != TaskType::Spark {
        return Err(bad(format!(
            "a {} task takes no `spark` section",
            t.task_type
        )));
    }
    if t.notebook.is_some() && kind != TaskType::Notebook {
        return Err(bad(format!(
            "a {} task takes no `notebook` section",
            t.task_type
        )));
    }
    if let Some(s) = &t.spark {
        s.check()
            .map_err(|reason| bad(format!("spark: {reason}")))?;
    }
    if let Some(n) = &t.notebook {
        n.check()
            .map_err(|reason| bad(format!("notebook: {reason}")))?;
    }
    Ok(())
}

impl SparkSpec {
    /// What is wrong with it, if anything; a text with a parameter reference is judged
    /// once expanded (the worker checks again).
    pub fn check(&self) -> Result<(), String> {
        check_spark(self)
    }
}

fn check_spark(s: &SparkSpec) -> Result<(), String> {
    let given = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.trim().is_empty());
    match (given(&s.main_class), given(&s.py_file)) {
        (false, false) => {
            return Err("give `main_class` (with `app_jar`) or `py_file`".into());
        }
        (true, true) => {
            return Err("give either `main_class` (with `app_jar`) or `py_file`, not both".into());
        }
        (true, false) if !given(&s.app_jar) => {
            return Err("`main_class` needs `app_jar`: the jar that holds it".into());
        }
        (false, true) if s.app_jar.is_some() => {
            return Err("`app_jar` goes with `main_class`; a `py_file` application takes `jars` for its class path".into());
        }
        _ => {}
    }
    if let Some(mode) = s.deploy_mode.as_deref().filter(|m| !expanded_later(m))
        && !DEPLOY_MODES.contains(&mode)
    {
        return Err(format!(
            "unknown deploy_mode '{mode}' (expected {})",
            DEPLOY_MODES.join(" or ")
        ));
    }
    if s.deploy_mode.as_deref() == Some("cluster") && s.master().starts_with("local") {
        return Err(format!(
            "deploy_mode cluster needs a cluster manager; master '{}' runs locally",
            s.master()
        ));
    }
    for (field, value) in [
        ("driver_memory", &s.driver_memory),
        ("executor_memory", &s.executor_memory),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !expanded_later(v))
            && !is_memory(v)
        {
            return Err(format!(
                "{field} '{v}' is not an amount of memory (e.g. 512m, 2g)"
            ));
        }
    }
    for (field, value) in [
        ("driver_cores", s.driver_cores),
        ("executor_cores", s.executor_cores),
        ("num_executors", s.num_executors),
    ] {
        if value == Some(0) {
            return Err(format!("{field} must be at least 1"));
        }
    }
    if let Some(jar) = s
        .jars
        .iter()
        .find(|j| j.contains(',') || j.trim().is_empty())
    {
        return Err(format!(
            "jars entry '{jar}': give one jar per entry, without commas"
        ));
    }
    if let Some(key) = s
        .conf
        .keys()
        .find(|k| k.trim().is_empty() || k.contains('=') || k.starts_with('-'))
    {
        return Err(format!(
            "conf key '{key}' is not a Spark property name (e.g. spark.sql.shuffle.partitions)"
        ));
    }
    Ok(())
}

/// `512m`, `2g`, `1024`: digits and at most one unit letter (b, k, m, g, t, p; any case),
/// optionally followed by `b`, as Spark takes them.
fn is_memory(v: &str) -> bool {
    let digits = v.chars().take_while(char::is_ascii_digit).count();
    let unit = v[digits..].to_ascii_lowercase();
    digits > 0
        && matches!(
            unit.as_str(),
            "" | "b" | "k" | "m" | "g" | "t" | "p" | "kb" | "mb" | "gb" | "tb" | "pb"
        )
}

impl NotebookSpec {
    /// What is wrong with it, if anything; a text with a parameter reference is judged
    /// once expanded (the worker checks again).
    pub fn check(&self) -> Result<(), String> {
        check_notebook(self)
    }
}

fn check_notebook(n: &NotebookSpec) -> Result<(), String> {
    if n.path.trim().is_empty() {
        return Err("`path` names no notebook".into());
    }
    let absolute = |v: &str| v.starts_with('/') || expanded_later(v);
    if !absolute(&n.path) && n.cwd.is_none() {
        return Err(format!(
            "path '{}' is relative: give an absolute path, or `cwd` it is relative to",
            n.path
        ));
    }
    if let Some(cwd) = n.cwd.as_deref().filter(|c| !absolute(c)) {
        return Err(format!("cwd '{cwd}' must be an absolute path"));
    }
    if let Some(name) = n.parameters.keys().find(|k| !is_identifier(k)) {
        return Err(format!(
            "parameter '{name}' is not a Python identifier: the notebook could not name it"
        ));
    }
    Ok(())
}

/// `[A-Za-z_][A-Za-z0-9_]*`: a name a notebook's parameters cell can assign.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use crate::definition::WorkflowDef;

    fn err(task: &str) -> String {
        let yaml = format!("name: w\ntasks:\n- {task}\n");
        WorkflowDef::parse(&yaml).unwrap_err().to_string()
    }

    #[test]
    fn a_spark_task_parses_with_its_defaults_and_texts() {
        let def = WorkflowDef::parse(
            "name: w\ntasks:\n- name: s\n  type: spark\n  params: {n: 3}\n  spark:\n    py_file: /jobs/${job}.py\n    jars: [/j/a.jar]\n    conf: {spark.sql.shuffle.partitions: 4}\n    args: ['${n}', --flag]\n",
        )
        .unwrap();
        let s = def.tasks[0].spark.as_ref().unwrap();
        assert_eq!(s.master(), "local[2]");
        assert_eq!(s.conf["spark.sql.shuffle.partitions"], "4");
        let texts: Vec<&str> = def.tasks[0].texts().collect();
        for t in ["/jobs/${job}.py", "/j/a.jar", "4", "${n}", "--flag"] {
            assert!(texts.contains(&t), "{t} in {texts:?}");
        }
        assert_eq!(
            def.unresolvable_references(&Default::default()),
            vec![("s".to_string(), "job".to_string())]
        );
    }

    #[test]
    fn bad_spark_sections_are_named() {
        let cases = [
            (
                "{name: s, type: spark}",
                "task 's' of type spark needs 'spark'",
            ),
            (
                "{name: s, type: spark, spark: {jars: [/a.jar]}}",
                "task 's': spark: give `main_class` (with `app_jar`) or `py_file`",
            ),
            (
                "{name: s, type: spark, spark: {main_class: a.B, app_jar: /a.jar, py_file: /x.py}}",
                "not both",
            ),
            (
                "{name: s, type: spark, spark: {main_class: a.B}}",
                "`main_class` needs `app_jar`",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, deploy_mode: yarn}}",
                "unknown deploy_mode 'yarn' (expected client or cluster)",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, deploy_mode: cluster}}",
                "master 'local[2]' runs locally",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, driver_memory: lots}}",
                "driver_memory 'lots' is not an amount of memory",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, num_executors: 0}}",
                "num_executors must be at least 1",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, jars: ['/a.jar,/b.jar']}}",
                "one jar per entry",
            ),
            (
                "{name: s, type: spark, spark: {py_file: /x.py, conf: {'a=b': c}}}",
                "conf key 'a=b'",
            ),
            (
                "{name: s, type: shell, command: x, spark: {py_file: /x.py}}",
                "a shell task takes no `spark` section",
            ),
        ];
        for (task, want) in cases {
            let e = err(task);
            assert!(e.contains(want), "{task}: {e}");
        }
        // Judged by the worker once expanded.
        let later = "name: w\ntasks:\n- {name: s, type: spark, spark: {py_file: /x.py, deploy_mode: '${mode}', driver_memory: '${mem}'}}\n";
        WorkflowDef::parse(later).unwrap();
        for ok in ["512m", "2g", "2G", "1024", "4gb"] {
            assert!(super::is_memory(ok), "{ok}");
        }
    }

    #[test]
    fn bad_notebook_sections_are_named() {
        let cases = [
            ("{name: n, type: notebook}", "needs 'notebook'"),
            (
                "{name: n, type: notebook, notebook: {path: a.ipynb}}",
                "path 'a.ipynb' is relative",
            ),
            (
                "{name: n, type: notebook, notebook: {path: a.ipynb, cwd: rel}}",
                "cwd 'rel' must be an absolute path",
            ),
            (
                "{name: n, type: notebook, notebook: {path: /a.ipynb, parameters: {a-b: 1}}}",
                "parameter 'a-b' is not a Python identifier",
            ),
        ];
        for (task, want) in cases {
            let e = err(task);
            assert!(e.contains(want), "{task}: {e}");
        }
        let def = WorkflowDef::parse(
            "name: w\ntasks:\n- {name: n, type: notebook, notebook: {path: a.ipynb, cwd: /nb, parameters: {rows: '${n}'}}}\n",
        )
        .unwrap();
        let texts: Vec<&str> = def.tasks[0].texts().collect();
        assert!(
            texts.contains(&"${n}") && texts.contains(&"a.ipynb"),
            "{texts:?}"
        );
    }
}
