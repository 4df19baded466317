//! `type: dependent`: waits until runs of other workflows (or one task of them) for dates
//! relative to this run's time have succeeded, as DolphinScheduler's dependent task does.
//! Items combine into groups and groups into the whole by `and`/`or`; each item's date
//! cycle names one or more intervals, and every interval's last run must have succeeded.
//! This module holds the shape, its validation, the date arithmetic and how item results
//! combine; the master polls the store for each item's result.

use super::{DefinitionError, TaskDef, WorkflowDef};
use crate::schedule::{day_bounds, local_time};
use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Weekday};
use petgraph::algo::{condensation, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A dependent task without its own timeout gives up after this long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// How often a dependent task checks by default (as DolphinScheduler's `checkInterval`).
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// The most days or hours a `last_N_days`/`last_N_hours` cycle may span.
const MAX_SPAN: u32 = 366;

/// `dependent:` either one item written inline (`workflow`, `project`, `task`, `date`) or
/// `groups` of items; `relation` combines the groups.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DependentSpec {
    /// One item inline: the workflow whose run is awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Default: this run's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Wait for this task of the run instead of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Which dates (default `today`), see [`DateCycle`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "yesterday")]
    pub date: Option<DateCycle>,
    /// The awaited run's outputs become this task's (see [`DependItem::pass_outputs`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pass_outputs: bool,
    /// How the groups combine (default `and`).
    #[serde(default, skip_serializing_if = "Relation::is_and")]
    pub relation: Relation,
    /// Items combined by each group's `relation`; instead of an inline item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<DependGroup>,
    /// How often to check (default 10s).
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub check_interval: Option<Duration>,
    /// Give up (the task fails) after this long; default 1h.
    #[serde(
        default,
        with = "crate::duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30m")]
    pub timeout: Option<Duration>,
    /// What a failed run of a dependency does: `fail` the task at once (default) or `wait`
    /// (for a rerun to succeed, up to the timeout).
    #[serde(default, skip_serializing_if = "OnDependFailure::is_fail")]
    pub on_failure: OnDependFailure,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DependGroup {
    /// How the items combine (default `and`).
    #[serde(default, skip_serializing_if = "Relation::is_and")]
    pub relation: Relation,
    pub items: Vec<DependItem>,
}

/// One awaited run: a workflow (or one task of it) on the dates of a cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DependItem {
    pub workflow: String,
    /// Default: this run's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Default `today`.
    #[serde(default, skip_serializing_if = "DateCycle::is_today")]
    #[schema(value_type = String, example = "last_7_days")]
    pub date: DateCycle,
    /// The outputs of the awaited run (its last interval's) become this task's outputs,
    /// for the tasks after it (DolphinScheduler's parameter passing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pass_outputs: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    #[default]
    And,
    Or,
}

impl Relation {
    fn is_and(&self) -> bool {
        *self == Relation::And
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDependFailure {
    #[default]
    Fail,
    Wait,
}

impl OnDependFailure {
    fn is_fail(&self) -> bool {
        *self == OnDependFailure::Fail
    }
}

/// The dates an item covers, relative to the instant the run stands for (its schedule time,
/// else its start) in the run's zone. Each names one or more intervals (an hour or a day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DateCycle {
    /// `current_hour`
    CurrentHour,
    /// `last_hour` (`last_1_hours`), `last_N_hours`: each of the N hours before this one.
    LastHours(u32),
    #[default]
    Today,
    /// `yesterday` (`last_1_days`), `last_N_days`: each of the N days before today.
    LastDays(u32),
    /// Each day from Monday to today.
    ThisWeek,
    /// Each day of last week, Monday to Sunday.
    LastWeek,
    /// `last_monday` … `last_sunday`: that day of last week.
    LastWeekday(Weekday),
    /// Each day from the 1st of this month to today.
    ThisMonth,
    ThisMonthBegin,
    /// Each day of last month.
    LastMonth,
    LastMonthBegin,
    LastMonthEnd,
}

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

impl DateCycle {
    fn is_today(&self) -> bool {
        *self == DateCycle::Today
    }

