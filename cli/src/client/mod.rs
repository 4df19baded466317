//! The client commands of the `shoal` binary (`apply`, `start`, `stop`, `pause`, `resume`,
//! `rerun`, `resubmit`, `instances`, `status`, `logs`, `schedule`, `backfill`, `cluster`,
//! `task`, `event`, `task-group`, `alert-channel`, `alerts`, `user`, `token`, `project`,
//! `secret`, `env`, `audit`, `trigger`, `workflow`, `instance`). They talk to the api-server over
//! HTTP, never to the database.

mod access;
mod alerts;
mod apply;
mod backfill;
mod commands;
mod control;
mod definitions;
mod environments;
mod events;
mod http;
mod import;
mod inspect;
mod schedule;
mod secrets;
mod start;
mod table;
mod task_groups;
mod tasks;
mod triggers;
mod workflows;

use std::io::ErrorKind;

/// Where the api-server is and how to authenticate to it.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    #[command(flatten)]
    pub endpoint: Endpoint,
    /// Your API token (`shoal token create`), needed when the server has auth on; from the
    /// variable only (other users of the machine can read a command's arguments).
    #[arg(long, env = "SHOAL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Where the api-server is and which certificates to trust for it.
#[derive(clap::Args, Debug, Clone)]
pub struct Endpoint {
    /// Base URL of the shoal api-server (or of `shoal standalone`).
    #[arg(long, env = "SHOAL_API", default_value = "http://127.0.0.1:12345")]
    pub api: String,
    /// CA certificate(s) (PEM) to trust for an https --api besides the system's: the
    /// private CA that signed the server's certificate, or that certificate itself.
    #[arg(long, env = "SHOAL_API_CA")]
    pub api_ca: Option<std::path::PathBuf>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
}

/// A list command's arguments.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

