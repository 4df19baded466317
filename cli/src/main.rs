//! `shoal`: every server role and the client commands in one binary.

mod client;
mod config;
mod roles;

use clap::{Parser, Subcommand};
use roles::{ApiServerArgs, MasterArgs, StandaloneArgs, WorkerArgs};
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
    #[command(flatten)]
    Client(client::ClientCommand),
}

fn init_logs(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    config::apply_config_file(&argv)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
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
        Cmd::Client(c) => {
            init_logs("warn");
            std::process::exit(client::run(c).await?)
        }
    }
}
