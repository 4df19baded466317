//! One DolphinScheduler task definition to one shoal task: its type's parameters, then
//! what every task has (upstream tasks, retries, timeout, priority, worker group, task
//! group, delay, run flag). Units: DolphinScheduler's timeouts, retry intervals and delays
//! are minutes, a dependent's check interval seconds.

use super::export::Task;
use super::{Codes, params};
use anyhow::Context;
use serde_json::Value as Json;
use serde_norway::{Mapping, Value};
use shoal_common::definition::DateCycle;

/// The task types converted; any other becomes a task that fails saying it was not
/// imported, and is named in the report.
pub const SUPPORTED: &str =
    "SHELL, PYTHON, HTTP, SQL, CONDITIONS, SWITCH, SUB_PROCESS (SUB_WORKFLOW), DEPENDENT";

pub(super) fn convert(
    t: &Task,
    workflow: &str,
    depends: Vec<String>,
    codes: &Codes,
    report: &mut Vec<String>,
) -> anyhow::Result<Mapping> {
    let at = t.at(workflow, codes);
    let p = t.params().context(at.clone())?;
    let mut m = Mapping::new();
    m.insert("name".into(), codes.tasks[&t.code].1.clone().into());
    let text = |key: &str| p.get(key).and_then(Json::as_str).unwrap_or("").to_string();
    let mut dependent_timeout = false;
    match t.task_type.as_str() {
        "SHELL" => {
            m.insert("type".into(), "shell".into());
            m.insert("command".into(), text("rawScript").into());
        }
        "PYTHON" => {
            m.insert("type".into(), "python".into());
            m.insert("script".into(), text("rawScript").into());
        }
        "HTTP" => http(&p, &mut m, &at, report),
        "SQL" => sql(&p, t, &mut m, codes, &at, report)?,
        "CONDITIONS" => conditions(&p, &depends, &mut m, codes, &at, report),
        "SWITCH" => switch(&p, &mut m, codes, &at, report),
        "SUB_PROCESS" | "SUB_WORKFLOW" => sub_workflow(&p, &mut m, codes, &at, report),
        "DEPENDENT" => {
            dependent_timeout = dependent(&p, t, &mut m, codes, &at, report);
        }
        other => {
            report.push(format!(
                "{at}: not imported, shoal has no {other} task (it supports {SUPPORTED}); \
                 it stands in the DAG as a shell task that fails saying so"
            ));
            stand_in(&mut m, &format!("its type {other} is not in shoal"), t);
        }
    }
    if !matches!(t.task_type.as_str(), "SHELL" | "PYTHON" | "HTTP" | "SQL")
        && !p
            .get("resourceList")
            .and_then(Json::as_array)
            .is_none_or(Vec::is_empty)
    {
        report.push(format!("{at}: its resource files are not carried over"));
    }
    common(t, &mut m, depends, dependent_timeout, codes, &at, report)?;
    Ok(m)
}

/// A shell task that fails saying why the task was not imported, so the DAG keeps its
/// shape and nothing passes that did not run.
fn stand_in(m: &mut Mapping, why: &str, t: &Task) {
    m.insert("type".into(), "shell".into());
    let text = format!("DolphinScheduler task {} was not imported: {why}", t.name);
    let say = format!("echo '{}' >&2; exit 1", text.replace('\'', ""));
    m.insert("command".into(), say.into());
}

