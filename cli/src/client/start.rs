//! `shoal start NAME [--param k=v]... [--version N] [--from-task T [--scope S]] [--dry-run]
//! [--environment E] [--failure-strategy S] [--worker-group G] [--alert-channel C]...
//! [--timeout D] [--at TIME | --wait]`, and
//! the waiting for a command and following of an instance that other commands share.

use super::http::{Api, Body, Unreachable};
use super::{Connection, print_out};
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::start::{Scope, StartOptions};
use shoal_common::types::{Priority, TaskState, WorkflowState};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct StartArgs {
    /// Name of the workflow.
    name: String,
    #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
    project: String,
    /// Startup parameter; wins over the definition's. Repeat for more.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Priority of this run [default: the definition's].
    #[arg(long)]
    priority: Option<Priority>,
    /// Run this stored version of the workflow [default: the latest].
    #[arg(long = "version", value_name = "N")]
    definition_version: Option<i32>,
    /// Start from this task instead of the workflow's first tasks.
    #[arg(long, value_name = "TASK")]
    from_task: Option<String>,
    /// With --from-task: run that task only, it and what it depends on (upstream), or it
    /// and what depends on it (downstream) [default: downstream].
    #[arg(long, requires = "from_task", value_parser = ["only", "upstream", "downstream"])]
    scope: Option<String>,
    /// Let every task succeed without executing it.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    options: RunOptionArgs,
    /// Start at this time (RFC 3339, e.g. 2026-12-01T02:00:00+08:00) instead of now; the
    /// run waits as a pending command (`shoal command list`, `shoal command cancel ID`).
    #[arg(long, value_name = "TIME", conflicts_with = "wait")]
    at: Option<String>,
    /// Wait for the run to end, showing progress; exit 0 only if it succeeded.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    conn: Connection,
}

/// How runs go, beyond their parameters: the options `shoal start`, `shoal schedule
/// create` and `shoal backfill` share (each over the definition's).
#[derive(clap::Args, Debug)]
pub(super) struct RunOptionArgs {
    /// Run the shell and python tasks in this project environment (`shoal env set`),
    /// over the ones their task or workflow names.
    #[arg(long, value_name = "NAME")]
    environment: Option<String>,
    /// What a failed task does to the rest of a run: end it, or let independent
    /// branches continue [default: the definition's].
    #[arg(long, value_parser = ["end", "continue"])]
    failure_strategy: Option<String>,
    /// Worker group of the tasks that name none [default: default].
    #[arg(long, value_name = "GROUP")]
    worker_group: Option<String>,
    /// Send the alerts to this channel instead of the workflow's; repeat for more.
    #[arg(long = "alert-channel", value_name = "CHANNEL")]
    alert_channels: Vec<String>,
    /// A run's timeout, e.g. 30m, over the definition's.
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
}

impl RunOptionArgs {
    /// Sets the options given in a start, schedule or backfill request body.
    pub(super) fn add_to(self, body: &mut serde_json::Value) {
        for (key, value) in [
            ("environment", self.environment),
            ("failure_strategy", self.failure_strategy),
            ("worker_group", self.worker_group),
            ("timeout", self.timeout),
        ] {
            if let Some(v) = value {
                body[key] = json!(v);
            }
        }
        if !self.alert_channels.is_empty() {
            body["alert_channels"] = json!(self.alert_channels);
        }
    }
}

pub(super) fn parse_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!(
            "expected KEY=VALUE, e.g. --param dt=2026-01-01 (got '{s}')"
        )),
    }
}

#[derive(Deserialize)]
struct Started {
    command_id: i64,
}

