//! Operator requests and the workflow timeout: stop, pause, time out.

use super::*;

impl WorkflowRuntime {
    /// The workflow's timeout passed under strategy `fail`: stop, but end `failure`.
    pub fn time_out(&mut self) -> Vec<Action> {
        if self.stop_requested || self.state.is_terminal() {
            return vec![];
        }
        self.timed_out = true;
        self.stop().unwrap_or_default()
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
        actions.extend(
            self.active_attempts()
                .map(|(node, attempt)| Action::KillTask { node, attempt }),
        );
        self.finish_if_settled(&mut actions);
        Ok(actions)
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