/// What every task has.
fn common(
    t: &Task,
    m: &mut Mapping,
    depends: Vec<String>,
    dependent_timeout: bool,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> anyhow::Result<()> {
    if !depends.is_empty() {
        m.insert("depends_on".into(), depends.into());
    }
    let local = params(&t.local_params()?, &format!("{at}: parameter"), report);
    if !local.is_empty() {
        m.insert("params".into(), Value::Mapping(local));
    }
    if t.fail_retry_times > 0 {
        m.insert("retries".into(), t.fail_retry_times.into());
        if t.fail_retry_interval > 0 {
            m.insert(
                "retry_interval".into(),
                format!("{}m", t.fail_retry_interval).into(),
            );
        }
    }
    if t.delay_time > 0 {
        m.insert("delay".into(), format!("{}m", t.delay_time).into());
    }
    // A dependent task's timeout went into its `dependent.timeout`.
    if t.timeout_flag.as_deref() == Some("OPEN") && t.timeout > 0 && !dependent_timeout {
        m.insert("timeout".into(), format!("{}m", t.timeout).into());
        let fail = matches!(
            t.timeout_notify_strategy.as_deref(),
            Some("FAILED" | "WARNFAILED")
        );
        m.insert(
            "timeout_strategy".into(),
            if fail { "fail" } else { "warn" }.into(),
        );
    }
    if let Some(p) = t.task_priority.as_deref().filter(|p| *p != "MEDIUM") {
        m.insert("priority".into(), p.to_lowercase().into());
    }
    let group = t
        .worker_group
        .as_deref()
        .map(|g| codes.options.worker_group(g));
    if let Some(g) = group.filter(|g| g != "default") {
        m.insert("worker_group".into(), g.into());
    }
    if t.task_group_id > 0 {
        let group = format!("ds_task_group_{}", t.task_group_id);
        report.push(format!(
            "{at}: task group {} is named '{group}': create it with `shoal task-group create {group} --slots N`",
            t.task_group_id
        ));
        m.insert("task_group".into(), group.into());
        if t.task_group_priority != 0 {
            m.insert("task_group_priority".into(), t.task_group_priority.into());
        }
    }
    if t.flag.as_deref() == Some("NO") {
        m.insert("enabled".into(), false.into());
    }
    let mut ignored = Vec::new();
    if t.environment_code > 0 {
        ignored.push(format!("environment {}", t.environment_code));
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

fn http(p: &Json, m: &mut Mapping, at: &str, report: &mut Vec<String>) {
    m.insert("type".into(), "http".into());
    let mut spec = Mapping::new();
    let mut url = p
        .get("url")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let mut headers = Mapping::new();
    let mut query = Vec::new();
    let mut body = serde_json::Map::new();
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
                headers.insert(prop.into(), value.into());
            }
            Some("BODY") => {
                body.insert(prop.to_string(), Json::String(value.to_string()));
            }
            _ => query.push(format!("{}={}", url_encoded(prop), url_encoded(value))),
        }
    }
    if !query.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query.join("&"));
    }
    spec.insert("url".into(), url.into());
    let method = p.get("httpMethod").and_then(Json::as_str).unwrap_or("GET");
    spec.insert("method".into(), method.into());
    if !headers.is_empty() {
        spec.insert("headers".into(), Value::Mapping(headers));
    }
    let raw_body = p.get("httpBody").and_then(Json::as_str).unwrap_or("");
    if !raw_body.trim().is_empty() {
        spec.insert("body".into(), raw_body.into());
    } else if !body.is_empty() {
        spec.insert("body".into(), Json::Object(body).to_string().into());
    }
    let condition = p.get("condition").and_then(Json::as_str).unwrap_or("");
    match p.get("httpCheckCondition").and_then(Json::as_str) {
        Some("STATUS_CODE_CUSTOM") => match condition.trim().parse::<u16>() {
            Ok(code) => {
                spec.insert("expected_status".into(), vec![code].into());
            }
            Err(_) => report.push(format!(
                "{at}: custom status '{condition}' is not a status code; any 2xx passes"
            )),
        },
        Some(check @ ("BODY_CONTAINS" | "BODY_NOT_CONTAINS")) => report.push(format!(
            "{at}: the check {check} '{condition}' is not carried over; status 200 passes"
        )),
        _ => {}
    }
    if !spec.contains_key("expected_status") {
        // DolphinScheduler's default check: exactly 200.
        spec.insert("expected_status".into(), vec![200u16].into());
    }
    report.push(format!(
        "{at}: the response body is not an output (DolphinScheduler's '<task>.response'); \
         name what to keep with `http.outputs: {{name: $.json.path}}`"
    ));
    m.insert("http".into(), Value::Mapping(spec));
}

