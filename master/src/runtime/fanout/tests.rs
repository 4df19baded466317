use super::super::test_util::{row, runtime, settled};
use super::super::{Event, Recovery};
use super::*;
use shoal_common::definition::WorkflowDef;
use shoal_common::types::WorkflowState;

const FAN: &str = "name: f\ntasks:\n- {name: list, type: noop}\n- {name: each, type: foreach, depends_on: [list], foreach: {items: '${files}', max_parallel: 2, task: {type: shell, command: 'echo ${item}', retries: 1}}}\n- {name: after, type: noop, depends_on: [each]}\n";

fn items(n: usize) -> Vec<serde_json::Value> {
    (0..n).map(|i| serde_json::json!(format!("f{i}"))).collect()
}

fn created(out: &Outcome) -> Vec<(Node, i32)> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateTask { node, attempt, .. } => Some((*node, *attempt)),
            _ => None,
        })
        .collect()
}

fn ended(node: Node, attempt: i32, state: TaskState, out: &str) -> Event {
    let output = match out {
        "" => Params::new(),
        v => Params::from([("out".to_string(), v.to_string())]),
    };
    Event::Task {
        node,
        attempt,
        state,
        output,
    }
}

/// A runtime whose foreach task (node 1) has started and expanded into `n` children.
fn expanded(yaml: &str, n: usize) -> (WorkflowRuntime, Outcome) {
    let mut rt = runtime(yaml);
    rt.apply(Event::Start);
    rt.apply(ended(0, 1, TaskState::Success, ""));
    let out = rt.apply(Event::Expanded {
        node: 1,
        attempt: 1,
        items: items(n),
    });
    (rt, out)
}

#[test]
fn children_run_at_most_max_parallel_at_once_in_order_and_join_their_outputs() {
    let (mut rt, out) = expanded(FAN, 5);
    assert!(out.accepted);
    assert_eq!(created(&out), vec![(3, 1), (4, 1)], "two at once, in order");
    let names: Vec<&str> = (3..8)
        .map(|n| rt.definition().tasks[n].name.as_str())
        .collect();
    assert_eq!(
        names,
        ["each[0]", "each[1]", "each[2]", "each[3]", "each[4]"]
    );
    assert_eq!(rt.definition().tasks[5].params["item"], "f2");
    // Finishing out of order: each end lets the next child start.
    assert_eq!(
        created(&rt.apply(ended(4, 1, TaskState::Success, "b"))),
        vec![(5, 1)]
    );
    assert_eq!(
        created(&rt.apply(ended(3, 1, TaskState::Failure, ""))),
        vec![(3, 2)],
        "a retry keeps its place"
    );
    assert_eq!(
        created(&rt.apply(ended(3, 2, TaskState::Success, "a"))),
        vec![(6, 1)]
    );
    for (node, out) in [(5, "c"), (6, "d")] {
        rt.apply(ended(node, 1, TaskState::Success, out));
    }
    let last = rt.apply(ended(7, 1, TaskState::Success, "e"));
    let (state, output, message) = settled(&last).expect("the foreach task ends");
    assert_eq!(state, TaskState::Success);
    assert_eq!(message, "5 of 5 items passed");
    let results: serde_json::Value = serde_json::from_str(&output[RESULTS]).unwrap();
    let outs: Vec<&str> = (0..5)
        .map(|i| results[i]["out"].as_str().unwrap())
        .collect();
    assert_eq!(outs, ["a", "b", "c", "d", "e"], "joined in element order");
    assert_eq!(
        created(&last),
        vec![(2, 1)],
        "what follows the foreach runs"
    );
    assert_eq!(
        rt.task_params(2, &Params::new(), &Params::new())[RESULTS],
        output[RESULTS]
    );
}

