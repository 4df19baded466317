//! The export's shape, read leniently as DolphinScheduler itself reads it: unknown fields
//! ignored, 3.3's `workflow*` names taken for 3.0–3.2's `process*`, numbers that the UI
//! writes as strings taken as numbers, task parameters as an object or a JSON string.

use anyhow::Context;
use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;
use std::collections::HashMap;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DagData {
    #[serde(alias = "workflowDefinition", rename = "processDefinition")]
    pub workflow: Workflow,
    #[serde(rename = "taskDefinitionList", default)]
    pub tasks: Vec<Task>,
    #[serde(
        alias = "workflowTaskRelationList",
        rename = "processTaskRelationList",
        default
    )]
    pub relations: Vec<Relation>,
    #[serde(default)]
    pub schedule: Option<Schedule>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    #[serde(deserialize_with = "number")]
    pub code: i64,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON string holding a list of [`Property`] (or, by hand, the list itself).
    #[serde(default)]
    global_params: Option<Json>,
    /// Minutes; 0 is none.
    #[serde(default, deserialize_with = "number")]
    pub timeout: i64,
    #[serde(default)]
    pub execution_type: Option<String>,
    #[serde(default)]
    pub release_state: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    #[serde(deserialize_with = "number")]
    pub code: i64,
    pub name: String,
    pub task_type: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    task_params: Option<Json>,
    /// `NO`: the task is forbidden (skipped, downstream goes on).
    #[serde(default)]
    pub flag: Option<String>,
    #[serde(default)]
    pub task_priority: Option<String>,
    #[serde(default)]
    pub worker_group: Option<String>,
    #[serde(default, deserialize_with = "number")]
    pub fail_retry_times: i64,
    /// Minutes.
    #[serde(default, deserialize_with = "number")]
    pub fail_retry_interval: i64,
    #[serde(default)]
    pub timeout_flag: Option<String>,
    #[serde(default)]
    pub timeout_notify_strategy: Option<String>,
    /// Minutes.
    #[serde(default, deserialize_with = "number")]
    pub timeout: i64,
    /// Minutes.
    #[serde(default, deserialize_with = "number")]
    pub delay_time: i64,
    #[serde(default, deserialize_with = "number")]
    pub task_group_id: i64,
    #[serde(default, deserialize_with = "number")]
    pub task_group_priority: i64,
    /// -1 (or 0): none; likewise for the quotas.
    #[serde(default, deserialize_with = "number")]
    pub environment_code: i64,
    #[serde(default, deserialize_with = "number")]
    pub cpu_quota: i64,
    #[serde(default, deserialize_with = "number")]
    pub memory_max: i64,
    #[serde(default)]
    pub is_cache: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relation {
    #[serde(deserialize_with = "number")]
    pub pre_task_code: i64,
    #[serde(deserialize_with = "number")]
    pub post_task_code: i64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub crontab: String,
    #[serde(default)]
    pub timezone_id: Option<String>,
    /// Wall-clock time in `timezone_id`, `yyyy-MM-dd HH:mm:ss`.
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default)]
    pub end_time: Option<String>,
    #[serde(default)]
    pub failure_strategy: Option<String>,
    #[serde(default)]
    pub warning_type: Option<String>,
    #[serde(default)]
    pub warning_group_id: Option<i64>,
    #[serde(default, alias = "workflowInstancePriority")]
    process_instance_priority: Option<String>,
    #[serde(default)]
    pub worker_group: Option<String>,
}

/// A parameter: `prop`, `direct` (IN/OUT), `type`, `value`.
#[derive(Debug, Clone, Deserialize)]
pub struct Property {
    pub prop: String,
    #[serde(default)]
    pub direct: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub value: Option<String>,
}