fn sql(
    p: &Json,
    t: &Task,
    m: &mut Mapping,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> anyhow::Result<()> {
    m.insert("type".into(), "sql".into());
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
        (Some("0"), true) => "first_row",
        _ => "none",
    };
    let mut spec = Mapping::new();
    spec.insert("datasource".into(), datasource.into());
    spec.insert(
        "query".into(),
        p.get("sql").and_then(Json::as_str).unwrap_or("").into(),
    );
    spec.insert("output".into(), output.into());
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
    m.insert("sql".into(), Value::Mapping(spec));
    Ok(())
}

fn conditions(
    p: &Json,
    depends: &[String],
    m: &mut Mapping,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) {
    m.insert("type".into(), "conditions".into());
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
    let mut spec = Mapping::new();
    spec.insert("success".into(), yes.into());
    spec.insert("failure".into(), no.into());
    m.insert("conditions".into(), Value::Mapping(spec));
}

fn switch(p: &Json, m: &mut Mapping, codes: &Codes, at: &str, report: &mut Vec<String>) {
    m.insert("type".into(), "switch".into());
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
            let mut c = Mapping::new();
            c.insert("when".into(), when.into());
            c.insert("then".into(), first.into());
            cases.push(Value::Mapping(c));
        }
    }
    let mut spec = Mapping::new();
    spec.insert("cases".into(), cases.into());
    if let Some(default) = targets(result.and_then(|r| r.get("nextNode")))
        .into_iter()
        .next()
    {
        spec.insert("default".into(), default.into());
    }
    m.insert("switch".into(), Value::Mapping(spec));
}

fn sub_workflow(p: &Json, m: &mut Mapping, codes: &Codes, at: &str, report: &mut Vec<String>) {
    m.insert("type".into(), "sub_workflow".into());
    let child = code(
        p.get("processDefinitionCode")
            .or(p.get("workflowDefinitionCode")),
    );
    let name = match child.and_then(|c| codes.workflows.get(&c)) {
        Some(name) => name.clone(),
        None => {
            let c = child.map_or("?".to_string(), |c| c.to_string());
            report.push(format!(
                "{at}: its child workflow (code {c}) is not in the file; the task names 'workflow_{c}': import that workflow under this name"
            ));
            format!("workflow_{c}")
        }
    };
    let mut spec = Mapping::new();
    spec.insert("workflow".into(), name.into());
    m.insert("sub_workflow".into(), Value::Mapping(spec));
}