    /// The intervals [start, end) in ms, oldest first, for a run standing for `at_ms` in
    /// `timezone` (UTC when None), each with a label for messages. Dates out of the
    /// calendar's range give none.
    pub fn intervals(&self, at_ms: i64, timezone: Option<&str>) -> Vec<Interval> {
        let local = local_time(at_ms, timezone);
        let today = local.date();
        let days = |from: Option<NaiveDate>, to: Option<NaiveDate>| -> Vec<Interval> {
            let (Some(from), Some(to)) = (from, to) else {
                return Vec::new();
            };
            from.iter_days()
                .take_while(|d| *d <= to)
                .map(|d| {
                    let (start, end) = day_bounds(d, timezone);
                    Interval {
                        start,
                        end,
                        label: d.to_string(),
                    }
                })
                .collect()
        };
        let back = |d: NaiveDate, n: u32| d.checked_sub_signed(TimeDelta::days(i64::from(n)));
        let monday = back(today, today.weekday().num_days_from_monday());
        let last_monday = monday.and_then(|m| back(m, 7));
        let first = today.with_day(1);
        let last_month_end = first.and_then(|f| f.pred_opt());
        let last_month_first = last_month_end.and_then(|e| e.with_day(1));
        let hours = |back: u32, until: u32| hours(at_ms, &local, back, until, timezone);
        match *self {
            DateCycle::CurrentHour => hours(0, 0),
            DateCycle::LastHours(n) => hours(n, 1),
            DateCycle::Today => days(Some(today), Some(today)),
            DateCycle::LastDays(n) => days(back(today, n), back(today, 1)),
            DateCycle::ThisWeek => days(monday, Some(today)),
            DateCycle::LastWeek => days(last_monday, monday.and_then(|m| back(m, 1))),
            DateCycle::LastWeekday(w) => {
                let day = last_monday.and_then(|m| {
                    m.checked_add_signed(TimeDelta::days(i64::from(w.num_days_from_monday())))
                });
                days(day, day)
            }
            DateCycle::ThisMonth => days(first, Some(today)),
            DateCycle::ThisMonthBegin => days(first, first),
            DateCycle::LastMonth => days(last_month_first, last_month_end),
            DateCycle::LastMonthBegin => days(last_month_first, last_month_first),
            DateCycle::LastMonthEnd => days(last_month_end, last_month_end),
        }
    }
}

/// Hour intervals from `back` hours before the local hour holding `at_ms` to `until` hours
/// before it (both inclusive; `(0, 0)` is that hour). Hours are counted in real time back
/// from the instant that hour began, so a clock change neither empties nor doubles one;
/// labels are local.
fn hours(
    at_ms: i64,
    local: &NaiveDateTime,
    back: u32,
    until: u32,
    timezone: Option<&str>,
) -> Vec<Interval> {
    const HOUR: i64 = 3_600_000;
    let into_hour = i64::from(local.minute()) * 60_000
        + i64::from(local.second()) * 1_000
        + i64::from(local.nanosecond() / 1_000_000);
    let hour_start = at_ms.saturating_sub(into_hour);
    (until..=back)
        .rev()
        .map(|k| {
            let start = hour_start.saturating_sub(i64::from(k) * HOUR);
            Interval {
                start,
                end: start.saturating_add(HOUR),
                label: local_time(start, timezone)
                    .format("%Y-%m-%d %H:%M")
                    .to_string(),
            }
        })
        .collect()
}

/// One interval a dependency item covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    pub start: i64,
    pub end: i64,
    pub label: String,
}

impl fmt::Display for DateCycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DateCycle::CurrentHour => f.write_str("current_hour"),
            DateCycle::LastHours(1) => f.write_str("last_hour"),
            DateCycle::LastHours(n) => write!(f, "last_{n}_hours"),
            DateCycle::Today => f.write_str("today"),
            DateCycle::LastDays(1) => f.write_str("yesterday"),
            DateCycle::LastDays(n) => write!(f, "last_{n}_days"),
            DateCycle::ThisWeek => f.write_str("this_week"),
            DateCycle::LastWeek => f.write_str("last_week"),
            DateCycle::LastWeekday(w) => {
                let name = WEEKDAYS.iter().find(|(_, d)| d == w).map_or("", |(n, _)| n);
                write!(f, "last_{name}")
            }
            DateCycle::ThisMonth => f.write_str("this_month"),
            DateCycle::ThisMonthBegin => f.write_str("this_month_begin"),
            DateCycle::LastMonth => f.write_str("last_month"),
            DateCycle::LastMonthBegin => f.write_str("last_month_begin"),
            DateCycle::LastMonthEnd => f.write_str("last_month_end"),
        }
    }
}

