//! Read-only commands: `shoal instances`, `shoal status ID`, `shoal logs ID`.

use super::http::Api;
use super::table::{cell, render, time};
use super::{Connection, Output, print_out};
use reqwest::Method;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct InstancesArgs {
    /// Only instances of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only instances of this project.
    #[arg(long, env = "SHOAL_PROJECT")]
    project: Option<String>,
    /// Only instances in this state (running, success, failure, ...).
    #[arg(long)]
    state: Option<String>,
    /// At most this many instances.
    #[arg(long)]
    limit: Option<u32>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Workflow instance id.
    id: i64,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

#[derive(clap::Args, Debug)]
pub struct LogsArgs {
    /// Task instance id (see `shoal status ID`).
    task_instance_id: i64,
    #[command(flatten)]
    conn: Connection,
}

pub async fn instances(args: InstancesArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let query = filters([
        ("workflow", args.workflow),
        ("project", args.project),
        ("state", args.state),
        ("limit", args.limit.map(|n| n.to_string())),
    ]);
    let list: Vec<Value> = api.get(&["instances"], &query).await?;
    let headers = ["id", "workflow", "version", "state", "started", "ended"];
    list_out(&list, args.output, &headers, |i| {
        vec![
            cell(&i["id"]),
            workflow_name(i),
            cell(&i["version"]),
            cell(&i["state"]),
            time(&i["started_at"]),
            time(&i["ended_at"]),
        ]
    })
}

/// `name`, or `project/name` outside the default project.
fn workflow_name(i: &Value) -> String {
    match i["project"].as_str() {
        Some(p) if p != shoal_common::definition::DEFAULT_PROJECT => {
            format!("{p}/{}", cell(&i["workflow"]))
        }
        _ => cell(&i["workflow"]),
    }
}

/// The start options a run was started with, as `key=value` words (a list joined by
/// commas); None when it has none.
fn start_options(options: &Value) -> Option<String> {
    let map = options.as_object().filter(|m| !m.is_empty())?;
    let words: Vec<String> = map
        .iter()
        .map(|(k, v)| match v {
            Value::Bool(true) => k.clone(),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(cell).collect();
                format!("{k}={}", items.join(","))
            }
            other => format!("{k}={}", cell(other)),
        })
        .collect();
    Some(words.join(" "))
}

pub async fn status(args: StatusArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let i: Value = api.get(&["instances", &args.id.to_string()], &[]).await?;
    if args.output == Output::Json {
        return json_out(&i);
    }
    let params = match i["params"].as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(v)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => "-".to_string(),
    };
    let mut out = format!(
        "instance {}  {}/{} version {}\n\
         state     {}  (priority {}, run {})\n\
         params    {params}\n\
         created   {}\nstarted   {}\nended     {}\n",
        cell(&i["id"]),
        cell(&i["project"]),
        cell(&i["workflow"]),
        cell(&i["version"]),
        cell(&i["state"]),
        cell(&i["priority"]),
        cell(&i["run"]),
        time(&i["created_at"]),
        time(&i["started_at"]),
        time(&i["ended_at"]),
    );
    if let Some(options) = start_options(&i["options"]) {
        out.push_str(&format!("options   {options}\n"));
    }
    if let Some(message) = i["message"].as_str() {
        out.push_str(&format!("message   {message}\n"));
    }
    out.push('\n');
    let tasks = i["tasks"].as_array().map(Vec::as_slice).unwrap_or_default();
    // After a rerun the attempts of earlier runs are listed too; a column tells them apart.
    let runs = i["run"].as_i64().is_some_and(|r| r > 1);
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let mut row = vec![
                cell(&t["id"]),
                cell(&t["name"]),
                cell(&t["state"]),
                cell(&t["attempt"]),
                cell(&t["worker"]),
                time(&t["started_at"]),
                time(&t["ended_at"]),
                // Why a task waits or failed (e.g. no live worker in its group).
                t["message"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .unwrap_or("-")
                    .to_string(),
            ];
            if runs {
                row.insert(1, cell(&t["run"]));
            }
            row
        })
        .collect();
    if rows.is_empty() {
        out.push_str("no tasks yet\n");
    } else {
        let mut headers = vec![
            "id", "name", "state", "attempt", "worker", "started", "ended", "message",
        ];
        if runs {
            headers.insert(1, "run");
        }
        out.push_str(&render(&headers, &rows));
    }
    print_out(out)?;
    Ok(0)
}

/// Prints the whole log, following the server's paging for very long logs.
pub async fn logs(args: LogsArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let id = args.task_instance_id.to_string();
    let mut offset: Option<String> = None;
    loop {
        let query: Vec<(&str, String)> = offset.iter().map(|o| ("offset", o.clone())).collect();
        let resp = api
            .send(Method::GET, &["task-instances", &id, "log"], &query, None)
            .await?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let more = header("x-shoal-log-more").as_deref() == Some("true");
        let next = header("x-shoal-log-next-offset");
        print_out(resp.bytes().await?)?;
        match next {
            Some(next) if more => offset = Some(next),
            _ => return Ok(0),
        }
    }
}

/// Prints a list as pretty JSON, or as a table with a row per item.
pub(super) fn list_out(
    items: &[Value],
    output: Output,
    headers: &[&str],
    row: impl Fn(&Value) -> Vec<String>,
) -> anyhow::Result<i32> {
    if output == Output::Json {
        return json_out(&items);
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    print_out(render(headers, &rows))?;
    Ok(0)
}

/// The query of a list's filters that were given.
pub(super) fn filters<const N: usize>(pairs: [(&str, Option<String>); N]) -> Vec<(&str, String)> {
    pairs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

pub(super) fn json_out(v: &impl serde::Serialize) -> anyhow::Result<i32> {
    print_out(serde_json::to_string_pretty(v)? + "\n")?;
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

/// `shoal cluster`: the live masters and workers with their load.
pub async fn cluster(args: ClusterArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let nodes: Vec<Value> = api.get(&["cluster"], &[]).await?;
    if args.output == Output::Json {
        return json_out(&nodes);
    }
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let groups = n["groups"]
                .as_array()
                .map(|g| g.iter().map(cell).collect::<Vec<_>>().join(","));
            vec![
                cell(&n["role"]),
                cell(&n["addr"]),
                groups
                    .filter(|g| !g.is_empty())
                    .unwrap_or_else(|| "-".into()),
                format!("{}/{}", cell(&n["running"]), cell(&n["slots"])),
                cell(&n["weight"]),
                time(&n["started_at"]),
            ]
        })
        .collect();
    let headers = [
        "role",
        "addr",
        "groups",
        "running/slots",
        "weight",
        "started",
    ];
    print_out(render(&headers, &rows))?;
    Ok(0)
}
