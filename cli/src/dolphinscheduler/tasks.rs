//! One DolphinScheduler task definition to one shoal task: its type's parameters, then
//! what every task has (upstream tasks, retries, timeout, priority, worker group, task
//! group, delay, run flag). Units: DolphinScheduler's timeouts, retry intervals and delays
//! are minutes. A DEPENDENT task's own parameters are read in `super::dependent`.

use super::export::Task;
use super::{Codes, minutes, named, params};
use anyhow::Context;
use serde_json::Value as Json;
use shoal_common::definition::{
    ConditionsSpec, HttpSpec, SqlOutput, SqlSpec, SubWorkflowSpec, SwitchCase, SwitchSpec, TaskDef,
    TimeoutStrategy,
};
use shoal_common::types::TaskType;
use std::collections::BTreeMap;

/// The task types converted; any other becomes a task that fails saying it was not
/// imported, and is named in the report.
pub const SUPPORTED: &str = "SHELL, PYTHON, HTTP, SQL, CONDITIONS, SWITCH, \
    SUB_PROCESS (SUB_WORKFLOW), DEPENDENT, SPARK, JUPYTER, K8S";

pub(super) fn convert(
    t: &Task,
    workflow: &str,
    depends: Vec<String>,
    codes: &Codes,
    report: &mut Vec<String>,
) -> anyhow::Result<TaskDef> {
    let at = t.at(workflow, codes);
    let p = t.params().context(at.clone())?;
    let mut task = TaskDef {
        name: codes.tasks[&t.code].1.clone(),
        ..TaskDef::default()
    };
    let text = |key: &str| p.get(key).and_then(Json::as_str).unwrap_or("").to_string();
    let kind = match t.task_type.as_str() {
        "SHELL" => {
            task.command = Some(text("rawScript"));
            TaskType::Shell
        }
        "PYTHON" => {
            task.script = Some(text("rawScript"));
            TaskType::Python
        }
        "HTTP" => {
            task.http = Some(http(&p, &at, report));
            TaskType::Http
        }
        "SQL" => {
            task.sql = Some(sql(&p, t, codes, &at, report)?);
            TaskType::Sql
        }
        "CONDITIONS" => {
            task.conditions = Some(conditions(&p, &depends, codes, &at, report));
            TaskType::Conditions
        }
        "SWITCH" => {
            task.switch = Some(switch(&p, codes, &at, report));
            TaskType::Switch
        }
        "SUB_PROCESS" | "SUB_WORKFLOW" => {
            task.sub_workflow = Some(sub_workflow(&p, codes, &at, report));
            TaskType::SubWorkflow
        }
        "DEPENDENT" => match super::dependent::convert(&p, t, codes, &at, report) {
            Some(spec) => {
                task.dependent = Some(spec);
                TaskType::Dependent
            }
            None => {
                task.command = Some(stand_in(
                    "none of its dependency items could be converted",
                    t,
                ));
                TaskType::Shell
            }
        },
        "SPARK" => match super::data_tasks::spark(&p, &at, report) {
            Ok(spec) => {
                task.spark = Some(spec);
                TaskType::Spark
            }
            Err(why) => not_imported(&mut task, &why, t, &at, report),
        },
        "JUPYTER" => match super::data_tasks::notebook(&p, &at, report) {
            Ok(spec) => {
                task.notebook = Some(spec);
                TaskType::Notebook
            }
            Err(why) => not_imported(&mut task, &why, t, &at, report),
        },
        "K8S" => match super::data_tasks::kubernetes(&p, &at, report) {
            Ok(spec) => {
                task.kubernetes = Some(spec);
                TaskType::Kubernetes
            }
            Err(why) => not_imported(&mut task, &why, t, &at, report),
        },
        other => {
            report.push(format!(
                "{at}: not imported, shoal has no {other} task (it supports {SUPPORTED}); \
                 it stands in the DAG as a shell task that fails saying so"
            ));
            task.command = Some(stand_in(&format!("its type {other} is not in shoal"), t));
            TaskType::Shell
        }
    };
    task.task_type = kind.to_string();
    if !matches!(t.task_type.as_str(), "SHELL" | "PYTHON" | "HTTP" | "SQL")
        && !p
            .get("resourceList")
            .and_then(Json::as_array)
            .is_none_or(Vec::is_empty)
    {
        report.push(format!("{at}: its resource files are not carried over"));
    }
    common(t, &mut task, depends, codes, &at, report)?;
    Ok(task)
}