#[test]
fn a_failed_child_fails_the_foreach_once_all_settled_unless_it_ignores_failures() {
    let (mut rt, _) = expanded(FAN, 2);
    for attempt in [1, 2] {
        rt.apply(ended(3, attempt, TaskState::Failure, ""));
    }
    assert!(
        settled(&rt.apply(Event::Task {
            node: 4,
            attempt: 1,
            state: TaskState::Running,
            output: Params::new()
        }))
        .is_none(),
        "its sibling still runs"
    );
    let out = rt.apply(ended(4, 1, TaskState::Success, "ok"));
    let (state, output, message) = settled(&out).unwrap();
    assert_eq!(
        (state, message.as_str()),
        (TaskState::Failure, "1 of 2 items passed; failed: each[0]")
    );
    assert_eq!(output[RESULTS], r#"[null,{"out":"ok"}]"#);
    assert_eq!(rt.state(), WorkflowState::Failure);

    let ignoring = FAN.replace(
        "{name: each, type: foreach,",
        "{name: each, type: foreach, on_error: {action: ignore},",
    );
    let (mut rt, _) = expanded(&ignoring, 2);
    rt.apply(ended(3, 1, TaskState::Failure, ""));
    rt.apply(ended(3, 2, TaskState::Failure, ""));
    let out = rt.apply(ended(4, 1, TaskState::Success, "ok"));
    assert_eq!(settled(&out).unwrap().0, TaskState::Failure);
    assert_eq!(created(&out), vec![(2, 1)], "ignored: what follows runs");
    rt.apply(ended(2, 1, TaskState::Success, ""));
    assert_eq!(rt.state(), WorkflowState::Success);
}

#[test]
fn an_empty_list_passes_at_once_and_stop_kills_the_children() {
    let (rt, out) = expanded(FAN, 0);
    assert_eq!(settled(&out).unwrap().1[RESULTS], "[]");
    assert_eq!(created(&out), vec![(2, 1)]);
    drop(rt);

    let (mut rt, _) = expanded(FAN, 4);
    let kills = rt.stop().unwrap();
    let killed: Vec<Node> = kills
        .iter()
        .filter_map(|a| match a {
            Action::KillTask { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(
        killed,
        vec![1, 3, 4],
        "the foreach task and its running children"
    );
    rt.apply(ended(3, 1, TaskState::Killed, ""));
    let out = rt.apply(ended(4, 1, TaskState::Killed, ""));
    assert_eq!(
        settled(&out).unwrap().0,
        TaskState::Killed,
        "the unstarted never start"
    );
    assert_eq!(rt.state(), WorkflowState::Stopped);
}

#[test]
fn a_failover_expands_again_from_the_recorded_list_and_runs_nothing_twice() {
    let none = Params::new();
    let listed = Params::from([(ITEMS.to_string(), r#"["f0","f1","f2","f3"]"#.to_string())]);
    let a = Params::from([("out".to_string(), "a".to_string())]);
    let rows = [
        row("list", 1, TaskState::Success, &none),
        row("each", 1, TaskState::Running, &listed),
        row("each[0]", 1, TaskState::Success, &a),
        row("each[1]", 1, TaskState::Running, &none),
        row("each[2]", 1, TaskState::NeedFaultTolerance, &none),
    ];
    let def = Arc::new(WorkflowDef::parse(FAN).unwrap());
    let mut rt = WorkflowRuntime::restore(def, &rows, Recovery::Failover);
    let in_flight: Vec<Node> = rt.in_flight().iter().map(|(n, ..)| *n).collect();
    assert_eq!(
        in_flight,
        vec![1, 4],
        "the foreach task and each[1] are adopted"
    );
    assert_eq!(
        created(&rt.apply(Event::Start)),
        vec![(5, 2)],
        "the lost child runs again; with each[1] that is two at once"
    );
    rt.apply(ended(4, 1, TaskState::Success, "b"));
    rt.apply(ended(5, 2, TaskState::Success, "c"));
    let out = rt.apply(ended(6, 1, TaskState::Success, "d"));
    let results = &settled(&out).unwrap().1[RESULTS];
    assert_eq!(
        results,
        r#"[{"out":"a"},{"out":"b"},{"out":"c"},{"out":"d"}]"#
    );
    assert!(
        !rt.apply(Event::Expanded {
            node: 1,
            attempt: 1,
            items: items(4)
        })
        .accepted
    );
}

#[test]
fn a_resumed_foreach_reruns_only_the_children_that_did_not_pass() {
    let none = Params::new();
    let a = Params::from([("out".to_string(), "a".to_string())]);
    let rows = [
        row("list", 1, TaskState::Success, &none),
        row("each", 1, TaskState::Paused, &none),
        row("each[0]", 1, TaskState::Success, &a),
        row("each[1]", 2, TaskState::Paused, &none),
    ];
    let def = Arc::new(WorkflowDef::parse(FAN).unwrap());
    let mut rt = WorkflowRuntime::restore(def, &rows, Recovery::Rerun);
    assert_eq!(created(&rt.apply(Event::Start)), vec![(1, 2)]);
    let out = rt.apply(Event::Expanded {
        node: 1,
        attempt: 2,
        items: items(3),
    });
    assert_eq!(created(&out), vec![(4, 3), (5, 1)], "each[0] passed before");
    rt.apply(ended(4, 3, TaskState::Success, "b"));
    let out = rt.apply(ended(5, 1, TaskState::Success, "c"));
    assert_eq!(
        settled(&out).unwrap().1[RESULTS],
        r#"[{"out":"a"},{"out":"b"},{"out":"c"}]"#
    );
}
