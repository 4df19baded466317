//! What the engine sees happen to an attempt it has out, and the state the runtime
//! decides for it. The engine reports facts (a child run ended, a wait timed out, a kill
//! arrived while the run was pausing) and writes the state decided here; it decides none.

use super::{Node, WorkflowRuntime};
use shoal_common::definition::OnTimeout;
use shoal_common::duration;
use shoal_common::types::{TaskState, WorkflowState};
use std::time::Duration;

/// Something that ends an attempt the master settles (not a worker's report).
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// It left the queue or its wait before it reached a worker; `killed`: a kill asked
    /// for that (otherwise a pause did).
    Cancelled { killed: bool },
    /// Its worker left, restarted, gave it up or cannot be reached: why.
    Lost(String),
    /// It cannot run as defined (a spec that cannot be built, a missing secret or task
    /// group, an expression that fails, a child run that cannot be started): why.
    Unrunnable(String),
    /// The master did what the task does (a logic task, a dry run); what it says.
    Done(Option<String>),
    /// Its child run `instance` ended in `state`.
    ChildEnded { instance: i64, state: WorkflowState },
    /// A switch or conditions task chose these downstream tasks (by name).
    Branched(Vec<String>),
    /// Its dependencies succeeded.
    DependencyMet,
    /// One of its dependencies failed, and it does not wait for a rerun: why.
    DependencyFailed(String),
    /// Its dependency wait timed out: what it still waited for.
    DependencyTimedOut(String),
}

/// How a wait or callback task ends when its timeout passes with nothing completing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expiry {
    pub after: Duration,
    pub state: TaskState,
    pub message: String,
}

impl WorkflowRuntime {
    /// The state (and the row's message) an attempt ends in for `fact`.
    pub fn decide(&self, fact: Fact) -> (TaskState, Option<String>) {
        match fact {
            Fact::Cancelled { killed: false } if self.pause_requested => (
                TaskState::Paused,
                Some("paused before it reached a worker".into()),
            ),
            Fact::Cancelled { .. } => (
                TaskState::Killed,
                Some("cancelled before it reached a worker".into()),
            ),
            Fact::Lost(why) => (TaskState::NeedFaultTolerance, Some(why)),
            Fact::Unrunnable(why) | Fact::DependencyFailed(why) => (TaskState::Failure, Some(why)),
            Fact::Done(message) => (TaskState::Success, message),
            Fact::Branched(chosen) => (
                TaskState::Success,
                Some(match chosen.is_empty() {
                    true => "no case held and there is no default: nothing downstream runs".into(),
                    false => format!("chose {}", chosen.join(", ")),
                }),
            ),
            Fact::ChildEnded { instance, state } => {
                let message = Some(format!("child instance {instance} ended {state}"));
                match state {
                    WorkflowState::Success => (TaskState::Success, message),
                    _ => (TaskState::Failure, message),
                }
            }
            Fact::DependencyMet => (
                TaskState::Success,
                Some("its dependencies succeeded".into()),
            ),
            Fact::DependencyTimedOut(why) => {
                (TaskState::Failure, Some(format!("timed out: {why}")))
            }
        }
    }

    /// The state a callback task ends in when its request fails (no answer, or not the
    /// expected one) before anything completed it: no callback is to be expected.
    pub fn callback_failure(&self) -> TaskState {
        TaskState::Failure
    }

    /// How wait or callback task `node` ends if nothing completes it within its
    /// `timeout` (none without one): its `on_timeout` decides.
    pub fn wait_expiry(&self, node: Node) -> Option<Expiry> {
        let def = &self.def.tasks[node];
        let timeout = def.timeout?;
        let after = format!("timed out after {}", duration::format(timeout));
        let (state, message) = match def.on_timeout() {
            OnTimeout::Fail => (TaskState::Failure, format!("{after}: nothing completed it")),
            OnTimeout::Succeed => (TaskState::Success, format!("{after}; on_timeout: succeed")),
            OnTimeout::Run(task) => (TaskState::Success, format!("{after}; '{task}' runs")),
        };
        Some(Expiry {
            after: timeout,
            state,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Event;
    use super::super::test_util::runtime;
    use super::*;

    const WAIT: &str = "name: w\ntasks:\n- {name: a, type: wait, timeout: 5s}\n\
        - {name: b, type: wait, timeout: 5s, on_timeout: succeed}\n- {name: c, type: wait}\n";

    #[test]
    fn a_cancel_is_a_pause_only_while_pausing_and_not_asked_by_a_kill() {
        let mut rt = runtime(WAIT);
        rt.apply(Event::Start);
        let cancelled = |rt: &WorkflowRuntime, killed| rt.decide(Fact::Cancelled { killed }).0;
        assert_eq!(cancelled(&rt, false), TaskState::Killed);
        rt.pause().unwrap();
        assert_eq!(cancelled(&rt, false), TaskState::Paused);
        assert_eq!(cancelled(&rt, true), TaskState::Killed);
    }

    #[test]
    fn a_child_run_passes_its_task_only_when_it_succeeded() {
        let rt = runtime(WAIT);
        let ended = |state| rt.decide(Fact::ChildEnded { instance: 7, state });
        assert_eq!(ended(WorkflowState::Success).0, TaskState::Success);
        let (state, message) = ended(WorkflowState::Stopped);
        assert_eq!(state, TaskState::Failure);
        assert_eq!(message.as_deref(), Some("child instance 7 ended stopped"));
    }

    #[test]
    fn a_wait_times_out_as_its_on_timeout_says() {
        let rt = runtime(WAIT);
        let fail = rt.wait_expiry(0).unwrap();
        assert_eq!(
            (fail.after, fail.state),
            (Duration::from_secs(5), TaskState::Failure)
        );
        assert_eq!(rt.wait_expiry(1).unwrap().state, TaskState::Success);
        assert_eq!(rt.wait_expiry(2), None, "no timeout, no expiry");
    }
}