/// Returns whether the task's timeout became the dependency's (false for a stand-in).
fn dependent(
    p: &Json,
    t: &Task,
    m: &mut Mapping,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> bool {
    let dependence = p.get("dependence");
    let relation = |v: Option<&Json>| match v.and_then(|r| r.get("relation")).and_then(Json::as_str)
    {
        Some("OR") => "or",
        _ => "and",
    };
    let mut spec = Mapping::new();
    spec.insert("relation".into(), relation(dependence).into());
    let mut groups = Vec::new();
    for group in list(dependence.and_then(|d| d.get("dependTaskList"))) {
        let mut items = Vec::new();
        for item in list(group.get("dependItemList")) {
            items.extend(dependent_item(item, codes, at, report).map(Value::Mapping));
        }
        if items.is_empty() {
            continue;
        }
        let mut g = Mapping::new();
        g.insert("relation".into(), relation(Some(group)).into());
        g.insert("items".into(), items.into());
        groups.push(Value::Mapping(g));
    }
    if groups.is_empty() {
        // Nothing left to wait for: a task that fails saying so, rather than one that passes.
        report.push(format!(
            "{at}: none of its dependency items could be converted; it stands in the DAG as a shell task that fails saying so"
        ));
        stand_in(m, "none of its dependency items could be converted", t);
        return false;
    }
    m.insert("type".into(), "dependent".into());
    spec.insert("groups".into(), groups.into());
    let seconds = dependence
        .and_then(|d| d.get("checkInterval"))
        .and_then(|c| code(Some(c)))
        .unwrap_or(10)
        .max(1);
    spec.insert("check_interval".into(), format!("{seconds}s").into());
    let waiting = dependence
        .and_then(|d| d.get("failurePolicy"))
        .and_then(Json::as_str)
        == Some("DEPENDENT_FAILURE_WAITING");
    if waiting {
        spec.insert("on_failure".into(), "wait".into());
    }
    let wait_minutes = dependence
        .and_then(|d| d.get("failureWaitingTime"))
        .and_then(|c| code(Some(c)))
        .filter(|m| *m > 0);
    let timeout = match (
        t.timeout_flag.as_deref() == Some("OPEN") && t.timeout > 0,
        wait_minutes,
    ) {
        (true, _) => Some(t.timeout),
        (false, Some(w)) if waiting => Some(w),
        _ => None,
    };
    match timeout {
        Some(minutes) => {
            spec.insert("timeout".into(), format!("{minutes}m").into());
        }
        None => report.push(format!(
            "{at}: DolphinScheduler waits without end; shoal gives up after dependent.timeout (default 1h): set it if that is too short"
        )),
    }
    m.insert("dependent".into(), Value::Mapping(spec));
    true
}

fn dependent_item(
    item: &Json,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> Option<Mapping> {
    let definition = code(item.get("definitionCode"));
    let Some(workflow) = definition.and_then(|c| codes.workflows.get(&c)) else {
        report.push(format!(
            "{at}: the item on workflow code {} is left out: that workflow is not in the file (export it together)",
            definition.map_or("?".to_string(), |c| c.to_string())
        ));
        return None;
    };
    let date_value = item
        .get("dateValue")
        .and_then(Json::as_str)
        .unwrap_or("today");
    let Some(date) = date_cycle(date_value) else {
        report.push(format!(
            "{at}: the item on {workflow} is left out: date '{date_value}' is unknown"
        ));
        return None;
    };
    if date_value == "last24Hours" {
        report.push(format!(
            "{at}: {workflow} last24Hours is the 24 hours before this one here (DolphinScheduler: yesterday 01:00 to today 00:59)"
        ));
    }
    let mut m = Mapping::new();
    m.insert("workflow".into(), workflow.clone().into());
    match code(item.get("depTaskCode")).unwrap_or(0) {
        // The workflow's run (0), or all its tasks (-1): a run succeeds when they pass.
        0 | -1 => {}
        task => match codes.tasks.get(&task) {
            Some((owner, name)) if owner == workflow => {
                m.insert("task".into(), name.clone().into());
            }
            _ => report.push(format!(
                "{at}: task code {task} of {workflow} is not in the file; the item waits for the whole run"
            )),
        },
    }
    if item.get("parameterPassing").and_then(Json::as_bool) == Some(true) {
        m.insert("pass_outputs".into(), true.into());
    }
    if date != DateCycle::Today {
        m.insert("date".into(), date.to_string().into());
    }
    Some(m)
}

/// DolphinScheduler's `dateValue` as a shoal date cycle.
pub(super) fn date_cycle(value: &str) -> Option<DateCycle> {
    let snake = match value {
        "currentHour" => "current_hour".to_string(),
        "last24Hours" => "last_24_hours".to_string(),
        "thisWeek" => "this_week".to_string(),
        "lastWeek" => "last_week".to_string(),
        "thisMonth" => "this_month".to_string(),
        "thisMonthBegin" => "this_month_begin".to_string(),
        "lastMonth" => "last_month".to_string(),
        "lastMonthBegin" => "last_month_begin".to_string(),
        "lastMonthEnd" => "last_month_end".to_string(),
        "today" => "today".to_string(),
        other => {
            let rest = other.strip_prefix("last")?;
            if let Some(n) = rest.strip_suffix("Hours").or(rest.strip_suffix("Hour")) {
                format!("last_{n}_hours")
            } else if let Some(n) = rest.strip_suffix("Days") {
                format!("last_{n}_days")
            } else {
                format!("last_{}", rest.to_lowercase())
            }
        }
    };
    snake.parse().ok()
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

fn list(v: Option<&Json>) -> &[Json] {
    v.and_then(Json::as_array).map_or(&[], Vec::as_slice)
}

/// A code: a number, or a string holding one.
fn code(v: Option<&Json>) -> Option<i64> {
    match v? {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
