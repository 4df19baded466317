//! `shoal start NAME [--param k=v]... [--wait]`

use super::http::{Api, Body, Unreachable};
use super::{Connection, print_out};
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::json;
use shoal_common::types::{Priority, TaskState, WorkflowState};
use std::collections::{BTreeMap, HashMap};
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
    /// Wait for the run to end, showing progress; exit 0 only if it succeeded.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    conn: Connection,
}

fn parse_param(s: &str) -> Result<(String, String), String> {
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
    version: i32,
    state: WorkflowState,
    tasks: Vec<TaskView>,
}

#[derive(Deserialize)]
struct TaskView {
    id: i64,
    name: String,
    state: TaskState,
    attempt: i32,
}

pub async fn run(args: StartArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let params: BTreeMap<_, _> = args.params.into_iter().collect();
    let mut body = json!({ "params": params });
    if let Some(p) = args.priority {
        body["priority"] = json!(p);
    }
    let path = ["projects", &args.project, "workflows", &args.name, "start"];
    let started: Started = api.post(&path, Body::json(&body)).await?;
    let instance = wait_for_instance(&api, started.command_id).await?;
    print_out(format!("{instance}\n"))?;
    if !args.wait {
        return Ok(0);
    }
    follow(&api, &args.project, &args.name, instance).await
}

/// Polls the command until a master turned it into an instance: every 20 ms during the
/// first second (a live master claims at once), then backing off to 200 ms.
async fn wait_for_instance(api: &Api, command_id: i64) -> anyhow::Result<i64> {
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

/// Progress of one instance: how many of its tasks ended, and which failed.
struct Progress {
    done: u64,
    failed: Vec<String>,
    killed: Vec<String>,
}

impl Progress {
    /// Counts the latest attempt of each task.
    fn of(tasks: &[TaskView]) -> Progress {
        let mut latest: HashMap<&str, &TaskView> = HashMap::new();
        for t in tasks {
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

/// Shows progress on stderr until the instance ends; exit code 0 only for success.
async fn follow(api: &Api, project: &str, name: &str, instance: i64) -> anyhow::Result<i32> {
    let id = instance.to_string();
    let first: InstanceView = api.get(&["instances", &id], &[]).await?;
    let def: serde_json::Value = api
        .get(
            &["projects", project, "workflows", name],
            &[("version", first.version.to_string())],
        )
        .await?;
    let total = def["definition"]["tasks"].as_array().map_or(0, Vec::len) as u64;

    let bar = ProgressBar::new(total).with_style(
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
        let p = Progress::of(&view.tasks);
        bar.set_position(p.done.min(total));
        bar.set_message(format!("({}{})", view.state, p.problems()));
        if view.state.is_terminal() {
            bar.finish_and_clear();
            eprintln!("instance {instance} ended {}{}", view.state, p.problems());
            return Ok(if view.state == WorkflowState::Success {
                0
            } else {
                1
            });
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
        let p = Progress::of(&tasks);
        assert_eq!(p.done, 3, "a, c and d ended; b is retrying");
        assert_eq!(p.failed, vec!["c".to_string()]);
        assert_eq!(p.killed, vec!["d".to_string()]);
        assert_eq!(p.problems(), "; failed tasks: c; killed tasks: d");
        assert_eq!(Progress::of(&tasks[..1]).problems(), "");
    }
}
