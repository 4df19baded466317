//! `shoal task-group create|list|delete`.

use super::http::{Api, Body};
use super::inspect::json_out;
use super::table::{cell, render};
use super::{Connection, Output, print_out};
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
    List {
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
    /// Delete a task group no task runs in or waits for.
    Delete {
        name: String,
        #[command(flatten)]
        conn: Connection,
    },
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
        TaskGroupCommand::List { output, conn } => {
            let groups: Vec<Value> = Api::new(&conn)?.get(&["task-groups"], &[]).await?;
            if output == Output::Json {
                return json_out(&groups);
            }
            let rows: Vec<Vec<String>> = groups
                .iter()
                .map(|g| {
                    vec![
                        cell(&g["name"]),
                        format!("{}/{}", cell(&g["in_use"]), cell(&g["slots"])),
                        cell(&g["waiting"]),
                        cell(&g["description"]),
                    ]
                })
                .collect();
            print_out(render(
                &["name", "in_use/slots", "waiting", "description"],
                &rows,
            ))?;
        }
        TaskGroupCommand::Delete { name, conn } => {
            let _: Value = Api::new(&conn)?.delete(&["task-groups", &name]).await?;
            print_out(format!("task group {name} deleted\n"))?;
        }
    }
    Ok(0)
}
