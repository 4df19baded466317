use super::super::test_util::{created, row, settled};
use super::super::{Event, Recovery};
use super::*;
use shoal_common::definition::{ITERATION, WorkflowDef};
use shoal_common::types::WorkflowState;

/// Nodes: 0 `before`, 1 `poll` (check → note), 2 `after`; iterations are appended from 3.
const LOOP: &str = "name: l\ntasks:\n- {name: before, type: noop}\n- {name: poll, type: do_while, depends_on: [before], do_while: {condition: 'true', max_iterations: 3, tasks: [{name: check, type: shell, command: 'echo ${iteration}', retries: 1}, {name: note, type: noop, depends_on: [check]}]}}\n- {name: after, type: noop, depends_on: [poll]}\n";

fn runtime() -> WorkflowRuntime {
    super::super::test_util::runtime(LOOP)
}

fn asked(out: &Outcome) -> Option<u32> {
    out.actions.iter().find_map(|a| match a {
        Action::CheckLoop { iteration, .. } => Some(*iteration),
        _ => None,
    })
}

fn ended(node: Node, attempt: i32, state: TaskState, pairs: &[(&str, &str)]) -> Event {
    let output = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Event::Task {
        node,
        attempt,
        state,
        output,
    }
}

fn checked(iteration: u32, holds: Result<bool, String>) -> Event {
    Event::LoopChecked {
        node: 1,
        attempt: 1,
        iteration,
        holds,
    }
}

/// A runtime whose loop has started its first iteration (nodes 3 and 4).
fn looping() -> WorkflowRuntime {
    let mut rt = runtime();
    rt.apply(Event::Start);
    assert_eq!(
        created(&rt.apply(ended(0, 1, TaskState::Success, &[]))),
        [1]
    );
    let out = rt.apply(checked(0, Ok(true)));
    assert!(out.accepted);
    assert_eq!(created(&out), [3], "the first task of iteration 1");
    rt
}

fn names(rt: &WorkflowRuntime, nodes: std::ops::Range<Node>) -> Vec<&str> {
    nodes
        .map(|n| rt.definition().tasks[n].name.as_str())
        .collect()
}

#[test]
fn iterations_run_in_turn_hand_on_their_outputs_and_end_when_the_condition_fails() {
    let mut rt = looping();
    assert_eq!(names(&rt, 3..5), ["poll[1].check", "poll[1].note"]);
    assert_eq!(rt.definition().tasks[3].params[ITERATION], "1");
    assert_eq!(
        created(&rt.apply(ended(3, 1, TaskState::Success, &[("ready", "no")]))),
        [4]
    );
    let out = rt.apply(ended(4, 1, TaskState::Success, &[]));
    assert_eq!(asked(&out), Some(1), "the condition is asked for once");
    assert_eq!(rt.iteration_outputs(1)[0].1["ready"], "no");
    assert!(
        !rt.apply(checked(2, Ok(true))).accepted,
        "not that iteration"
    );

    let out = rt.apply(checked(1, Ok(true)));
    assert_eq!(created(&out), [5]);
    assert_eq!(names(&rt, 5..7), ["poll[2].check", "poll[2].note"]);
    let seen = rt.task_params(5, &Params::new(), &Params::new());
    assert_eq!(seen["ready"], "no", "an iteration sees the one before");
    assert_eq!(seen[ITERATION], "2");
    assert!(
        !rt.apply(checked(1, Ok(false))).accepted,
        "a stale answer changes nothing"
    );

    rt.apply(ended(5, 1, TaskState::Success, &[("ready", "yes")]));
    assert_eq!(
        asked(&rt.apply(ended(6, 1, TaskState::Success, &[]))),
        Some(2)
    );
    let out = rt.apply(checked(2, Ok(false)));
    let (state, output, message) = settled(&out).unwrap();
    assert_eq!(state, TaskState::Success);
    assert_eq!(message, "2 iterations; the condition no longer holds");
    assert_eq!(
        (output["ready"].as_str(), output[ITERATIONS].as_str()),
        ("yes", "2")
    );
    assert_eq!(created(&out), [2], "what follows the loop runs");
    rt.apply(ended(2, 1, TaskState::Success, &[]));
    assert_eq!(rt.state(), WorkflowState::Success);
}

