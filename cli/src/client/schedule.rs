//! `shoal schedule create|list|enable|disable|delete|preview NAME`: the cron schedule of a
//! workflow (a workflow has at most one, so its name is enough to address it).

use super::http::{Api, Body};
use super::start::{RunOptionArgs, parse_param};
use super::table::{cell, render};
use super::{Output, ProjectListArgs, print_out};
use anyhow::anyhow;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(clap::Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Give a workflow a cron schedule; it fires from now on.
    Create(Box<CreateArgs>),
    /// Show a workflow's schedule.
    List(NameArgs),
    /// Turn a schedule on; time it was off is not made up.
    Enable(NameArgs),
    /// Turn a schedule off.
    Disable(NameArgs),
    /// Remove a workflow's schedule.
    Delete(NameArgs),
    /// Print the next fire times of a workflow's schedule.
    Preview(PreviewArgs),
}

#[derive(clap::Args, Debug)]
pub struct NameArgs {
    /// Name of the workflow.
    name: String,
    #[command(flatten)]
    at: ProjectListArgs,
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    workflow: NameArgs,
    /// Cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6 with a
    /// leading second; `?` is accepted in the day fields.
    #[arg(long)]
    cron: String,
    /// IANA time zone the cron is read in.
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// No fire before this RFC 3339 time.
    #[arg(long)]
    start: Option<String>,
    /// No fire after this RFC 3339 time.
    #[arg(long)]
    end: Option<String>,
    /// What happens to fires missed while no master ran.
    #[arg(long, default_value = "run_once", value_parser = ["run_all", "run_once", "skip"])]
    misfire: String,
    /// Startup parameter of every fired run. Repeat for more.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    #[arg(long)]
    priority: Option<String>,
    #[command(flatten)]
    options: RunOptionArgs,
    /// Create it switched off.
    #[arg(long)]
    disabled: bool,
}

#[derive(clap::Args, Debug)]
pub struct PreviewArgs {
    #[command(flatten)]
    workflow: NameArgs,
    /// How many fire times.
    #[arg(long, short = 'n', default_value_t = 5)]
    count: u32,
}

pub async fn run(cmd: ScheduleCommand) -> anyhow::Result<i32> {
    match cmd {
        ScheduleCommand::Create(args) => create(*args).await,
        ScheduleCommand::List(args) => {
            let api = Api::new(&args.at.conn)?;
            let list: Vec<Value> = api.get(&path(&args, &[]), &[]).await?;
            show(&args, &list)
        }
        ScheduleCommand::Enable(args) => switch(args, "enable").await,
        ScheduleCommand::Disable(args) => switch(args, "disable").await,
        ScheduleCommand::Delete(args) => {
            let api = Api::new(&args.at.conn)?;
            let id = schedule_id(&api, &args).await?;
            api.send(Method::DELETE, &path(&args, &[&id]), &[], None)
                .await?;
            print_out(format!("schedule {id} of {} deleted\n", args.name))?;
            Ok(0)
        }
        ScheduleCommand::Preview(args) => preview(args).await,
    }
}

/// `projects/P/workflows/NAME/schedules/<rest>`
fn path<'a>(args: &'a NameArgs, rest: &[&'a str]) -> Vec<&'a str> {
    let mut p = vec![
        "projects",
        args.at.project.as_str(),
        "workflows",
        args.name.as_str(),
        "schedules",
    ];
    p.extend_from_slice(rest);
    p
}

/// The id of the workflow's schedule; an error saying how to make one if it has none.
async fn schedule_id(api: &Api, args: &NameArgs) -> anyhow::Result<String> {
    let list: Vec<Value> = api.get(&path(args, &[]), &[]).await?;
    list.first()
        .and_then(|s| s["id"].as_i64())
        .map(|id| id.to_string())
        .ok_or_else(|| {
            anyhow!(
                "workflow '{}' has no schedule; create one with `shoal schedule create {} --cron EXPR`",
                args.name,
                args.name
            )
        })
}

async fn create(args: CreateArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.workflow.at.conn)?;
    let params: BTreeMap<_, _> = args.params.into_iter().collect();
    let mut body = json!({
        "cron": args.cron,
        "timezone": args.timezone,
        "misfire": args.misfire,
        "params": params,
        "enabled": !args.disabled,
    });
    for (key, value) in [
        ("start_time", args.start),
        ("end_time", args.end),
        ("priority", args.priority),
    ] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    args.options.add_to(&mut body);
    let created: Value = api
        .post(&path(&args.workflow, &[]), Body::json(&body))
        .await?;
    show(&args.workflow, &[created])
}

async fn switch(args: NameArgs, action: &str) -> anyhow::Result<i32> {
    let api = Api::new(&args.at.conn)?;
    let id = schedule_id(&api, &args).await?;
    let row: Value = api
        .post(&path(&args, &[&id, action]), Body::json(&json!({})))
        .await?;
    show(&args, &[row])
}

async fn preview(args: PreviewArgs) -> anyhow::Result<i32> {
    let a = &args.workflow;
    let api = Api::new(&a.at.conn)?;
    let id = schedule_id(&api, a).await?;
    let query = [("count", args.count.to_string())];
    let preview: Value = api.get(&path(a, &[&id, "preview"]), &query).await?;
    if a.at.output == Output::Json {
        print_out(format!("{preview:#}\n"))?;
        return Ok(0);
    }
    let times = preview["fire_times"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = format!(
        "next fire times of '{}' ({} in {}):\n",
        a.name,
        cell(&preview["cron"]),
        cell(&preview["timezone"])
    );
    for t in &times {
        out.push_str(&format!("{}\n", cell(t)));
    }
    if times.is_empty() {
        out.push_str("(none: the schedule's end time has passed)\n");
    }
    print_out(out)?;
    Ok(0)
}

fn show(args: &NameArgs, rows: &[Value]) -> anyhow::Result<i32> {
    if args.at.output == Output::Json {
        print_out(format!("{:#}\n", Value::from(rows.to_vec())))?;
        return Ok(0);
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|s| {
            vec![
                cell(&s["id"]),
                cell(&s["workflow"]),
                cell(&s["cron"]),
                cell(&s["timezone"]),
                if s["enabled"] == true { "yes" } else { "no" }.to_string(),
                cell(&s["misfire"]),
                cell(&s["next_fire"]),
            ]
        })
        .collect();
    let headers = [
        "id",
        "workflow",
        "cron",
        "timezone",
        "enabled",
        "misfire",
        "next fire",
    ];
    print_out(render(&headers, &table))?;
    Ok(0)
}
