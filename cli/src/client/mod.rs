//! The client commands of the `shoal` binary (`apply`, `start`, `instances`, `status`,
//! `logs`). They talk to the api-server over HTTP, never to the database.

mod apply;
mod http;
mod inspect;
mod start;
mod table;

use std::io::ErrorKind;

/// Where the api-server is and how to authenticate to it.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    /// Base URL of the shoal api-server (or of `shoal standalone`).
    #[arg(long, env = "SHOAL_API", default_value = "http://127.0.0.1:12345")]
    pub api: String,
    /// Bearer token, needed for writes when the api-server was started with one.
    #[arg(long, env = "SHOAL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
}

#[derive(clap::Subcommand, Debug)]
pub enum ClientCommand {
    /// Store a workflow definition (YAML or JSON) as a new version, unless it is unchanged.
    Apply(apply::ApplyArgs),
    /// Start a run of the latest version of a workflow; prints the instance id.
    Start(start::StartArgs),
    /// List workflow instances, newest first.
    Instances(inspect::InstancesArgs),
    /// Show one workflow instance and its tasks.
    Status(inspect::StatusArgs),
    /// Print the log of one task instance.
    Logs(inspect::LogsArgs),
}

/// Runs a client command and returns the process exit code. Errors are printed here, as
/// one line on stderr, and give exit code 1.
pub async fn run(cmd: ClientCommand) -> anyhow::Result<i32> {
    let result = match cmd {
        ClientCommand::Apply(args) => apply::run(args).await,
        ClientCommand::Start(args) => start::run(args).await,
        ClientCommand::Instances(args) => inspect::instances(args).await,
        ClientCommand::Status(args) => inspect::status(args).await,
        ClientCommand::Logs(args) => inspect::logs(args).await,
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
