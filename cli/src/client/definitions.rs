//! `shoal workflow list|show|versions|diff|export`: a project's workflows and their stored
//! versions, read from the API the UI reads them from.

use super::http::Api;
use super::inspect::{json_out, list_out};
use super::table::{cell, time};
use super::workflows::{WorkflowArgs, path};
use super::{Output, ProjectListArgs, print_out};
use anyhow::{Context, bail};
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    /// The version to show [default: the latest].
    #[arg(long)]
    version: Option<i32>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
}

#[derive(clap::Args, Debug)]
pub struct VersionsArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    /// The older version [default: the one before --to].
    #[arg(long)]
    from: Option<i32>,
    /// The newer version [default: the latest].
    #[arg(long)]
    to: Option<i32>,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    /// The version to export [default: the latest].
    #[arg(long)]
    version: Option<i32>,
}

pub async fn list(args: ProjectListArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let list: Vec<Value> = api
        .get(&["projects", &args.project, "workflows"], &[])
        .await?;
    let headers = [
        "name",
        "version",
        "state",
        "schedule",
        "next fire",
        "last run",
        "updated",
    ];
    list_out(&list, args.output, &headers, |w| {
        let s = &w["schedule"];
        let schedule = match s["cron"].as_str() {
            Some(cron) => {
                let off = if s["enabled"] == true { "" } else { " (off)" };
                format!("{cron} {}{off}", cell(&s["timezone"]))
            }
            None => "-".into(),
        };
        let run = &w["last_run"];
        let last_run = match run["id"].as_i64() {
            Some(id) => format!("{id} {}", cell(&run["state"])),
            None => "-".into(),
        };
        vec![
            cell(&w["name"]),
            cell(&w["latest_version"]),
            state(w).into(),
            schedule,
            cell(&s["next_fire"]),
            last_run,
            time(&w["updated_at"]),
        ]
    })
}

pub async fn show(args: ShowArgs) -> anyhow::Result<i32> {
    let w = stored(&args.workflow, args.version).await?;
    if args.output == Output::Json {
        return json_out(&w);
    }
    print_out(format!(
        "workflow  {}/{} version {} ({})\ncreated   {}\n\n{}",
        cell(&w["project"]),
        cell(&w["name"]),
        cell(&w["version"]),
        state(&w),
        time(&w["created_at"]),
        yaml(&w)?
    ))?;
    Ok(0)
}

pub async fn versions(args: VersionsArgs) -> anyhow::Result<i32> {
    let w = &args.workflow;
    let api = Api::new(&w.conn)?;
    let list: Vec<Value> = api.get(&path(w, &["versions"]), &[]).await?;
    list_out(&list, args.output, &["version", "created"], |v| {
        vec![cell(&v["version"]), time(&v["created_at"])]
    })
}

pub async fn diff(args: DiffArgs) -> anyhow::Result<i32> {
    let w = &args.workflow;
    let new = stored(w, args.to).await?;
    let to = new["version"].as_i64().unwrap_or_default();
    let from = match args.from {
        Some(v) => i64::from(v),
        None if to > 1 => to - 1,
        None => bail!(
            "workflow '{}/{}' has one version only: nothing to compare it with",
            w.project,
            w.name
        ),
    };
    let old = stored(w, Some(i32::try_from(from)?)).await?;
    let label = |v: i64| format!("{} version {v}", w.name);
    let (old, new) = (yaml(&old)?, yaml(&new)?);
    let out = match old == new {
        true => format!("versions {from} and {to} are the same\n"),
        false => similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .header(&label(from), &label(to))
            .to_string(),
    };
    print_out(out)?;
    Ok(0)
}

pub async fn export(args: ExportArgs) -> anyhow::Result<i32> {
    let w = stored(&args.workflow, args.version).await?;
    print_out(yaml(&w)?)?;
    Ok(0)
}

/// A stored version of the workflow (the latest when `version` is None), as the API
/// shows it.
async fn stored(w: &WorkflowArgs, version: Option<i32>) -> anyhow::Result<Value> {
    let api = Api::new(&w.conn)?;
    let query: Vec<(&str, String)> = version
        .map(|v| ("version", v.to_string()))
        .into_iter()
        .collect();
    api.get(&path(w, &[]), &query).await
}

/// Whether a workflow may be started: `online`, or `offline`.
fn state(w: &Value) -> &'static str {
    if w["online"] == false {
        "offline"
    } else {
        "online"
    }
}

/// The definition as YAML, fields at their default left out (the API renders it).
fn yaml(w: &Value) -> anyhow::Result<&str> {
    w["yaml"]
        .as_str()
        .context("the api's answer has no `yaml`: is it a shoal api of this version?")
}