/// A task of a supported type whose settings shoal cannot run: reported, and a stand-in.
fn not_imported(
    task: &mut TaskDef,
    why: &str,
    t: &Task,
    at: &str,
    report: &mut Vec<String>,
) -> TaskType {
    report.push(format!(
        "{at}: not imported: {why}; it stands in the DAG as a shell task that fails saying so"
    ));
    task.command = Some(stand_in(why, t));
    TaskType::Shell
}

/// The command of a shell task that fails saying why the task was not imported, so the
/// DAG keeps its shape and nothing passes that did not run.
fn stand_in(why: &str, t: &Task) -> String {
    let text = format!("DolphinScheduler task {} was not imported: {why}", t.name);
    format!("echo '{}' >&2; exit 1", text.replace('\'', ""))
}

/// What every task has.
fn common(
    t: &Task,
    task: &mut TaskDef,
    depends: Vec<String>,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> anyhow::Result<()> {
    task.depends_on = depends;
    task.params = params(&t.local_params()?, &format!("{at}: parameter"), report);
    if t.fail_retry_times > 0 {
        task.retries = u32::try_from(t.fail_retry_times)
            .with_context(|| format!("{at}: {} retries", t.fail_retry_times))?;
        if t.fail_retry_interval > 0 {
            task.retry_interval = Some(minutes(t.fail_retry_interval));
        }
    }
    if t.delay_time > 0 {
        task.delay = Some(minutes(t.delay_time));
    }
    // A dependent task's timeout went into its `dependent.timeout`.
    if t.timeout_flag.as_deref() == Some("OPEN") && t.timeout > 0 && task.dependent.is_none() {
        task.timeout = Some(minutes(t.timeout));
        let fail = matches!(
            t.timeout_notify_strategy.as_deref(),
            Some("FAILED" | "WARNFAILED")
        );
        task.timeout_strategy = if fail {
            TimeoutStrategy::Fail
        } else {
            TimeoutStrategy::Warn
        };
    }
    if let Some(p) = t.task_priority.as_deref() {
        task.priority = named(p, at)?;
    }
    if let Some(g) = t.worker_group.as_deref() {
        task.worker_group = codes.options.worker_group(g);
    }
    if t.task_group_id > 0 {
        let group = format!("ds_task_group_{}", t.task_group_id);
        report.push(format!(
            "{at}: task group {} is named '{group}': create it with `shoal task-group create {group} --slots N`",
            t.task_group_id
        ));
        task.task_group = Some(group);
        task.task_group_priority = i32::try_from(t.task_group_priority)
            .with_context(|| format!("{at}: task group priority {}", t.task_group_priority))?;
    }
    task.enabled = t.flag.as_deref() != Some("NO");
    let mut ignored = Vec::new();
    if t.environment_code > 0 {
        match codes.environments.get(&t.environment_code) {
            Some(name) if takes_environment(t) => task.environment = Some(name.clone()),
            _ if takes_environment(t) => ignored.push(format!(
                "environment {} (the export does not carry its config: pass DolphinScheduler's \
                 environment list with --environments FILE)",
                t.environment_code
            )),
            _ => ignored.push(format!(
                "environment {} (shoal runs one before shell and python tasks only)",
                t.environment_code
            )),
        }
    }
    if t.cpu_quota > 0 || t.memory_max > 0 {
        ignored.push("CPU and memory limits".to_string());
    }
    if t.is_cache.as_deref() == Some("YES") {
        ignored.push("its result cache".to_string());
    }
    if !ignored.is_empty() {
        report.push(format!("{at}: not carried over: {}", ignored.join(", ")));
    }
    Ok(())
}

/// Whether the task names an environment shoal can carry over: its type is one that runs
/// it (shell, python).
pub(super) fn takes_environment(t: &Task) -> bool {
    t.environment_code > 0 && matches!(t.task_type.as_str(), "SHELL" | "PYTHON")
}

fn http(p: &Json, at: &str, report: &mut Vec<String>) -> HttpSpec {
    let mut url = p
        .get("url")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let mut headers = BTreeMap::new();
    let mut query = Vec::new();
    let mut form = serde_json::Map::new();
    for hp in p
        .get("httpParams")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let prop = hp.get("prop").and_then(Json::as_str).unwrap_or("");
        let value = hp.get("value").and_then(Json::as_str).unwrap_or("");
        match hp.get("httpParametersType").and_then(Json::as_str) {
            Some("HEADERS") => {
                headers.insert(prop.to_string(), value.to_string());
            }
            Some("BODY") => {
                form.insert(prop.to_string(), Json::String(value.to_string()));
            }
            _ => query.push(format!("{}={}", url_encoded(prop), url_encoded(value))),
        }
    }
    if !query.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query.join("&"));
    }
    let raw_body = p.get("httpBody").and_then(Json::as_str).unwrap_or("");
    let body = if !raw_body.trim().is_empty() {
        Some(raw_body.to_string())
    } else if !form.is_empty() {
        Some(Json::Object(form).to_string())
    } else {
        None
    };
    // DolphinScheduler's default check: exactly 200.
    let mut expected_status = vec![200];
    let condition = p.get("condition").and_then(Json::as_str).unwrap_or("");
    match p.get("httpCheckCondition").and_then(Json::as_str) {
        Some("STATUS_CODE_CUSTOM") => match condition.trim().parse::<u16>() {
            Ok(code) => expected_status = vec![code],
            Err(_) => report.push(format!(
                "{at}: custom status '{condition}' is not a status code; any 2xx passes"
            )),
        },
        Some(check @ ("BODY_CONTAINS" | "BODY_NOT_CONTAINS")) => report.push(format!(
            "{at}: the check {check} '{condition}' is not carried over; status 200 passes"
        )),
        _ => {}
    }
    report.push(format!(
        "{at}: the response body is not an output (DolphinScheduler's '<task>.response'); \
         name what to keep with `http.outputs: {{name: $.json.path}}`"
    ));
    HttpSpec {
        url,
        method: p
            .get("httpMethod")
            .and_then(Json::as_str)
            .unwrap_or("GET")
            .to_string(),
        headers,
        body,
        expected_status,
        outputs: BTreeMap::new(),
    }
}

