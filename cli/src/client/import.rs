//! `shoal import dolphinscheduler FILE.json [--project P] [--dry-run]`: turns a
//! DolphinScheduler 3.x export into shoal workflows (see `crate::dolphinscheduler`),
//! prints what was not carried over, and applies them with their schedules (created
//! disabled) and the environments their tasks use unless `--dry-run`, which prints the
//! YAML instead.

use super::apply::Applied;
use super::http::{Api, Body};
use super::start::parse_param;
use super::{Connection, print_out};
use crate::dolphinscheduler::{self, ImportedEnvironment, ImportedWorkflow, Options};
use anyhow::Context;
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum ImportCommand {
    /// Import workflows from a DolphinScheduler 3.x export (the JSON of the workflow
    /// list's Export): tasks, parameters, retries, timeouts, priorities, worker and task
    /// groups, failure strategy and the schedule. What shoal lacks is listed by name.
    Dolphinscheduler(DolphinArgs),
}

#[derive(clap::Args, Debug)]
pub struct DolphinArgs {
    /// The exported JSON file.
    file: PathBuf,
    /// The shoal project the workflows go into.
    #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
    project: String,
    /// Print the shoal definitions (YAML) and the report; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// What a DolphinScheduler datasource id is called on shoal's workers
    /// (`--datasource 7=warehouse`); repeat for more. Default: `<type>_<id>`.
    #[arg(long = "datasource", value_name = "ID=NAME", value_parser = parse_param)]
    datasources: Vec<(String, String)>,
    /// A DolphinScheduler worker group's shoal name (`--worker-group etl=default`);
    /// repeat for more. Default: the same name.
    #[arg(long = "worker-group", value_name = "DS=SHOAL", value_parser = parse_param)]
    worker_groups: Vec<(String, String)>,
    /// DolphinScheduler's environments (the JSON of its `GET
    /// /dolphinscheduler/environment/query-environment-list`): those the tasks name become
    /// project environments. An export alone carries none.
    #[arg(long, value_name = "FILE")]
    environments: Option<PathBuf>,
    #[command(flatten)]
    conn: Connection,
}

pub async fn run(cmd: ImportCommand) -> anyhow::Result<i32> {
    let ImportCommand::Dolphinscheduler(args) = cmd;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let environments = match &args.environments {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            dolphinscheduler::environments(&text)
                .with_context(|| format!("{} cannot be read", path.display()))?
        }
    };
    let options = Options {
        project: args.project.clone(),
        datasources: args.datasources.into_iter().collect(),
        worker_groups: args.worker_groups.into_iter().collect(),
        environments,
    };
    let imported = dolphinscheduler::convert(&text, &options)
        .with_context(|| format!("{} cannot be imported", args.file.display()))?;
    if !imported.report.is_empty() {
        eprintln!(
            "Not carried over, or carried over differently ({}):",
            imported.report.len()
        );
        for line in &imported.report {
            eprintln!("  - {line}");
        }
    }
    if args.dry_run {
        let envs = imported.environments.iter().map(dry_run_environment);
        let docs: Vec<String> = envs.chain(imported.workflows.iter().map(dry_run)).collect();
        print_out(docs.join("---\n"))?;
        return Ok(0);
    }
    let api = Api::new(&args.conn)?;
    if !imported.environments.is_empty() {
        ensure_project(&api, &args.project).await?;
    }
    for e in &imported.environments {
        set_environment(&api, &args.project, e).await?;
    }
    for w in &imported.workflows {
        apply(&api, &args.project, w).await?;
    }
    Ok(0)
}

/// The YAML of one workflow, its schedule and release state as comments.
fn dry_run(w: &ImportedWorkflow) -> String {
    let mut out = String::new();
    if let Some(s) = &w.schedule {
        out.push_str(&format!(
            "# schedule (created disabled): cron '{}' in {}\n",
            s.cron, s.timezone
        ));
    }
    if w.offline {
        out.push_str("# offline in DolphinScheduler: taken offline here too\n");
    }
    out.push_str(&w.yaml);
    out
}