/// A list command's arguments, for what one project has.
#[derive(clap::Args, Debug)]
pub struct ProjectListArgs {
    #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
    project: String,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

/// The arguments of a command on one named thing (e.g. a delete).
#[derive(clap::Args, Debug)]
pub struct NamedArgs {
    name: String,
    #[command(flatten)]
    conn: Connection,
}

#[derive(clap::Subcommand, Debug)]
pub enum ClientCommand {
    /// Store a workflow definition (YAML or JSON) as a new version, unless it is unchanged.
    Apply(apply::ApplyArgs),
    /// Start a run of a workflow (its latest version unless --version); prints the instance id.
    Start(start::StartArgs),
    /// Stop a running instance: its running tasks are killed and nothing new starts.
    Stop(control::ActionArgs),
    /// Pause a running instance: running tasks finish, nothing new starts; `resume` goes on.
    Pause(control::ActionArgs),
    /// Resume a paused instance where it left off.
    Resume(control::ActionArgs),
    /// Run an ended instance again from the start, as the instance's next run.
    Rerun(control::ActionArgs),
    /// Run the failed or stopped tasks (and what follows them) of a failed or stopped
    /// instance again; its successful tasks are kept.
    Resubmit(control::ActionArgs),
    /// List workflow instances, newest first.
    Instances(inspect::InstancesArgs),
    /// Show one workflow instance and its tasks.
    Status(inspect::StatusArgs),
    /// Print the log of one task instance.
    Logs(inspect::LogsArgs),
    /// List the live masters and workers with their load.
    Cluster(inspect::ClusterArgs),
    /// Cron schedules of workflows.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// Run a workflow once per schedule time over past dates (`backfill status ID` shows
    /// the progress).
    Backfill(backfill::BackfillArgs),
    /// Import workflow definitions from another scheduler's export.
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Act on one task instance: complete a waiting wait or callback task, kill a running
    /// one, force a failed one to success, rerun an ended one.
    #[command(subcommand)]
    Task(tasks::TaskCommand),
    /// Send an event that completes the wait tasks waiting for it.
    #[command(subcommand)]
    Event(events::EventCommand),
    /// Manage task groups: slots shared by tasks across workflows.
    #[command(subcommand)]
    TaskGroup(task_groups::TaskGroupCommand),
    /// Manage alert channels (webhook or log) that workflows send alerts to.
    #[command(subcommand)]
    AlertChannel(alerts::AlertChannelCommand),
    /// List alerts with their delivery state, attempts and last error, newest first.
    Alerts(alerts::AlertsArgs),
    /// Manage users (global admins).
    #[command(subcommand)]
    User(access::UserCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(access::TokenCommand),
    /// Manage projects and their members.
    #[command(subcommand)]
    Project(access::ProjectCommand),
    /// Manage a project's secrets (values are read from stdin and never shown).
    #[command(subcommand)]
    Secret(secrets::SecretCommand),
    /// Manage a project's environments: shell lines run before its shell and python tasks.
    #[command(subcommand)]
    Env(environments::EnvCommand),
    /// The audit log: every change made through the API, newest first (global admins).
    Audit(access::AuditArgs),
    /// Webhook triggers: list a project's, or call one with its credential.
    #[command(subcommand)]
    Trigger(triggers::TriggerCommand),
    /// Workflows: list them, show, compare and export their versions; take one offline or
    /// online, roll it back, delete it.
    #[command(subcommand)]
    Workflow(workflows::WorkflowCommand),
    /// Delete an ended instance.
    #[command(subcommand)]
    Instance(workflows::InstanceCommand),
    /// Commands no master has claimed yet: list runs at a later time, cancel one.
    #[command(subcommand)]
    Command(commands::CommandCommand),
}

/// Runs a client command and returns the process exit code. Errors are printed here, as
/// one line on stderr, and give exit code 1.
pub async fn run(cmd: ClientCommand) -> anyhow::Result<i32> {
    let result = match cmd {
        ClientCommand::Apply(args) => apply::run(args).await,
        ClientCommand::Start(args) => start::run(args).await,
        ClientCommand::Stop(args) => control::run(control::Verb::Stop, args).await,
        ClientCommand::Pause(args) => control::run(control::Verb::Pause, args).await,
        ClientCommand::Resume(args) => control::run(control::Verb::Resume, args).await,
        ClientCommand::Rerun(args) => control::run(control::Verb::Rerun, args).await,
        ClientCommand::Resubmit(args) => control::run(control::Verb::Resubmit, args).await,
        ClientCommand::Instances(args) => inspect::instances(args).await,
        ClientCommand::Status(args) => inspect::status(args).await,
        ClientCommand::Logs(args) => inspect::logs(args).await,
        ClientCommand::Cluster(args) => inspect::cluster(args).await,
        ClientCommand::Schedule(cmd) => schedule::run(cmd).await,
        ClientCommand::Backfill(args) => backfill::run(args).await,
        ClientCommand::Import(cmd) => import::run(cmd).await,
        ClientCommand::Task(cmd) => tasks::run(cmd).await,
        ClientCommand::Event(cmd) => events::run(cmd).await,
        ClientCommand::TaskGroup(cmd) => task_groups::run(cmd).await,
        ClientCommand::AlertChannel(cmd) => alerts::channel(cmd).await,
        ClientCommand::Alerts(args) => alerts::list(args).await,
        ClientCommand::User(cmd) => access::user(cmd).await,
        ClientCommand::Token(cmd) => access::token(cmd).await,
        ClientCommand::Project(cmd) => access::project(cmd).await,
        ClientCommand::Secret(cmd) => secrets::run(cmd).await,
        ClientCommand::Env(cmd) => environments::run(cmd).await,
        ClientCommand::Audit(args) => access::audit(args).await,
        ClientCommand::Trigger(cmd) => triggers::run(cmd).await,
        ClientCommand::Workflow(cmd) => workflows::workflow(cmd).await,
        ClientCommand::Instance(cmd) => workflows::instance(cmd).await,
        ClientCommand::Command(cmd) => commands::run(cmd).await,
    };
    match result {
        Ok(code) => Ok(code),
        // `shoal instances | head` closing the pipe early is not a failure.
        Err(e) if is_broken_pipe(&e) => Ok(0),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(1)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == ErrorKind::BrokenPipe)
}

/// Writes to stdout, reporting errors (a closed pipe) instead of panicking like `print!`.
fn print_out(text: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_ref())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: ClientCommand,
    }