fn sql(
    p: &Json,
    t: &Task,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> anyhow::Result<SqlSpec> {
    let db = p
        .get("type")
        .and_then(Json::as_str)
        .unwrap_or("db")
        .to_lowercase();
    let id = p
        .get("datasource")
        .map(|d| d.to_string().trim_matches('"').to_string())
        .unwrap_or_default();
    let datasource = match codes.options.datasources.get(&id) {
        Some(name) => name.clone(),
        None => {
            let name = format!("{db}_{id}");
            report.push(format!(
                "{at}: datasource {id} ({}) is named '{name}': start workers with `--datasource {name}=URL` (or import with `--datasource {id}=NAME`)",
                db.to_uppercase()
            ));
            name
        }
    };
    let query_kind = p
        .get("sqlType")
        .map(|v| v.to_string().trim_matches('"').to_string());
    let outs = t
        .local_params()?
        .iter()
        .any(|l| l.direct.as_deref() == Some("OUT"));
    // A query's columns fill its OUT parameters in DolphinScheduler: the first row here.
    let output = match (query_kind.as_deref(), outs) {
        (Some("0"), true) => SqlOutput::FirstRow,
        _ => SqlOutput::None,
    };
    for key in ["preStatements", "postStatements"] {
        let statements = p.get(key).and_then(Json::as_array).map_or(0, Vec::len);
        if statements > 0 {
            report.push(format!(
                "{at}: {statements} {key} not carried over (one query per sql task: put them in tasks of their own)"
            ));
        }
    }
    if p.get("sendEmail").and_then(Json::as_bool) == Some(true) {
        report.push(format!("{at}: mailing the result is not carried over"));
    }
    Ok(SqlSpec {
        datasource,
        query: p
            .get("sql")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        output,
    })
}

fn conditions(
    p: &Json,
    depends: &[String],
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> ConditionsSpec {
    let dependence = p.get("dependence");
    let mut all_and = dependence
        .and_then(|d| d.get("relation"))
        .and_then(Json::as_str)
        != Some("OR");
    let mut items: Vec<(String, String)> = Vec::new();
    for group in list(dependence.and_then(|d| d.get("dependTaskList"))) {
        all_and &= group.get("relation").and_then(Json::as_str) != Some("OR");
        for item in list(group.get("dependItemList")) {
            let name = code(item.get("depTaskCode"))
                .and_then(|c| codes.tasks.get(&c))
                .map(|(_, n)| n.clone())
                .unwrap_or_default();
            let status = item
                .get("status")
                .and_then(Json::as_str)
                .unwrap_or("SUCCESS");
            items.push((name, status.to_string()));
        }
    }
    let result = p.get("conditionResult");
    let names = |key: &str| task_names(result.and_then(|r| r.get(key)), codes);
    let (success, failure) = (names("successNode"), names("failedNode"));
    let mut listed: Vec<&str> = items.iter().map(|(n, _)| n.as_str()).collect();
    listed.sort_unstable();
    listed.dedup();
    let mut upstream: Vec<&str> = depends.iter().map(String::as_str).collect();
    upstream.sort_unstable();
    // shoal's success branch runs when every upstream task passed.
    let exact = all_and && listed == upstream;
    let all = |s: &str| items.iter().all(|(_, status)| status == s);
    let (yes, no, same) = if all("SUCCESS") {
        (success, failure, exact)
    } else if all("FAILURE") && items.len() == 1 {
        // "it failed" holds exactly when "every upstream passed" does not.
        (failure, success, exact)
    } else {
        (success, failure, false)
    };
    if !same {
        report.push(format!(
            "{at}: its condition ({}) is converted as 'the success branch when every upstream task passed'",
            items
                .iter()
                .map(|(n, s)| format!("{n} {s}"))
                .collect::<Vec<_>>()
                .join(if all_and { " and " } else { " or " })
        ));
    }
    ConditionsSpec {
        when: None,
        success: yes,
        failure: no,
    }
}

fn switch(p: &Json, codes: &Codes, at: &str, report: &mut Vec<String>) -> SwitchSpec {
    let result = p.get("switchResult");
    let targets = |v: Option<&Json>| task_names(v, codes);
    let mut cases = Vec::new();
    for case in list(result.and_then(|r| r.get("dependTaskList"))) {
        let when = case.get("condition").and_then(Json::as_str).unwrap_or("");
        let then = targets(case.get("nextNode"));
        if then.len() > 1 {
            report.push(format!(
                "{at}: the case '{when}' leads to {} tasks; only '{}' is kept",
                then.len(),
                then[0]
            ));
        }
        if let Err(e) = shoal_common::expr::parse(when) {
            report.push(format!(
                "{at}: the case '{when}' is not an expression shoal reads ({e}); it is left out"
            ));
            continue;
        }
        if let Some(first) = then.into_iter().next() {
            cases.push(SwitchCase {
                when: when.to_string(),
                then: first,
            });
        }
    }
    SwitchSpec {
        cases,
        default: targets(result.and_then(|r| r.get("nextNode")))
            .into_iter()
            .next(),
    }
}

fn sub_workflow(p: &Json, codes: &Codes, at: &str, report: &mut Vec<String>) -> SubWorkflowSpec {
    let child = code(
        p.get("processDefinitionCode")
            .or(p.get("workflowDefinitionCode")),
    );
    let workflow = match child.and_then(|c| codes.workflows.get(&c)) {
        Some(name) => name.clone(),
        None => {
            let c = child.map_or("?".to_string(), |c| c.to_string());
            report.push(format!(
                "{at}: its child workflow (code {c}) is not in the file; the task names 'workflow_{c}': import that workflow under this name"
            ));
            format!("workflow_{c}")
        }
    };
    // The parent's global parameters are added once the workflow's are known.
    SubWorkflowSpec {
        workflow,
        project: None,
        params: BTreeMap::new(),
    }
}

/// `text` percent-encoded for a URL's query, its `${...}` parameters left for shoal to fill
/// in (their values are not encoded then: DolphinScheduler does not encode them either).
pub(super) fn url_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with("${")
            && let Some(end) = rest.find('}')
        {
            out.push_str(&rest[..=end]);
            rest = &rest[end + 1..];
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~') {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The names of the tasks a field names by code: one code (as the UI writes a switch's
/// `nextNode`) or a list of them.
fn task_names(v: Option<&Json>, codes: &Codes) -> Vec<String> {
    let items = match v {
        Some(Json::Array(a)) => a.iter().collect(),
        Some(one) => vec![one],
        None => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|c| code(Some(c)))
        .filter_map(|c| codes.tasks.get(&c).map(|(_, n)| n.clone()))
        .collect()
}

pub(super) fn list(v: Option<&Json>) -> &[Json] {
    v.and_then(Json::as_array).map_or(&[], Vec::as_slice)
}

/// A code: a number, or a string holding one.
pub(super) fn code(v: Option<&Json>) -> Option<i64> {
    match v? {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
