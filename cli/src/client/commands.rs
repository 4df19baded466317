//! `shoal command list|cancel`: commands no master has claimed yet, such as runs at a later
//! time (`shoal start W --at TIME`), and cancelling one before it starts.

use super::http::Api;
use super::inspect::list_out;
use super::table::{cell, time};
use super::{Connection, ProjectListArgs, print_out};
use reqwest::Method;
use serde_json::Value;

#[derive(clap::Subcommand, Debug)]
pub enum CommandCommand {
    /// List a project's pending commands, those due soonest first, with their due time
    /// (`-` for at once).
    List(ProjectListArgs),
    /// Cancel a pending command (a run at a later time) before it starts; a command a
    /// master already turned into an instance is refused (stop the instance instead).
    Cancel {
        id: i64,
        #[command(flatten)]
        conn: Connection,
    },
}

pub async fn run(cmd: CommandCommand) -> anyhow::Result<i32> {
    match cmd {
        CommandCommand::List(ProjectListArgs {
            project,
            output,
            conn,
        }) => {
            let segments = ["projects", project.as_str(), "commands"];
            let pending: Vec<Value> = Api::new(&conn)?.get(&segments, &[]).await?;
            let headers = ["id", "kind", "workflow", "version", "due", "written"];
            return list_out(&pending, output, &headers, |c| {
                vec![
                    cell(&c["id"]),
                    cell(&c["kind"]),
                    cell(&c["workflow"]),
                    cell(&c["version"]),
                    time(&c["due_at"]),
                    time(&c["created_at"]),
                ]
            });
        }
        CommandCommand::Cancel { id, conn } => {
            let id = id.to_string();
            Api::new(&conn)?
                .send(Method::DELETE, &["commands", &id], &[], None)
                .await?;
            print_out(format!("command {id} cancelled\n"))?;
        }
    }
    Ok(0)
}