#[test]
fn max_iterations_a_failed_iteration_and_a_bad_condition_fail_the_loop() {
    let mut rt = looping();
    for k in 1..=3u32 {
        let first = 3 + 2 * (k as usize - 1);
        rt.apply(ended(first, 1, TaskState::Success, &[]));
        rt.apply(ended(first + 1, 1, TaskState::Success, &[]));
        let out = rt.apply(checked(k, Ok(true)));
        if k == 3 {
            let (state, _, message) = settled(&out).unwrap();
            assert_eq!(state, TaskState::Failure);
            assert_eq!(
                message,
                "reached max_iterations (3) with the condition still true"
            );
        }
    }
    assert_eq!(rt.state(), WorkflowState::Failure);

    let mut rt = looping();
    let retry = rt.apply(ended(3, 1, TaskState::Failure, &[]));
    assert_eq!(created(&retry), [3], "the body's retries apply");
    let out = rt.apply(ended(3, 2, TaskState::Failure, &[]));
    let (state, _, message) = settled(&out).unwrap();
    assert_eq!(state, TaskState::Failure);
    assert_eq!(message, "iteration 1: task 'poll[1].check' ended failure");
    assert_eq!(rt.state(), WorkflowState::Failure, "note never started");

    let mut rt = looping();
    rt.apply(ended(3, 1, TaskState::Success, &[]));
    rt.apply(ended(4, 1, TaskState::Success, &[]));
    let out = rt.apply(checked(1, Err("no such field".into())));
    assert_eq!(settled(&out).unwrap().2, "no such field");
}

#[test]
fn a_failover_appends_the_begun_iterations_and_goes_on_where_the_loop_was() {
    let none = Params::new();
    let ready = Params::from([("ready".to_string(), "no".to_string())]);
    let rows = [
        row("before", 1, TaskState::Success, &none),
        row("poll", 1, TaskState::Running, &none),
        row("poll[1].check", 1, TaskState::Success, &ready),
        row("poll[1].note", 1, TaskState::Success, &none),
        row("poll[2].check", 1, TaskState::Failure, &none),
        row("poll[2].check", 2, TaskState::Running, &none),
    ];
    let def = Arc::new(WorkflowDef::parse(LOOP).unwrap());
    let mut rt = WorkflowRuntime::restore(def, &rows, Recovery::Failover);
    assert_eq!(names(&rt, 5..7), ["poll[2].check", "poll[2].note"]);
    let mut flight = rt.in_flight();
    flight.sort_by_key(|(node, ..)| *node);
    assert_eq!(
        flight,
        [(1, 1, TaskState::Running), (5, 2, TaskState::Running)],
        "the loop and its retried task are adopted, nothing starts again"
    );
    assert!(created(&rt.apply(Event::Start)).is_empty());
    let seen = rt.task_params(5, &Params::new(), &Params::new());
    assert_eq!(
        seen["ready"], "no",
        "iteration 1's outputs still reach iteration 2"
    );
    assert_eq!(
        created(&rt.apply(ended(5, 2, TaskState::Success, &[]))),
        [6]
    );
    assert_eq!(
        asked(&rt.apply(ended(6, 1, TaskState::Success, &[]))),
        Some(2)
    );

    // Restored between iterations: the condition is asked for again.
    let done = [
        row("before", 1, TaskState::Success, &none),
        row("poll", 1, TaskState::Running, &none),
        row("poll[1].check", 1, TaskState::Success, &ready),
        row("poll[1].note", 1, TaskState::Success, &none),
    ];
    let def = Arc::new(WorkflowDef::parse(LOOP).unwrap());
    let mut rt = WorkflowRuntime::restore(def, &done, Recovery::Failover);
    assert_eq!(asked(&rt.apply(Event::Start)), Some(1));
}
