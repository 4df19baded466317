//! `shoal`: every server role and the client commands in one binary.

mod client;
mod config;
mod dolphinscheduler;
mod roles;

use clap::{CommandFactory, Parser, Subcommand};
use roles::{ApiServerArgs, MasterArgs, StandaloneArgs, WorkerArgs};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "A master/worker batch workflow scheduler"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Everything in one process: SQLite, an in-process registry, API and UI on one port.
    Standalone(StandaloneArgs),
    /// REST API and web UI of a cluster (Postgres).
    ApiServer(ApiServerArgs),
    /// A cluster master: claims commands, drives workflow instances, dispatches tasks.
    Master(MasterArgs),
    /// A cluster worker: runs tasks and reports their events.
    Worker(WorkerArgs),
    /// Print the REST API's OpenAPI 3.1 document (JSON); needs no server.
    Openapi,
    #[command(flatten)]
    Client(client::ClientCommand),
}

/// Log lines go to stderr; they carry ANSI colours only when stderr is a terminal and
/// `NO_COLOR` is unset or empty (<https://no-color.org>), so a log file or pipe stays plain.
fn init_logs(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let ansi = log_colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

/// Whether log output is coloured, given whether its stream is a terminal and the value of
/// `NO_COLOR`.
fn log_colours(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn main() -> anyhow::Result<()> {
    // The config file and the environment are read before any runtime thread exists.
    let argv: Vec<String> = std::env::args().collect();
    config::refuse_secrets_in_args(&argv, &Cli::command())?;
    let argv = config::with_config_file(argv, &Cli::command())?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse_from(argv);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let server_logs = "info,sqlx=warn,h2=warn,tower=warn,hyper=warn";
    match cli.cmd {
        Cmd::Standalone(a) => {
            if roles::dump_config(&a, &a.common)? {
                return Ok(());
            }
            init_logs(server_logs);
            roles::standalone(a).await
        }
        Cmd::ApiServer(a) => {
            if roles::dump_config(&a, &a.common)? {
                return Ok(());
            }
            init_logs(server_logs);
            roles::api_server(a).await
        }
        Cmd::Master(a) => {
            if roles::dump_config(&a, &a.common)? {
                return Ok(());
            }
            init_logs(server_logs);
            roles::master(a).await
        }
        Cmd::Worker(a) => {
            if roles::dump_config(&a, &a.common)? {
                return Ok(());
            }
            init_logs(server_logs);
            roles::worker(a).await
        }
        Cmd::Openapi => {
            println!("{}", shoal_api_server::openapi_document().to_pretty_json()?);
            Ok(())
        }
        Cmd::Client(c) => {
            // The verifier logs an untrusted certificate as an error of its own; the
            // command's error says it, with what to do.
            init_logs("warn,rustls_platform_verifier=off");
            std::process::exit(client::run(c).await?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_colours;
    use std::ffi::OsStr;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colours(true, None));
        assert!(
            log_colours(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
        assert!(!log_colours(true, Some(OsStr::new("1"))));
        assert!(!log_colours(false, None), "a file or pipe gets plain text");
        assert!(!log_colours(false, Some(OsStr::new("1"))));
    }
}
