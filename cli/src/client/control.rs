//! `shoal stop|pause|resume|rerun|resubmit ID [--wait]`: operator actions on an instance.

use super::http::{Api, Body};
use super::start::{follow, wait_for_instance};
use super::{Connection, print_out};
use serde::Deserialize;
use serde_json::json;
use shoal_common::types::WorkflowState;

#[derive(clap::Args, Debug)]
pub struct ActionArgs {
    /// Workflow instance id.
    id: i64,
    /// Then wait for the instance to end, showing progress; exit 0 only if it ends as asked
    /// (stopped for stop, paused for pause, success otherwise).
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Stop,
    Pause,
    Resume,
    Rerun,
    Resubmit,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Stop => "stop",
            Verb::Pause => "pause",
            Verb::Resume => "resume",
            Verb::Rerun => "rerun",
            Verb::Resubmit => "resubmit",
        }
    }

    /// The last segment of `POST /instances/{id}/{action}`.
    fn action(self) -> &'static str {
        match self {
            Verb::Resubmit => "resubmit-failed",
            other => other.name(),
        }
    }

    /// The state the instance should end in for `--wait` to exit 0.
    fn goal(self) -> WorkflowState {
        match self {
            Verb::Stop => WorkflowState::Stopped,
            Verb::Pause => WorkflowState::Paused,
            Verb::Resume | Verb::Rerun | Verb::Resubmit => WorkflowState::Success,
        }
    }

    /// Stop and pause are answered by the master at once; the others are commands.
    fn is_command(self) -> bool {
        !matches!(self, Verb::Stop | Verb::Pause)
    }
}

/// The answer to a stop or pause.
#[derive(Deserialize)]
struct Controlled {
    state: String,
}

/// The answer to a resume, rerun or resubmit.
#[derive(Deserialize)]
struct Queued {
    command_id: i64,
}

pub async fn run(verb: Verb, args: ActionArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let id = args.id.to_string();
    let path = ["instances", &id, verb.action()];
    let body = Body::json(&json!({}));
    let name = verb.name();
    if verb.is_command() {
        let queued: Queued = api.post(&path, body).await?;
        let instance = wait_for_instance(&api, queued.command_id).await?;
        print_out(format!("{name} started: instance {instance}\n"))?;
    } else {
        let c: Controlled = api.post(&path, body).await?;
        print_out(format!("{name} requested: instance {id} is {}\n", c.state))?;
    }
    if !args.wait {
        return Ok(0);
    }
    follow(&api, args.id, verb.goal()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resubmit_is_the_resubmit_failed_action() {
        assert_eq!(Verb::Resubmit.action(), "resubmit-failed");
        assert_eq!(Verb::Stop.action(), "stop");
        assert_eq!(Verb::Pause.goal(), WorkflowState::Paused);
        assert_eq!(Verb::Stop.goal(), WorkflowState::Stopped);
        assert_eq!(Verb::Rerun.goal(), WorkflowState::Success);
        assert!(Verb::Resume.is_command() && !Verb::Pause.is_command());
    }
}