/// An environment as a comment: `shoal env set` is what sets it.
fn dry_run_environment(e: &ImportedEnvironment) -> String {
    let mut out = format!("# environment {} (set with `shoal env set`):\n", e.name);
    for line in e.config.lines() {
        out.push_str(&format!("#   {line}\n"));
    }
    out
}

/// Creates `project` unless it exists: its environments are set before a workflow applied
/// into it would create it.
async fn ensure_project(api: &Api, project: &str) -> anyhow::Result<()> {
    let projects: Vec<Value> = api.get(&["projects"], &[]).await?;
    if projects.iter().any(|p| p["name"].as_str() == Some(project)) {
        return Ok(());
    }
    let _: Value = api
        .post(&["projects"], Body::json(&json!({ "name": project })))
        .await
        .with_context(|| format!("creating project {project}"))?;
    Ok(())
}

/// Creates an environment the imported tasks use; one of that name already there is left
/// as it is (said so when its config differs).
async fn set_environment(api: &Api, project: &str, e: &ImportedEnvironment) -> anyhow::Result<()> {
    let listed: Vec<Value> = api.get(&["projects", project, "environments"], &[]).await?;
    let existing = listed
        .into_iter()
        .find(|o| o["name"].as_str() == Some(&e.name));
    let path = ["projects", project, "environments", e.name.as_str()];
    let line = match existing {
        Some(old) if old["config"].as_str() == Some(e.config.trim_end()) => {
            format!("environment {} unchanged\n", e.name)
        }
        Some(_) => format!(
            "environment {} exists with another config; left as it is (`shoal env show {}`)\n",
            e.name, e.name
        ),
        None => {
            let body = json!({ "config": e.config, "description": e.description });
            api.send(reqwest::Method::PUT, &path, &[], Some(Body::json(&body)))
                .await
                .with_context(|| format!("setting environment {}", e.name))?;
            format!("environment {} imported\n", e.name)
        }
    };
    print_out(line)
}

async fn apply(api: &Api, project: &str, w: &ImportedWorkflow) -> anyhow::Result<()> {
    let body = Body {
        content_type: "application/yaml",
        bytes: w.yaml.clone().into_bytes(),
    };
    let applied: Applied = api
        .post(&["projects", project, "workflows"], body)
        .await
        .with_context(|| format!("applying {}", w.name))?;
    let verb = if applied.created {
        "imported"
    } else {
        "unchanged"
    };
    let mut line = format!(
        "{verb} {}/{} version {} ({} tasks)",
        applied.project, applied.name, applied.version, w.tasks
    );
    let path = [
        "projects",
        project,
        "workflows",
        w.name.as_str(),
        "schedules",
    ];
    if let Some(s) = &w.schedule {
        let existing: Vec<Value> = api.get(&path, &[]).await?;
        if let Some(id) = existing.first().map(|e| e["id"].clone()) {
            line.push_str(&format!("; it has schedule {id} already, left as it is"));
        } else {
            let mut body = json!({
                "cron": s.cron,
                "timezone": s.timezone,
                "enabled": false,
            });
            for (key, value) in [
                ("start_time", &s.start_time),
                ("end_time", &s.end_time),
                ("priority", &s.priority),
                ("worker_group", &s.worker_group),
            ] {
                if let Some(v) = value {
                    body[key] = json!(v);
                }
            }
            let created: Value = api
                .post(&path, Body::json(&body))
                .await
                .with_context(|| format!("creating the schedule of {}", w.name))?;
            line.push_str(&format!(
                "; schedule {} ('{}' in {}) created disabled: `shoal schedule enable {}`",
                created["id"], s.cron, s.timezone, w.name
            ));
        }
    }
    if w.offline {
        let _: Value = api
            .post(
                &["projects", project, "workflows", w.name.as_str(), "offline"],
                Body::json(&json!({})),
            )
            .await?;
        line.push_str("; offline, as it was in DolphinScheduler");
    }
    print_out(format!("{line}\n"))?;
    Ok(())
}
