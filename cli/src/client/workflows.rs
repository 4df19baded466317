//! `shoal workflow online|offline|rollback|delete NAME` and `shoal instance delete ID`: a
//! workflow's lifecycle beyond its versions, and deleting an ended instance. Reading
//! workflows and their versions (`list`, `show`, ...) is in [`super::definitions`].

use super::definitions;
use super::http::{Api, Body};
use super::{Connection, print_out};
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

#[derive(clap::Subcommand, Debug)]
pub enum WorkflowCommand {
    /// List a project's workflows with their latest version, schedule and latest run.
    List(super::ProjectListArgs),
    /// Show a version of a workflow (the latest unless --version) and its definition.
    Show(definitions::ShowArgs),
    /// List a workflow's stored versions, newest first.
    Versions(definitions::VersionsArgs),
    /// Show what changed between two versions of a workflow (default: the latest and the
    /// one before it).
    Diff(definitions::DiffArgs),
    /// Print a version of a workflow as YAML that `shoal apply -f` takes back unchanged.
    Export(definitions::ExportArgs),
    /// Bring a workflow online: it can be started again (enable its schedule again if
    /// wanted).
    Online(WorkflowArgs),
    /// Take a workflow offline: starts, triggers and backfills are refused and its
    /// schedule is disabled; runs under way go on.
    Offline(WorkflowArgs),
    /// Store an old version again as the newest one.
    Rollback {
        #[command(flatten)]
        workflow: WorkflowArgs,
        /// The version to go back to (`shoal workflow versions NAME` lists them).
        #[arg(long)]
        to: i32,
    },
    /// Delete every version of a workflow and its disabled schedule; its ended instances
    /// stay. Refused while a run is active or its schedule is enabled.
    Delete(WorkflowArgs),
}

#[derive(clap::Args, Debug)]
pub struct WorkflowArgs {
    /// Name of the workflow.
    pub(super) name: String,
    #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
    pub(super) project: String,
    #[command(flatten)]
    pub(super) conn: Connection,
}

#[derive(clap::Subcommand, Debug)]
pub enum InstanceCommand {
    /// Delete an ended instance with its task rows and kept logs.
    Delete {
        /// Workflow instance id.
        id: i64,
        #[command(flatten)]
        conn: Connection,
    },
}

#[derive(Deserialize)]
struct RolledBack {
    version: i32,
}

pub async fn workflow(cmd: WorkflowCommand) -> anyhow::Result<i32> {
    match cmd {
        WorkflowCommand::List(args) => definitions::list(args).await,
        WorkflowCommand::Show(args) => definitions::show(args).await,
        WorkflowCommand::Versions(args) => definitions::versions(args).await,
        WorkflowCommand::Diff(args) => definitions::diff(args).await,
        WorkflowCommand::Export(args) => definitions::export(args).await,
        WorkflowCommand::Online(args) => release(args, "online").await,
        WorkflowCommand::Offline(args) => release(args, "offline").await,
        WorkflowCommand::Rollback { workflow: args, to } => {
            let api = Api::new(&args.conn)?;
            let version = to.to_string();
            let path = path(&args, &["versions", &version, "rollback"]);
            let done: RolledBack = api.post(&path, Body::json(&json!({}))).await?;
            let name = &args.name;
            print_out(format!(
                "{name}: version {to} is the newest again, as version {}\n",
                done.version
            ))?;
            Ok(0)
        }
        WorkflowCommand::Delete(args) => {
            let api = Api::new(&args.conn)?;
            api.send(Method::DELETE, &path(&args, &[]), &[], None)
                .await?;
            print_out(format!("workflow {} deleted\n", args.name))?;
            Ok(0)
        }
    }
}

pub async fn instance(cmd: InstanceCommand) -> anyhow::Result<i32> {
    let InstanceCommand::Delete { id, conn } = cmd;
    let api = Api::new(&conn)?;
    api.send(Method::DELETE, &["instances", &id.to_string()], &[], None)
        .await?;
    print_out(format!("instance {id} deleted\n"))?;
    Ok(0)
}

async fn release(args: WorkflowArgs, state: &str) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let _: serde_json::Value = api
        .post(&path(&args, &[state]), Body::json(&json!({})))
        .await?;
    print_out(format!("workflow {} is {state}\n", args.name))?;
    Ok(0)
}

/// `projects/P/workflows/NAME/<rest>`
pub(super) fn path<'a>(args: &'a WorkflowArgs, rest: &[&'a str]) -> Vec<&'a str> {
    let mut p = vec!["projects", &args.project, "workflows", &args.name];
    p.extend_from_slice(rest);
    p
}