#[derive(Deserialize)]
struct CommandView {
    status: String,
    workflow_instance_id: Option<i64>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct InstanceView {
    project: String,
    workflow: String,
    version: i32,
    state: WorkflowState,
    /// Which run of the instance is current (a rerun starts the next one).
    #[serde(default = "first_run")]
    run: i32,
    #[serde(default)]
    options: StartOptions,
    tasks: Vec<TaskView>,
    /// Why it waits or was discarded (serial execution types).
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct TaskView {
    id: i64,
    #[serde(default = "first_run")]
    run: i32,
    name: String,
    state: TaskState,
    attempt: i32,
}

fn first_run() -> i32 {
    1
}

pub async fn run(args: StartArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let params: BTreeMap<_, _> = args.params.into_iter().collect();
    let mut body = json!({ "params": params });
    if let Some(p) = args.priority {
        body["priority"] = json!(p);
    }
    // Only what was asked for, so that a plain start also works with an older server.
    if let Some(task) = args.from_task {
        body["from_task"] = json!(task);
    }
    if let Some(scope) = args.scope {
        body["scope"] = json!(scope);
    }
    if args.dry_run {
        body["dry_run"] = json!(true);
    }
    if let Some(v) = args.definition_version {
        body["version"] = json!(v);
    }
    args.options.add_to(&mut body);
    if let Some(at) = &args.at {
        body["at"] = json!(at);
    }
    let path = ["projects", &args.project, "workflows", &args.name, "start"];
    let started: Started = api.post(&path, Body::json(&body)).await?;
    if let Some(at) = args.at {
        let id = started.command_id;
        print_out(format!(
            "command {id} starts {}/{} at {at}; `shoal command cancel {id}` cancels it\n",
            args.project, args.name
        ))?;
        return Ok(0);
    }
    let instance = wait_for_instance(&api, started.command_id).await?;
    print_out(format!("{instance}\n"))?;
    if !args.wait {
        return Ok(0);
    }
    follow(&api, instance, WorkflowState::Success).await
}

/// Polls the command until a master turned it into an instance (or took up the instance
/// it names): every 20 ms during the first second (a live master claims at once), then
/// backing off to 200 ms.
pub(super) async fn wait_for_instance(api: &Api, command_id: i64) -> anyhow::Result<i64> {
    let begin = Instant::now();
    let mut delay = Duration::from_millis(20);
    let mut warned = false;
    let id = command_id.to_string();
    loop {
        let c: CommandView = api.get(&["commands", &id], &[]).await?;
        match c.status.as_str() {
            "done" => {
                return c.workflow_instance_id.with_context(|| {
                    format!("command {command_id} is done but names no workflow instance")
                });
            }
            "error" => bail!(
                "command {command_id} could not become a workflow instance: {}",
                c.error.unwrap_or_default()
            ),
            _ => {}
        }
        let waited = begin.elapsed();
        if waited > Duration::from_secs(1) {
            delay = (delay * 2).min(Duration::from_millis(200));
        }
        if !warned && waited > Duration::from_secs(10) {
            eprintln!(
                "command {command_id} is still pending after 10s: is a master running? \
                 (still waiting; Ctrl-C stops waiting, the command stays queued)"
            );
            warned = true;
        }
        tokio::time::sleep(delay).await;
    }
}

/// Progress of one run of an instance: how many of its tasks ended, and which failed.
struct Progress {
    /// Tasks of the run that have an attempt.
    started: u64,
    done: u64,
    failed: Vec<String>,
    killed: Vec<String>,
}

impl Progress {
    /// Counts the latest attempt of each task of run `run`; earlier runs do not count.
    fn of(tasks: &[TaskView], run: i32) -> Progress {
        let mut latest: HashMap<&str, &TaskView> = HashMap::new();
        for t in tasks.iter().filter(|t| t.run == run) {
            let e = latest.entry(&t.name).or_insert(t);
            if (t.attempt, t.id) > (e.attempt, e.id) {
                *e = t;
            }
        }
        let done = latest.values().filter(|t| t.state.is_terminal()).count() as u64;
        let names = |state: TaskState| {
            let mut names: Vec<String> = latest
                .values()
                .filter(|t| t.state == state)
                .map(|t| t.name.clone())
                .collect();
            names.sort();
            names
        };
        Progress {
            started: latest.len() as u64,
            done,
            failed: names(TaskState::Failure),
            killed: names(TaskState::Killed),
        }
    }

    /// `; failed tasks: a, b; killed tasks: c`, or nothing.
    fn problems(&self) -> String {
        let mut out = String::new();
        for (what, names) in [("failed", &self.failed), ("killed", &self.killed)] {
            if !names.is_empty() {
                out.push_str(&format!("; {what} tasks: {}", names.join(", ")));
            }
        }
        out
    }
}

/// How many tasks a run with these options executes: all of the definition's, or the
/// scope of its `from_task`. `tasks` is the definition's `tasks` as JSON.
fn tasks_in_run(tasks: &Value, options: &StartOptions) -> u64 {
    let tasks = tasks.as_array().map(Vec::as_slice).unwrap_or_default();
    let Some(start) = options.from_task.as_deref() else {
        return tasks.len() as u64;
    };
    // Edges as (upstream, downstream) names.
    let edges: Vec<(&str, &str)> = tasks
        .iter()
        .flat_map(|t| {
            let name = t["name"].as_str().unwrap_or_default();
            let deps = t["depends_on"].as_array().map(Vec::as_slice);
            deps.unwrap_or_default()
                .iter()
                .filter_map(Value::as_str)
                .map(move |dep| (dep, name))
        })
        .collect();
    let downstream = match options.scope.unwrap_or(Scope::Downstream) {
        Scope::Only => return 1,
        Scope::Upstream => false,
        Scope::Downstream => true,
    };
    let mut seen = HashSet::from([start]);
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        for &(up, down) in &edges {
            let next = match (downstream, up == n, down == n) {
                (true, true, _) => down,
                (false, _, true) => up,
                _ => continue,
            };
            if seen.insert(next) {
                stack.push(next);
            }
        }
    }
    seen.len() as u64
}

/// Shows progress of the instance's current run on stderr until the instance ends; exit
/// code 0 only if it ends in `goal`.
pub(super) async fn follow(api: &Api, instance: i64, goal: WorkflowState) -> anyhow::Result<i32> {
    let id = instance.to_string();
    let first: InstanceView = api.get(&["instances", &id], &[]).await?;
    let def: Value = api
        .get(
            &["projects", &first.project, "workflows", &first.workflow],
            &[("version", first.version.to_string())],
        )
        .await?;
    let planned = tasks_in_run(&def["definition"]["tasks"], &first.options);

    let bar = ProgressBar::new(planned).with_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} tasks done {wide_msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("instance {instance}"));
    bar.enable_steady_tick(Duration::from_millis(120));

