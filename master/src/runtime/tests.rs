use super::*;
use shoal_common::definition::WorkflowDef;

fn runtime(yaml: &str) -> WorkflowRuntime {
    WorkflowRuntime::new(Arc::new(WorkflowDef::parse(yaml).unwrap()))
}

const DIAMOND: &str = "name: d\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, depends_on: [a]}\n- {name: c, type: noop, depends_on: [a]}\n- {name: d, type: noop, depends_on: [b, c]}\n";

fn task(node: Node, state: TaskState) -> Event {
    Event::Task {
        node,
        attempt: 1,
        state,
        output: Params::new(),
    }
}

fn created(out: &Outcome) -> Vec<Node> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateTask { node, .. } => Some(*node),
            _ => None,
        })
        .collect()
}

#[test]
fn diamond_releases_the_join_only_after_both_branches() {
    let mut rt = runtime(DIAMOND);
    assert_eq!(created(&rt.apply(Event::Start)), vec![0]);
    assert!(rt.apply(task(0, TaskState::Running)).actions.is_empty());
    assert_eq!(created(&rt.apply(task(0, TaskState::Success))), vec![1, 2]);
    assert!(
        created(&rt.apply(task(1, TaskState::Success))).is_empty(),
        "d waits for c"
    );
    assert_eq!(created(&rt.apply(task(2, TaskState::Success))), vec![3]);
    let out = rt.apply(task(3, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
    assert_eq!(rt.state(), WorkflowState::Success);
}

#[test]
fn failure_with_strategy_end_kills_the_rest_and_starts_nothing() {
    let mut rt = runtime(DIAMOND);
    rt.apply(Event::Start);
    rt.apply(task(0, TaskState::Success));
    let out = rt.apply(task(1, TaskState::Failure));
    assert_eq!(
        out.actions,
        vec![Action::KillTask {
            node: 2,
            attempt: 1
        }]
    );
    let out = rt.apply(task(2, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Failure
        }],
        "d never starts"
    );
}

#[test]
fn failure_with_strategy_continue_runs_independent_branches() {
    let yaml = "name: c\nfailure_strategy: continue\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, depends_on: [a]}\n- {name: x, type: noop}\n- {name: y, type: noop, depends_on: [x]}\n";
    let mut rt = runtime(yaml);
    assert_eq!(created(&rt.apply(Event::Start)), vec![0, 2]);
    assert!(rt.apply(task(0, TaskState::Failure)).actions.is_empty());
    assert_eq!(created(&rt.apply(task(2, TaskState::Success))), vec![3]);
    let out = rt.apply(task(3, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Failure
        }]
    );
}

#[test]
fn stale_duplicate_and_backward_events_are_ignored() {
    let mut rt = runtime(DIAMOND);
    rt.apply(Event::Start);
    assert!(rt.apply(task(0, TaskState::Success)).accepted);
    assert!(!rt.apply(task(0, TaskState::Success)).accepted, "duplicate");
    assert!(!rt.apply(task(0, TaskState::Running)).accepted, "backwards");
    assert!(
        !rt.apply(task(3, TaskState::Success)).accepted,
        "not started yet"
    );
    let old = Event::Task {
        node: 1,
        attempt: 7,
        state: TaskState::Failure,
        output: Params::new(),
    };
    assert!(!rt.apply(old).accepted, "another attempt");
    assert_eq!(rt.state(), WorkflowState::Running);
}

/// Delivers every worker event of a run in a scrambled order with duplicates; the
/// instance always ends success and never finishes twice.
#[test]
fn scrambled_and_repeated_events_still_finish_once() {
    let mut seed: u64 = 0x5eed;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for _ in 0..200 {
        let mut rt = runtime(DIAMOND);
        let mut pending: Vec<Event> = Vec::new();
        let mut finishes = 0;
        let mut handle = |out: Outcome, pending: &mut Vec<Event>| {
            for a in out.actions {
                match a {
                    Action::CreateTask { node, .. } => {
                        for s in [
                            TaskState::Dispatched,
                            TaskState::Running,
                            TaskState::Success,
                        ] {
                            pending.push(task(node, s));
                        }
                    }
                    Action::Finish { state } => {
                        assert_eq!(state, WorkflowState::Success);
                        finishes += 1;
                    }
                    Action::KillTask { .. } => panic!("nothing fails here"),
                }
            }
        };
        handle(rt.apply(Event::Start), &mut pending);
        while !pending.is_empty() {
            let i = next() % pending.len();
            let ev = if next() % 4 == 0 {
                pending[i].clone()
            } else {
                pending.swap_remove(i)
            };
            handle(rt.apply(ev), &mut pending);
        }
        assert_eq!(finishes, 1);
        assert_eq!(rt.state(), WorkflowState::Success);
    }
}

#[test]
fn task_params_follow_precedence() {
    let yaml = "name: p\nparams: {a: global, b: global, c: global}\ntasks:\n- {name: up, type: noop}\n- {name: t, type: noop, depends_on: [up], params: {b: local, c: local}}\n";
    let mut rt = runtime(yaml);
    rt.apply(Event::Start);
    let out: Params = [
        ("a".to_string(), "upstream".to_string()),
        ("b".into(), "upstream".into()),
    ]
    .into();
    rt.apply(Event::Task {
        node: 0,
        attempt: 1,
        state: TaskState::Success,
        output: out,
    });
    let start: Params = [("c".to_string(), "start".to_string())].into();
    let p = rt.task_params(1, &start, &Params::new());
    assert_eq!(
        (p["a"].as_str(), p["b"].as_str(), p["c"].as_str()),
        ("upstream", "local", "start")
    );
}
