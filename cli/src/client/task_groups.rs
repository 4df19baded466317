//! `shoal task-group create|list|delete`.

use super::http::{Api, Body};
use super::inspect::list_out;
use super::table::cell;
use super::{Connection, ListArgs, NamedArgs, print_out};
use serde_json::{Value, json};

#[derive(clap::Subcommand, Debug)]
pub enum TaskGroupCommand {
    /// Create a task group: at most SLOTS of its tasks run at once, across workflows.
    Create {
        name: String,
        #[arg(long)]
        slots: i32,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// List task groups with their slots in use and waiting tasks.
    List(ListArgs),
    /// Delete a task group no task runs in or waits for.
    Delete(NamedArgs),
}

pub async fn run(cmd: TaskGroupCommand) -> anyhow::Result<i32> {
    match cmd {
        TaskGroupCommand::Create {
            name,
            slots,
            description,
            conn,
        } => {
            let body = json!({ "name": name, "slots": slots, "description": description });
            let _: Value = Api::new(&conn)?
                .post(&["task-groups"], Body::json(&body))
                .await?;
            print_out(format!("task group {name} created with {slots} slot(s)\n"))?;
        }
        TaskGroupCommand::List(ListArgs { output, conn }) => {
            let groups: Vec<Value> = Api::new(&conn)?.get(&["task-groups"], &[]).await?;
            let headers = ["name", "in_use/slots", "waiting", "description"];
            return list_out(&groups, output, &headers, |g| {
                vec![
                    cell(&g["name"]),
                    format!("{}/{}", cell(&g["in_use"]), cell(&g["slots"])),
                    cell(&g["waiting"]),
                    cell(&g["description"]),
                ]
            });
        }
        TaskGroupCommand::Delete(NamedArgs { name, conn }) => {
            let _: Value = Api::new(&conn)?.delete(&["task-groups", &name]).await?;
            print_out(format!("task group {name} deleted\n"))?;
        }
    }
    Ok(0)
}