    let mut view = first;
    let mut delay = Duration::from_millis(100);
    let mut errors = 0;
    loop {
        let p = Progress::of(&view.tasks, view.run);
        let total = planned.max(p.started);
        bar.set_length(total);
        bar.set_position(p.done.min(total));
        let why = view
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        bar.set_message(format!("({}{}{why})", view.state, p.problems()));
        if view.state.is_terminal() {
            bar.finish_and_clear();
            eprintln!(
                "instance {instance} ended {}{}{why}",
                view.state,
                p.problems()
            );
            return Ok(if view.state == goal { 0 } else { 1 });
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
        // A restarting api-server should not end a long wait; many failures in a row do.
        match api.get(&["instances", &id], &[]).await {
            Ok(v) => {
                view = v;
                errors = 0;
            }
            Err(e) if errors < 30 && e.is::<Unreachable>() => {
                errors += 1;
                bar.println(format!("warning: {e:#} (retrying)"));
                delay = Duration::from_secs(2);
            }
            Err(e) => {
                bar.finish_and_clear();
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_need_an_equals_sign() {
        assert_eq!(
            parse_param("dt=2026-01-01").unwrap(),
            ("dt".into(), "2026-01-01".into())
        );
        assert_eq!(parse_param("q=a=b").unwrap(), ("q".into(), "a=b".into()));
        assert_eq!(parse_param("empty=").unwrap(), ("empty".into(), "".into()));
        assert!(parse_param("dt").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_param("=v").is_err());
    }

    fn task(id: i64, name: &str, state: TaskState, attempt: i32) -> TaskView {
        TaskView {
            id,
            run: 1,
            name: name.into(),
            state,
            attempt,
        }
    }

    #[test]
    fn progress_counts_the_latest_attempt_of_each_task() {
        let tasks = vec![
            task(1, "a", TaskState::Success, 1),
            task(2, "b", TaskState::Failure, 1),
            task(3, "c", TaskState::Failure, 1),
            task(4, "b", TaskState::Running, 2),
            task(5, "d", TaskState::Killed, 1),
        ];
        let p = Progress::of(&tasks, 1);
        assert_eq!(p.started, 4);
        assert_eq!(p.done, 3, "a, c and d ended; b is retrying");
        assert_eq!(p.failed, vec!["c".to_string()]);
        assert_eq!(p.killed, vec!["d".to_string()]);
        assert_eq!(p.problems(), "; failed tasks: c; killed tasks: d");
        assert_eq!(Progress::of(&tasks[..1], 1).problems(), "");
    }

    #[test]
    fn progress_counts_only_the_current_run() {
        let in_run = |run, t: TaskView| TaskView { run, ..t };
        let tasks = vec![
            in_run(1, task(1, "a", TaskState::Success, 1)),
            in_run(1, task(2, "b", TaskState::Failure, 1)),
            in_run(1, task(3, "c", TaskState::Success, 1)),
            // The rerun: a again, b's first attempt in this run still going.
            in_run(2, task(4, "a", TaskState::Success, 1)),
            in_run(2, task(5, "b", TaskState::Running, 1)),
        ];
        let p = Progress::of(&tasks, 2);
        assert_eq!((p.started, p.done), (2, 1));
        assert!(p.failed.is_empty(), "b failed in run 1 only");
        let p = Progress::of(&tasks, 1);
        assert_eq!((p.started, p.done), (3, 3));
        assert_eq!(p.failed, vec!["b".to_string()]);
    }

    #[test]
    fn a_start_from_a_task_counts_the_tasks_of_its_scope() {
        // a -> b -> d, a -> c -> d, e alone.
        let tasks = json!([
            {"name": "a", "type": "noop"},
            {"name": "b", "type": "noop", "depends_on": ["a"]},
            {"name": "c", "type": "noop", "depends_on": ["a"]},
            {"name": "d", "type": "noop", "depends_on": ["b", "c"]},
            {"name": "e", "type": "noop"},
        ]);
        let count = |from: Option<&str>, scope: Option<Scope>| {
            let options = StartOptions {
                dry_run: false,
                from_task: from.map(Into::into),
                scope,
                ..Default::default()
            };
            tasks_in_run(&tasks, &options)
        };
        assert_eq!(count(None, None), 5);
        assert_eq!(count(Some("b"), Some(Scope::Only)), 1);
        assert_eq!(count(Some("b"), None), 2, "b, d");
        assert_eq!(count(Some("a"), Some(Scope::Downstream)), 4);
        assert_eq!(count(Some("d"), Some(Scope::Upstream)), 4, "a, b, c, d");
        assert_eq!(count(Some("b"), Some(Scope::Upstream)), 2, "a, b");
        assert_eq!(count(Some("e"), Some(Scope::Downstream)), 1);
    }
}
