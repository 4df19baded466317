//! A DolphinScheduler DEPENDENT task as a shoal dependent task: its groups of items (a
//! workflow's run, or one task of it, on the dates of a cycle), how often it checks, and
//! how long it waits. Its check interval is in seconds, its waiting time in minutes.

use super::export::Task;
use super::tasks::{code, list};
use super::{Codes, minutes};
use serde_json::Value as Json;
use shoal_common::definition::{
    DateCycle, DependGroup, DependItem, DependentSpec, OnDependFailure, Relation,
};
use std::time::Duration;

/// The task's dependency, or None (said in the report) when none of its items could be
/// converted.
pub(super) fn convert(
    p: &Json,
    t: &Task,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> Option<DependentSpec> {
    let dependence = p.get("dependence");
    let relation = |v: Option<&Json>| match v.and_then(|r| r.get("relation")).and_then(Json::as_str)
    {
        Some("OR") => Relation::Or,
        _ => Relation::And,
    };
    let mut groups = Vec::new();
    for group in list(dependence.and_then(|d| d.get("dependTaskList"))) {
        let items: Vec<DependItem> = list(group.get("dependItemList"))
            .iter()
            .filter_map(|item| dependent_item(item, codes, at, report))
            .collect();
        if items.is_empty() {
            continue;
        }
        groups.push(DependGroup {
            relation: relation(Some(group)),
            items,
        });
    }
    if groups.is_empty() {
        // Nothing left to wait for: a task that fails saying so, rather than one that passes.
        report.push(format!(
            "{at}: none of its dependency items could be converted; it stands in the DAG as a shell task that fails saying so"
        ));
        return None;
    }
    let seconds = dependence
        .and_then(|d| d.get("checkInterval"))
        .and_then(|c| code(Some(c)))
        .unwrap_or(10)
        .max(1);
    let waiting = dependence
        .and_then(|d| d.get("failurePolicy"))
        .and_then(Json::as_str)
        == Some("DEPENDENT_FAILURE_WAITING");
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
    if timeout.is_none() {
        report.push(format!(
            "{at}: DolphinScheduler waits without end; shoal gives up after dependent.timeout (default 1h): set it if that is too short"
        ));
    }
    Some(DependentSpec {
        relation: relation(dependence),
        groups,
        check_interval: Some(Duration::from_secs(seconds.unsigned_abs())),
        timeout: timeout.map(minutes),
        on_failure: if waiting {
            OnDependFailure::Wait
        } else {
            OnDependFailure::Fail
        },
        ..DependentSpec::default()
    })
}

fn dependent_item(
    item: &Json,
    codes: &Codes,
    at: &str,
    report: &mut Vec<String>,
) -> Option<DependItem> {
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
    let task = match code(item.get("depTaskCode")).unwrap_or(0) {
        // The workflow's run (0), or all its tasks (-1): a run succeeds when they pass.
        0 | -1 => None,
        task => match codes.tasks.get(&task) {
            Some((owner, name)) if owner == workflow => Some(name.clone()),
            _ => {
                report.push(format!(
                    "{at}: task code {task} of {workflow} is not in the file; the item waits for the whole run"
                ));
                None
            }
        },
    };
    Some(DependItem {
        workflow: workflow.clone(),
        project: None,
        task,
        date,
        pass_outputs: item.get("parameterPassing").and_then(Json::as_bool) == Some(true),
    })
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
