//! Operator requests and the workflow timeout: stop, pause, time out.

use super::{Action, Node, Refused, Slot, WorkflowRuntime};
use shoal_common::definition::TerminateState;
use shoal_common::types::WorkflowState;

impl WorkflowRuntime {
    /// The workflow's timeout passed under strategy `fail`: stop, but end `failure`.
    pub fn time_out(&mut self) -> Vec<Action> {
        if self.stop_requested || self.state.is_terminal() {
            return vec![];
        }
        self.timed_out = true;
        self.stop().unwrap_or_default()
    }

    /// A terminate task succeeded: what runs is killed, nothing new starts, and the run
    /// ends in the task's state once what ran has settled.
    pub(super) fn terminate(&mut self, node: Node) -> Vec<Action> {
        let task = &self.def.tasks[node];
        let Some(spec) = &task.terminate else {
            return vec![];
        };
        self.terminated = Some(match spec.state {
            TerminateState::Success => WorkflowState::Success,
            TerminateState::Failure => WorkflowState::Failure,
        });
        self.end_message = Some(
            spec.message
                .clone()
                .unwrap_or_else(|| format!("terminated by task '{}'", task.name)),
        );
        self.kill_all()
    }

    /// Kills every attempt in flight.
    pub(super) fn kill_all(&self) -> Vec<Action> {
        self.active_attempts()
            .map(|(node, attempt)| Action::KillTask { node, attempt })
            .collect()
    }

    /// Stop: kill what runs, start nothing new; the instance ends `stopped`.
    pub fn stop(&mut self) -> Result<Vec<Action>, Refused> {
        match self.state {
            WorkflowState::ReadyStop => return Ok(vec![]),
            WorkflowState::Running | WorkflowState::ReadyPause => {}
            other => {
                return Err(Refused(format!(
                    "instance is {other}; only a running or pausing instance can be stopped"
                )));
            }
        }
        self.stop_requested = true;
        self.state = WorkflowState::ReadyStop;
        let mut actions = vec![Action::SetState {
            state: WorkflowState::ReadyStop,
        }];
        actions.extend(self.kill_all());
        self.finish_if_settled(&mut actions);
        Ok(actions)
    }

    /// An operator kills one attempt in flight: it ends `killed`, and the run goes on as
    /// after any killed task (its failure strategy decides).
    pub fn kill_task(&mut self, node: Node, attempt: i32) -> Result<Vec<Action>, Refused> {
        if self.state.is_terminal() {
            return Err(Refused(format!("instance is {}", self.state)));
        }
        match self.slots[node] {
            Slot::Active { attempt: a, .. } if a == attempt => {
                Ok(vec![Action::KillTask { node, attempt }])
            }
            _ => Err(Refused(format!(
                "attempt {attempt} of task '{}' is not running",
                self.def.tasks[node].name
            ))),
        }
    }

    /// Pause: running tasks finish, queued ones are withdrawn, nothing new starts; the
    /// instance ends `paused` and can be resumed.
    pub fn pause(&mut self) -> Result<Vec<Action>, Refused> {
        match self.state {
            WorkflowState::ReadyPause => return Ok(vec![]),
            WorkflowState::Running => {}
            other => {
                return Err(Refused(format!(
                    "instance is {other}; only a running instance can be paused"
                )));
            }
        }
        self.pause_requested = true;
        self.state = WorkflowState::ReadyPause;
        let mut actions = vec![Action::SetState {
            state: WorkflowState::ReadyPause,
        }];
        actions.extend(
            self.active_attempts()
                .map(|(node, attempt)| Action::Withdraw { node, attempt }),
        );
        self.finish_if_settled(&mut actions);
        Ok(actions)
    }
}