/// A DolphinScheduler environment (Security → Environment Manage): shell lines by code.
#[derive(Debug, Clone, Deserialize)]
pub struct Environment {
    #[serde(deserialize_with = "number")]
    pub code: i64,
    pub name: String,
    pub config: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// Whether an item of an export (or of an environment list) is an environment rather than
/// a workflow: it has a config and no workflow definition.
fn is_environment(item: &Json) -> bool {
    item.get("config").is_some_and(Json::is_string)
        && item.get("processDefinition").is_none()
        && item.get("workflowDefinition").is_none()
}

/// Environments as DolphinScheduler's API lists them (`GET /environment/query-environment-list`:
/// `{"data": [...]}`, or the paging list's `{"data": {"totalList": [...]}}`), or a bare
/// JSON array of them.
pub fn environments(text: &str) -> anyhow::Result<Vec<Environment>> {
    let json: Json = serde_json::from_str(text).context("the environment list is not JSON")?;
    let data = json.get("data").unwrap_or(&json);
    let list = data.get("totalList").unwrap_or(data);
    let Json::Array(items) = list else {
        anyhow::bail!(
            "the environment list holds no array of environments (DolphinScheduler's \
             `GET /dolphinscheduler/environment/query-environment-list` answer)"
        );
    };
    items
        .iter()
        .map(|item| {
            serde_json::from_value(item.clone())
                .context("an environment of the list has no code, name and config")
        })
        .collect()
}

/// The export: a JSON array of workflows (a single object is taken as one), and the
/// environments among them (DolphinScheduler's export carries none; a file may have them
/// added, as its API lists them).
pub fn parse(text: &str) -> anyhow::Result<(Vec<DagData>, Vec<Environment>)> {
    let json: Json = serde_json::from_str(text).context(
        "the file is not JSON: export it from DolphinScheduler's workflow definition list (Export)",
    )?;
    let items = match json {
        Json::Array(items) => items,
        one @ Json::Object(_) => vec![one],
        _ => anyhow::bail!("the file holds no DolphinScheduler workflows (expected a JSON array)"),
    };
    let (envs, items): (Vec<Json>, Vec<Json>) = items.into_iter().partition(is_environment);
    let envs = envs
        .into_iter()
        .map(|e| {
            serde_json::from_value(e).context("an environment of the file has no code or name")
        })
        .collect::<anyhow::Result<Vec<Environment>>>()?;
    let dags = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let name = item
                .pointer("/processDefinition/name")
                .or_else(|| item.pointer("/workflowDefinition/name"))
                .and_then(Json::as_str)
                .map_or_else(
                    || format!("workflow {}", i + 1),
                    |n| format!("workflow '{n}'"),
                );
            serde_json::from_value(item).with_context(|| {
                format!("{name} of the file is not a DolphinScheduler 3.x workflow export")
            })
        })
        .collect::<anyhow::Result<Vec<DagData>>>()?;
    Ok((dags, envs))
}

impl DagData {
    /// Upstream task codes of each task, from the relations (`preTaskCode` 0: none).
    pub fn upstream(&self) -> HashMap<i64, Vec<i64>> {
        let mut up: HashMap<i64, Vec<i64>> = HashMap::new();
        for r in &self.relations {
            if r.pre_task_code != 0 {
                up.entry(r.post_task_code)
                    .or_default()
                    .push(r.pre_task_code);
            }
        }
        up
    }
}

impl Workflow {
    pub fn global_params(&self) -> anyhow::Result<Vec<Property>> {
        properties(self.global_params.as_ref(), "globalParams")
    }
}

impl Task {
    /// `taskParams` as an object, whether the file holds an object or a JSON string.
    pub fn params(&self) -> anyhow::Result<Json> {
        Ok(match &self.task_params {
            Some(Json::String(s)) if !s.trim().is_empty() => serde_json::from_str(s)
                .with_context(|| format!("task '{}': taskParams is not JSON", self.name))?,
            Some(v @ Json::Object(_)) => v.clone(),
            _ => Json::Object(Default::default()),
        })
    }

    pub fn local_params(&self) -> anyhow::Result<Vec<Property>> {
        properties(self.params()?.get("localParams"), "localParams")
            .with_context(|| format!("task '{}'", self.name))
    }
}

impl Schedule {
    pub fn priority(&self) -> Option<&str> {
        self.process_instance_priority.as_deref()
    }
}

fn properties(value: Option<&Json>, field: &str) -> anyhow::Result<Vec<Property>> {
    let list = match value {
        Some(Json::String(s)) if !s.trim().is_empty() => {
            serde_json::from_str(s).with_context(|| format!("{field} is not a JSON list"))?
        }
        Some(v @ Json::Array(_)) => v.clone(),
        _ => return Ok(Vec::new()),
    };
    serde_json::from_value(list).with_context(|| format!("{field} is not a list of parameters"))
}

/// A number, or a string holding one (the UI sends some as strings).
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Json::deserialize(d)? {
        Json::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a whole number"))),
        Json::String(s) if s.trim().is_empty() => Ok(0),
        Json::String(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("'{s}' is not a number"))),
        Json::Null => Ok(0),
        other => Err(serde::de::Error::custom(format!("{other} is not a number"))),
    }
}

/// Text, or a number or boolean written as one.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Json::deserialize(d)? {
        Json::Null => None,
        Json::String(s) => Some(s),
        other => Some(other.to_string()),
    })
}