/// Every name a date cycle accepts, for error messages.
pub const DATE_CYCLES: &str = "current_hour, last_hour, last_N_hours, today, yesterday, \
     last_N_days, this_week, last_week, last_monday … last_sunday, this_month, this_month_begin, \
     last_month, last_month_begin, last_month_end";

impl FromStr for DateCycle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown date '{s}' (use {DATE_CYCLES})");
        let span = |n: &str| {
            n.parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_SPAN).contains(n))
                .ok_or_else(|| format!("date '{s}': N must be 1 to {MAX_SPAN}"))
        };
        Ok(match s {
            "current_hour" => DateCycle::CurrentHour,
            "last_hour" => DateCycle::LastHours(1),
            "today" => DateCycle::Today,
            "yesterday" => DateCycle::LastDays(1),
            "this_week" => DateCycle::ThisWeek,
            "last_week" => DateCycle::LastWeek,
            "this_month" => DateCycle::ThisMonth,
            "this_month_begin" => DateCycle::ThisMonthBegin,
            "last_month" => DateCycle::LastMonth,
            "last_month_begin" => DateCycle::LastMonthBegin,
            "last_month_end" => DateCycle::LastMonthEnd,
            _ => {
                let rest = s.strip_prefix("last_").ok_or_else(bad)?;
                if let Some((_, day)) = WEEKDAYS.iter().find(|(n, _)| *n == rest) {
                    DateCycle::LastWeekday(*day)
                } else if let Some(n) = rest.strip_suffix("_hours") {
                    DateCycle::LastHours(span(n)?)
                } else if let Some(n) = rest.strip_suffix("_days") {
                    DateCycle::LastDays(span(n)?)
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

impl TryFrom<String> for DateCycle {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<DateCycle> for String {
    fn from(c: DateCycle) -> String {
        c.to_string()
    }
}

impl DependentSpec {
    /// The groups to check: `groups`, or one group of the inline item.
    pub fn resolved_groups(&self) -> Vec<DependGroup> {
        match &self.workflow {
            Some(workflow) => vec![DependGroup {
                relation: Relation::And,
                items: vec![DependItem {
                    workflow: workflow.clone(),
                    project: self.project.clone(),
                    task: self.task.clone(),
                    date: self.date.unwrap_or_default(),
                    pass_outputs: self.pass_outputs,
                }],
            }],
            None => self.groups.clone(),
        }
    }

    /// The projects its items name (those that name one).
    pub fn projects(&self) -> Vec<&str> {
        let inline = self.project.as_deref();
        let grouped =
            (self.groups.iter()).flat_map(|g| g.items.iter().filter_map(|i| i.project.as_deref()));
        inline.into_iter().chain(grouped).collect()
    }

    /// Every workflow it names, as (project or None for the run's own, workflow).
    pub fn workflows(&self) -> Vec<(Option<String>, String)> {
        self.resolved_groups()
            .into_iter()
            .flat_map(|g| g.items)
            .map(|i| (i.project, i.workflow))
            .collect()
    }
}

/// Apply-time checks: an inline item or groups (not both, not neither), no empty group,
/// valid names.
pub(super) fn check(t: &TaskDef) -> Result<(), DefinitionError> {
    let Some(spec) = &t.dependent else {
        return Ok(());
    };
    let bad = |reason: String| DefinitionError::BadBranch {
        task: t.name.clone(),
        reason,
    };
    let inline = spec.workflow.is_some();
    let inline_only =
        spec.project.is_some() || spec.task.is_some() || spec.date.is_some() || spec.pass_outputs;
    match (inline, spec.groups.is_empty()) {
        (true, false) => {
            return Err(bad(
                "dependent: give either `workflow` (one item) or `groups`, not both".into(),
            ));
        }
        (false, true) => {
            return Err(bad(
                "dependent needs `workflow` (one item) or `groups` of items".into(),
            ));
        }
        (false, false) if inline_only => {
            return Err(bad(
                "dependent: `project`, `task`, `date` and `pass_outputs` go in each item of `groups`".into(),
            ));
        }
        _ => {}
    }
    for (i, group) in spec.groups.iter().enumerate() {
        if group.items.is_empty() {
            return Err(bad(format!("dependent group {} has no items", i + 1)));
        }
    }
    for (g, group) in spec.resolved_groups().iter().enumerate() {
        for (i, item) in group.items.iter().enumerate() {
            let fields = [
                ("workflow", Some(&item.workflow)),
                ("project", item.project.as_ref()),
                ("task", item.task.as_ref()),
            ];
            for (field, value) in fields {
                let problem = value.and_then(|v| Some((v, super::name_problem(v)?)));
                if let Some((value, problem)) = problem {
                    let at = match inline {
                        true => "dependent".to_string(),
                        false => format!("dependent group {} item {}", g + 1, i + 1),
                    };
                    return Err(bad(format!(
                        "{at}: {field} '{value}' is not a valid name: {problem}"
                    )));
                }
            }
        }
    }
    if inline && spec.relation != Relation::And {
        return Err(bad(
            "dependent: `relation` combines `groups`; one inline item has nothing to combine"
                .into(),
        ));
    }
    if spec
        .check_interval
        .is_some_and(|c| c < Duration::from_millis(500))
    {
        return Err(bad("dependent check_interval must be at least 500ms".into()));
    }
    Ok(())
}

/// Where one item, a group or the whole stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependResult {
    Success,
    Failed,
    Waiting,
}

/// Combines results by `relation`: `and` fails when any failed and succeeds when all did;
/// `or` succeeds when any did and fails when all failed; otherwise it waits.
pub fn combine(
    relation: Relation,
    results: impl IntoIterator<Item = DependResult>,
) -> DependResult {
    let (mut any_success, mut any_failed, mut all_success, mut all_failed) =
        (false, false, true, true);
    for r in results {
        any_success |= r == DependResult::Success;
        any_failed |= r == DependResult::Failed;
        all_success &= r == DependResult::Success;
        all_failed &= r == DependResult::Failed;
    }
    match relation {
        Relation::And if any_failed => DependResult::Failed,
        Relation::And if all_success => DependResult::Success,
        Relation::Or if any_success => DependResult::Success,
        Relation::Or if all_failed => DependResult::Failed,
        _ => DependResult::Waiting,
    }
}

/// The workflows whose dependent tasks wait for `project/workflow`, and those waiting for
/// them in turn, each with its stage: the longest chain of waits from the named one (stage
/// 0). Workflows waiting for each other in a cycle share one stage; a workflow waiting for
/// its own earlier runs is no cycle. `defs` are (project, definition) of every workflow.
pub fn dependent_stages<'a>(
    defs: impl IntoIterator<Item = (&'a str, &'a WorkflowDef)>,
    project: &str,
    workflow: &str,
) -> Vec<((String, String), i32)> {
    type Key = (String, String);
    let mut downstream: BTreeMap<Key, BTreeSet<Key>> = BTreeMap::new();
    for (p, def) in defs {
        let key = (p.to_string(), def.name.clone());
        for spec in dependent_specs(&def.tasks) {
            for (up_project, up) in spec.workflows() {
                let up = (up_project.unwrap_or_else(|| p.to_string()), up);
                if up != key {
                    downstream.entry(up).or_default().insert(key.clone());
                }
            }
        }
    }
    // The graph of what waits for the named workflow, in a stable order.
    let root: Key = (project.to_string(), workflow.to_string());
    let mut graph: DiGraph<Key, ()> = DiGraph::new();
    let mut index: BTreeMap<Key, NodeIndex> = BTreeMap::new();
    index.insert(root.clone(), graph.add_node(root.clone()));
    let mut queue = vec![root.clone()];
    while let Some(up) = queue.pop() {
        for down in downstream.get(&up).into_iter().flatten() {
            let to = *index.entry(down.clone()).or_insert_with(|| {
                queue.push(down.clone());
                graph.add_node(down.clone())
            });
            graph.add_edge(index[&up], to, ());
        }
    }
    // Cycles become one node each; the longest path over what is left gives the stages.
    let condensed = condensation(graph, true);
    let Ok(order) = toposort(&condensed, None) else {
        return Vec::new(); // cannot happen: a condensation has no cycle
    };
    let mut stage = vec![0i32; condensed.node_count()];
    for n in order {
        for down in condensed.neighbors(n) {
            stage[down.index()] = stage[down.index()].max(stage[n.index()] + 1);
        }
    }
    let mut out: Vec<(Key, i32)> = condensed
        .node_indices()
        .flat_map(|n| condensed[n].iter().map(move |k| (k.clone(), n)))
        .filter(|(k, _)| *k != root)
        .map(|(k, n)| (k, stage[n.index()]))
        .collect();
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    out
}

/// The dependent specs of `tasks`, those in do_while bodies included.
fn dependent_specs(tasks: &[TaskDef]) -> Vec<&DependentSpec> {
    let mut out = Vec::new();
    for t in tasks {
        out.extend(t.dependent.as_ref());
        if let Some(body) = &t.do_while {
            out.extend(dependent_specs(&body.tasks));
        }
        if let Some(template) = t.foreach.as_ref().and_then(|f| f.task.as_deref()) {
            out.extend(dependent_specs(std::slice::from_ref(template)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::DependResult::{Failed, Success, Waiting};
    use super::*;

    fn at(text: &str, tz: &str) -> i64 {
        let t = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap();
        let tz: chrono_tz::Tz = tz.parse().unwrap();
        chrono::TimeZone::from_local_datetime(&tz, &t)
            .earliest()
            .unwrap()
            .timestamp_millis()
    }

    fn labels(cycle: &str, when: &str) -> Vec<String> {
        let c: DateCycle = cycle.parse().unwrap();
        c.intervals(at(when, "Asia/Kolkata"), Some("Asia/Kolkata"))
            .into_iter()
            .map(|i| i.label)
            .collect()
    }

    #[test]
    fn each_cycle_names_its_days_or_hours_in_the_runs_zone() {
        // Wednesday 2026-03-04, 10:30 in Kolkata (05:00 UTC).
        let w = "2026-03-04 10:30";
        assert_eq!(labels("today", w), ["2026-03-04"]);
        assert_eq!(labels("yesterday", w), ["2026-03-03"]);
        assert_eq!(
            labels("last_3_days", w),
            ["2026-03-01", "2026-03-02", "2026-03-03"]
        );
        assert_eq!(
            labels("this_week", w),
            ["2026-03-02", "2026-03-03", "2026-03-04"]
        );
        assert_eq!(labels("last_week", w).first().unwrap(), "2026-02-23");
        assert_eq!(labels("last_week", w).last().unwrap(), "2026-03-01");
        assert_eq!(labels("last_friday", w), ["2026-02-27"]);
        assert_eq!(labels("this_month", w).len(), 4);
        assert_eq!(labels("last_month", w).len(), 28);
        assert_eq!(labels("last_month_begin", w), ["2026-02-01"]);
        assert_eq!(labels("this_month_begin", w), ["2026-03-01"]);
        assert_eq!(labels("last_month_end", w), ["2026-02-28"]);
        assert_eq!(labels("current_hour", w), ["2026-03-04 10:00"]);
        assert_eq!(labels("last_hour", w), ["2026-03-04 09:00"]);
        assert_eq!(
            labels("last_2_hours", "2026-03-04 00:10"),
            ["2026-03-03 22:00", "2026-03-03 23:00"]
        );
        // Spring forward in New York (02:00 -> 03:00): the hours before 03:30 are real hours,
        // none empty; fall back (02:00 -> 01:00): the repeated hour is two hours, one each.
        let ny = |text: &str, cycle: &str| {
            let c: DateCycle = cycle.parse().unwrap();
            c.intervals(at(text, "America/New_York"), Some("America/New_York"))
        };
        let spring = ny("2026-03-08 03:30", "last_2_hours");
        assert!(
            spring.iter().all(|i| i.end - i.start == 3_600_000),
            "{spring:?}"
        );
        assert_eq!(spring[1].end, at("2026-03-08 03:00", "America/New_York"));
        let autumn = ny("2026-11-01 03:30", "last_3_hours");
        let labels: Vec<&str> = autumn.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(
            labels,
            ["2026-11-01 01:00", "2026-11-01 01:00", "2026-11-01 02:00"]
        );
        // At the calendar's first day there is no day before: none, not a panic.
        let first = NaiveDate::MIN.and_hms_opt(0, 0, 0).unwrap().and_utc();
        assert!(
            DateCycle::LastWeek
                .intervals(first.timestamp_millis(), None)
                .is_empty()
        );
        assert_eq!(DateCycle::LastHours(24).intervals(i64::MAX, None).len(), 24);
        // Hours are local: the half-hour zone's hour starts at :30 UTC.
        let hour = DateCycle::CurrentHour.intervals(at(w, "Asia/Kolkata"), Some("Asia/Kolkata"));
        assert_eq!(hour[0].start, at("2026-03-04 04:30", "UTC"));
        assert_eq!(hour[0].end - hour[0].start, 3_600_000);
        let day = DateCycle::Today.intervals(at(w, "Asia/Kolkata"), Some("Asia/Kolkata"));
        assert_eq!(day[0].start, at("2026-03-03 18:30", "UTC"));
    }

    #[test]
    fn names_round_trip_and_bad_ones_say_what_is_accepted() {
        for name in [
            "current_hour",
            "last_hour",
            "last_5_hours",
            "today",
            "yesterday",
            "last_7_days",
            "this_week",
            "last_week",
            "last_sunday",
            "this_month",
            "this_month_begin",
            "last_month",
            "last_month_begin",
            "last_month_end",
        ] {
            assert_eq!(name.parse::<DateCycle>().unwrap().to_string(), name);
        }
        assert_eq!("last_1_days".parse(), Ok(DateCycle::LastDays(1)));
        let err = "fortnight".parse::<DateCycle>().unwrap_err();
        assert!(err.contains("last_N_days"), "{err}");
        assert!("last_0_days".parse::<DateCycle>().is_err());
        assert!("last_x_hours".parse::<DateCycle>().is_err());
    }

    #[test]
    fn and_waits_for_all_or_for_any() {
        use Relation::{And, Or};
        assert_eq!(combine(And, [Success, Success]), Success);
        assert_eq!(combine(And, [Success, Waiting]), Waiting);
        assert_eq!(combine(And, [Waiting, Failed]), Failed);
        assert_eq!(combine(Or, [Failed, Waiting]), Waiting);
        assert_eq!(combine(Or, [Failed, Success]), Success);
        assert_eq!(combine(Or, [Failed, Failed]), Failed);
    }

    #[test]
    fn dependents_come_in_stages_and_a_cycle_ends() {
        let def = |name: &str, deps: &[&str]| {
            let tasks: Vec<String> = deps
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    format!("{{name: d{i}, type: dependent, dependent: {{workflow: {d}}}}}")
                })
                .chain(["{name: work, type: noop}".to_string()])
                .collect();
            WorkflowDef::parse(&format!("name: {name}\ntasks: [{}]", tasks.join(", "))).unwrap()
        };
        // raw <- mart <- agg (agg also on raw); cyc1 <-> cyc2 hang off mart and z off cyc2;
        // selfish waits for raw and for its own runs; other is apart.
        let defs = [
            def("raw", &[]),
            def("mart", &["raw"]),
            def("agg", &["mart", "raw"]),
            def("cyc1", &["mart", "cyc2"]),
            def("cyc2", &["cyc1"]),
            def("z", &["cyc2"]),
            def("selfish", &["raw", "selfish"]),
            def("other", &["elsewhere"]),
        ];
        let stages = dependent_stages(defs.iter().map(|d| ("p", d)), "p", "raw");
        let named: Vec<(&str, i32)> = stages.iter().map(|((_, w), s)| (w.as_str(), *s)).collect();
        assert_eq!(
            named,
            [
                ("mart", 1),
                ("selfish", 1),
                ("agg", 2),
                ("cyc1", 2),
                ("cyc2", 2),
                ("z", 3)
            ]
        );
        assert!(dependent_stages(defs.iter().map(|d| ("q", d)), "p", "raw").is_empty());
    }

    #[test]
    fn bad_dependent_specs_are_refused_naming_the_item() {
        let err = |dependent: &str| {
            let text =
                format!("name: w\ntasks:\n- {{name: d, type: dependent, dependent: {dependent}}}");
            WorkflowDef::parse(&text).unwrap_err().to_string()
        };
        assert!(
            err("{groups: [{items: [{workflow: a}]}, {items: [{workflow: 'b c'}]}]}")
                .contains("dependent group 2 item 1: workflow 'b c' is not a valid name")
        );
        assert!(err("{workflow: a, groups: [{items: [{workflow: b}]}]}").contains("not both"));
        assert!(err("{workflow: a, relation: or}").contains("nothing to combine"));
        assert!(err("{groups: [{items: []}]}").contains("group 1 has no items"));
        assert!(err("{workflow: a, date: fortnight}").contains("unknown date 'fortnight'"));
        assert!(err("{workflow: a, check_interval: 10ms}").contains("at least 500ms"));
    }
}
