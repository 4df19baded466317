//! `shoal task complete|kill|force-success|rerun ID`: operator actions on one task attempt.

use super::http::{Api, Body};
use super::start::{follow, parse_param, wait_for_instance};
use super::{Connection, print_out};
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::types::WorkflowState;

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
    /// Kill a running attempt; its instance goes on as its failure strategy says.
    Kill {
        /// The task instance id (`shoal status INSTANCE` lists them).
        id: i64,
        #[command(flatten)]
        conn: Connection,
    },
    /// Run an ended task of a finished instance again as a new attempt (with
    /// --downstream, what depends on it too); every other task keeps its state.
    Rerun {
        /// The task instance id (`shoal status INSTANCE` lists them).
        id: i64,
        /// Rerun what depends on the task too.
        #[arg(long)]
        downstream: bool,
        /// Then wait for the instance to end, showing progress; exit 0 only on success.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        conn: Connection,
    },
    /// Mark a failed or killed attempt of a failed or stopped instance as passed
    /// (`forced_success`) and resubmit the instance: what follows the task runs.
    ForceSuccess {
        /// The task instance id (`shoal status INSTANCE` lists them).
        id: i64,
        /// Then wait for the instance to end, showing progress; exit 0 only on success.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        conn: Connection,
    },
}

/// The answer to a task action.
#[derive(Deserialize)]
struct Accepted {
    workflow_instance_id: i64,
    command_id: Option<i64>,
}

pub async fn run(cmd: TaskCommand) -> anyhow::Result<i32> {
    match cmd {
        TaskCommand::Kill { id, conn } => {
            let api = Api::new(&conn)?;
            let a: Accepted = act(&api, id, "kill", json!({})).await?;
            let instance = a.workflow_instance_id;
            print_out(format!(
                "kill requested: task instance {id} of instance {instance}\n"
            ))?;
            Ok(0)
        }
        TaskCommand::ForceSuccess { id, wait, conn } => {
            let api = Api::new(&conn)?;
            let a: Accepted = act(&api, id, "force-success", json!({})).await?;
            let done = format!("task instance {id} forced to success; its instance goes on");
            go_on(&api, a, &done, wait).await
        }
        TaskCommand::Rerun {
            id,
            downstream,
            wait,
            conn,
        } => {
            let api = Api::new(&conn)?;
            let body = json!({ "downstream": downstream });
            let a: Accepted = act(&api, id, "rerun", body).await?;
            let what = if downstream {
                " and what follows it"
            } else {
                ""
            };
            let done = format!("task instance {id}{what} runs again");
            go_on(&api, a, &done, wait).await
        }
        TaskCommand::Complete {
            id,
            failure,
            outputs,
            message,
            conn,
        } => complete(id, failure, outputs, message, conn).await,
    }
}

async fn act(api: &Api, id: i64, action: &str, body: Value) -> anyhow::Result<Accepted> {
    let path = ["task-instances", &id.to_string(), action];
    api.post(&path, Body::json(&body)).await
}

/// Once a master took the instance up again: says `done`, and with `wait` follows the
/// instance to its end.
async fn go_on(api: &Api, a: Accepted, done: &str, wait: bool) -> anyhow::Result<i32> {
    if let Some(command) = a.command_id {
        wait_for_instance(api, command).await?;
    }
    let instance = a.workflow_instance_id;
    print_out(format!("{done} (instance {instance})\n"))?;
    if !wait {
        return Ok(0);
    }
    follow(api, instance, WorkflowState::Success).await
}

async fn complete(
    id: i64,
    failure: bool,
    outputs: Vec<(String, String)>,
    message: Option<String>,
    conn: Connection,
) -> anyhow::Result<i32> {
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