    fn parse(args: &str) -> Result<ClientCommand, String> {
        Cli::try_parse_from(std::iter::once("shoal").chain(args.split_whitespace()))
            .map(|c| c.cmd)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn actions_take_an_instance_id_and_wait() {
        assert!(matches!(parse("stop 7"), Ok(ClientCommand::Stop(_))));
        assert!(matches!(
            parse("resubmit 7 --wait"),
            Ok(ClientCommand::Resubmit(_))
        ));
        assert!(parse("pause x").unwrap_err().contains("invalid value 'x'"));
        assert!(parse("rerun").is_err());
    }

    #[test]
    fn backfill_takes_a_range_or_dates_and_has_a_status() {
        assert!(parse("backfill etl --from 2026-01-01 --to 2026-01-07 --parallel 2").is_ok());
        assert!(parse("backfill etl --dates 2026-01-01,2026-01-03 --wait").is_ok());
        assert!(parse("backfill status 3").is_ok());
        let e = parse("backfill etl").unwrap_err();
        assert!(e.contains("--from") || e.contains("--dates"), "{e}");
        let e = parse("backfill etl --from 2026-01-01").unwrap_err();
        assert!(e.contains("--to"), "{e}");
        let e = parse("backfill etl --from 2026-01-01 --to 2026-01-02 --order up").unwrap_err();
        assert!(e.contains("'up'"), "{e}");
    }

    #[test]
    fn schedule_commands_name_a_workflow() {
        assert!(parse("schedule create etl --cron 0 --timezone UTC").is_ok());
        assert!(parse("schedule preview etl -n 3 -o json").is_ok());
        assert!(parse("schedule enable etl").is_ok());
        let e = parse("schedule create etl").unwrap_err();
        assert!(e.contains("--cron"), "{e}");
        let e = parse("schedule create etl --cron x --misfire never").unwrap_err();
        assert!(e.contains("'never'"), "{e}");
    }

    #[test]
    fn task_groups_and_alert_channels_take_what_they_need() {
        assert!(parse("task-group create etl --slots 2").is_ok());
        let e = parse("task-group create etl").unwrap_err();
        assert!(e.contains("--slots"), "{e}");
        assert!(parse("task-group delete etl").is_ok());
        assert!(parse("alert-channel create ops --type log").is_ok());
        assert!(
            parse("alert-channel create ops --type webhook --url http://h/x --format slack")
                .is_ok()
        );
        let e = parse("alert-channel create ops --type webhook").unwrap_err();
        assert!(e.contains("--url"), "{e}");
        let e = parse("alert-channel create ops --type pager").unwrap_err();
        assert!(e.contains("pager") && e.contains("webhook"), "{e}");
        assert!(parse("alerts --instance 7 --state failed").is_ok());
    }

    #[test]
    fn workflow_reads_name_a_workflow_and_versions() {
        assert!(parse("workflow list -o json --project sales").is_ok());
        assert!(parse("workflow show etl --version 2 -o json").is_ok());
        assert!(parse("workflow versions etl").is_ok());
        assert!(parse("workflow diff etl --from 1 --to 3").is_ok());
        assert!(parse("workflow export etl --version 1").is_ok());
        assert!(parse("workflow show").is_err());
        let e = parse("workflow diff etl --from one").unwrap_err();
        assert!(e.contains("'one'"), "{e}");
    }

    #[test]
    fn a_scope_needs_a_task_to_start_from() {
        assert!(parse("start etl --from-task b --scope only --dry-run").is_ok());
        assert!(parse("start etl --from-task b").is_ok());
        let e = parse("start etl --scope only").unwrap_err();
        assert!(e.contains("--from-task"), "{e}");
        let e = parse("start etl --from-task b --scope sideways").unwrap_err();
        assert!(e.contains("sideways") && e.contains("upstream"), "{e}");
    }
}
