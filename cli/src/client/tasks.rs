//! `shoal task complete`: ends a waiting wait or callback task.

use super::http::{Api, Body};
use super::start::parse_param;
use super::{Connection, print_out};
use serde_json::{Value, json};

#[derive(clap::Subcommand, Debug)]
pub enum TaskCommand {
    /// Complete a waiting `wait` or `callback` task (an approval, a signal); its instance
    /// goes on. A task completed already is refused.
    Complete {
        /// The task instance id (`shoal status INSTANCE` lists them).
        id: i64,
        /// End it as failed (e.g. a rejected approval) instead of succeeded.
        #[arg(long)]
        failure: bool,
        /// An output parameter downstream tasks see as `${KEY}`; repeatable.
        #[arg(long = "output", value_name = "KEY=VALUE", value_parser = parse_param)]
        outputs: Vec<(String, String)>,
        /// Shown on the task.
        #[arg(long)]
        message: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
}

pub async fn run(cmd: TaskCommand) -> anyhow::Result<i32> {
    let TaskCommand::Complete {
        id,
        failure,
        outputs,
        message,
        conn,
    } = cmd;
    let state = if failure { "failure" } else { "success" };
    let outputs: serde_json::Map<String, Value> = outputs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let mut body = json!({ "state": state, "outputs": outputs });
    if let Some(m) = message {
        body["message"] = Value::String(m);
    }
    let path = ["task-instances", &id.to_string(), "complete"];
    let _: Value = Api::new(&conn)?.post(&path, Body::json(&body)).await?;
    print_out(format!("task instance {id} completed as {state}\n"))?;
    Ok(0)
}
