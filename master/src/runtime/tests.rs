use super::test_util::{created, runtime};
use super::*;
use shoal_common::definition::{TIMED_OUT, WorkflowDef};
use shoal_common::params::Source;
use shoal_common::start::Scope;

const DIAMOND: &str = "name: d\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, depends_on: [a]}\n- {name: c, type: noop, depends_on: [a]}\n- {name: d, type: noop, depends_on: [b, c]}\n";

fn task(node: Node, state: TaskState) -> Event {
    Event::Task {
        node,
        attempt: 1,
        state,
        output: Params::new(),
    }
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
    let mut rng = shoal_testkit::Lcg::new(0x5eed);
    let mut next = move || rng.next_u64() as usize;
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
                    other => panic!("unexpected {other:?}"),
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

#[test]
fn a_local_that_names_itself_passes_the_outer_value_on_with_its_source() {
    let yaml = "name: p\nparams: {url: global, dt: global}\ntasks:\n- {name: up, type: noop}\n- {name: t, type: noop, depends_on: [up], params: {url: '${url}', dt: '${dt}', new: '${new}', own: 'x-${url}'}}\n";
    let mut rt = runtime(yaml);
    rt.apply(Event::Start);
    let out: Params = [("url".to_string(), "$(upstream)".to_string())].into();
    rt.apply(Event::Task {
        node: 0,
        attempt: 1,
        state: TaskState::Success,
        output: out,
    });
    let (p, outside) = rt.task_values(1, &Params::new(), &Params::new());
    assert_eq!(
        p["url"], "$(upstream)",
        "the upstream output, not '${{url}}'"
    );
    assert_eq!(
        outside.get("url"),
        Some(&Source::Output),
        "still guarded as outside"
    );
    assert_eq!(p["dt"], "global");
    assert_eq!(
        p["new"], "${new}",
        "nothing outside to pass on: kept as written"
    );
    assert_eq!(p["own"], "x-${url}");
}

fn created_with(out: &Outcome) -> Vec<(Node, i32, Option<Duration>)> {
    out.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateTask {
                node,
                attempt,
                delay,
            } => Some((*node, *attempt, *delay)),
            _ => None,
        })
        .collect()
}

fn attempt(node: Node, attempt: i32, state: TaskState) -> Event {
    Event::Task {
        node,
        attempt,
        state,
        output: Params::new(),
    }
}

#[test]
fn a_failed_task_is_retried_after_its_interval_then_fails_the_instance() {
    let mut rt =
        runtime("name: r\ntasks:\n- {name: a, type: noop, retries: 2, retry_interval: 30s}\n");
    rt.apply(Event::Start);
    let out = rt.apply(attempt(0, 1, TaskState::Failure));
    assert_eq!(
        created_with(&out),
        vec![(0, 2, Some(Duration::from_secs(30)))]
    );
    assert!(
        !rt.apply(attempt(0, 2, TaskState::Running)).accepted,
        "still waiting"
    );
    assert_eq!(
        rt.apply(Event::Ready {
            node: 0,
            attempt: 2
        })
        .actions,
        vec![Action::Enqueue {
            node: 0,
            attempt: 2
        }]
    );
    let out = rt.apply(attempt(0, 2, TaskState::Failure));
    assert_eq!(
        created_with(&out),
        vec![(0, 3, Some(Duration::from_secs(30)))]
    );
    rt.apply(Event::Ready {
        node: 0,
        attempt: 3,
    });
    let out = rt.apply(attempt(0, 3, TaskState::Failure));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Failure
        }],
        "retries used up"
    );
}

#[test]
fn a_retry_that_succeeds_lets_the_instance_succeed() {
    let mut rt = runtime(
        "name: r\ntasks:\n- {name: a, type: noop, retries: 1}\n- {name: b, type: noop, depends_on: [a]}\n",
    );
    rt.apply(Event::Start);
    assert_eq!(
        created_with(&rt.apply(attempt(0, 1, TaskState::Failure))),
        vec![(0, 2, None)]
    );
    assert_eq!(
        created(&rt.apply(attempt(0, 2, TaskState::Success))),
        vec![1]
    );
    assert_eq!(
        rt.apply(task(1, TaskState::Success)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
}

#[test]
fn disabled_tasks_are_skipped_and_count_as_passed() {
    let mut rt = runtime(
        "name: s\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, enabled: false, depends_on: [a]}\n- {name: c, type: noop, enabled: false, depends_on: [b]}\n- {name: d, type: noop, depends_on: [c]}\n",
    );
    rt.apply(Event::Start);
    let out = rt.apply(task(0, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![
            Action::Skip { node: 1 },
            Action::Skip { node: 2 },
            Action::CreateTask {
                node: 3,
                attempt: 1,
                delay: None
            }
        ]
    );
    assert_eq!(
        rt.apply(task(3, TaskState::Success)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
}

#[test]
fn a_task_delay_holds_the_first_attempt() {
    let mut rt = runtime("name: d\ntasks:\n- {name: a, type: noop, delay: 5s}\n");
    assert_eq!(
        created_with(&rt.apply(Event::Start)),
        vec![(0, 1, Some(Duration::from_secs(5)))]
    );
}

#[test]
fn stop_kills_everything_active_and_ends_stopped() {
    let mut rt = runtime(DIAMOND);
    rt.apply(Event::Start);
    rt.apply(task(0, TaskState::Success));
    let actions = rt.stop().unwrap();
    assert_eq!(
        actions,
        vec![
            Action::SetState {
                state: WorkflowState::ReadyStop
            },
            Action::KillTask {
                node: 1,
                attempt: 1
            },
            Action::KillTask {
                node: 2,
                attempt: 1
            },
        ]
    );
    assert_eq!(rt.stop().unwrap(), vec![], "a second stop changes nothing");
    assert!(rt.pause().is_err(), "a stopping instance cannot be paused");
    rt.apply(task(1, TaskState::Killed));
    let out = rt.apply(task(2, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Stopped
        }],
        "d never starts"
    );
    assert!(rt.stop().unwrap_err().0.contains("stopped"));
}

#[test]
fn pause_lets_running_tasks_finish_and_resume_continues_from_the_store() {
    let mut rt = runtime(DIAMOND);
    rt.apply(Event::Start);
    rt.apply(task(0, TaskState::Success));
    rt.apply(task(1, TaskState::Running));
    let actions = rt.pause().unwrap();
    assert_eq!(
        actions[0],
        Action::SetState {
            state: WorkflowState::ReadyPause
        }
    );
    assert!(actions.contains(&Action::Withdraw {
        node: 2,
        attempt: 1
    }));
    rt.apply(task(2, TaskState::Paused));
    let out = rt.apply(task(1, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Paused
        }],
        "nothing new starts"
    );

    let no_output = Params::new();
    let row = |name, state, attempt| Recorded {
        name,
        state,
        attempt,
        output: &no_output,
    };
    let stored = [
        row("a", TaskState::Success, 1),
        row("b", TaskState::Success, 1),
        row("c", TaskState::Paused, 1),
    ];
    let after_failover = WorkflowRuntime::restore(
        rt.definition().clone(),
        &[
            row("a", TaskState::Success, 1),
            row("b", TaskState::Running, 1),
        ],
        Recovery::Failover,
    );
    assert_eq!(
        after_failover.in_flight(),
        vec![(1, 1, TaskState::Running)],
        "a failover keeps b in flight"
    );
    let mut resumed = WorkflowRuntime::restore(rt.definition().clone(), &stored, Recovery::Rerun);
    assert_eq!(
        created_with(&resumed.apply(Event::Start)),
        vec![(2, 2, None)],
        "only c runs again, as attempt 2"
    );
    assert_eq!(
        created(&resumed.apply(attempt(2, 2, TaskState::Success))),
        vec![3]
    );
}

#[test]
fn start_from_a_task_runs_only_its_scope() {
    let def = Arc::new(WorkflowDef::parse(DIAMOND).unwrap());
    let mut rt = WorkflowRuntime::new(def.clone(), Some(("b", Scope::Downstream))).unwrap();
    assert_eq!(created(&rt.apply(Event::Start)), vec![1]);
    assert_eq!(created(&rt.apply(task(1, TaskState::Success))), vec![3]);
    let mut rt = WorkflowRuntime::new(def.clone(), Some(("b", Scope::Only))).unwrap();
    rt.apply(Event::Start);
    assert_eq!(
        rt.apply(task(1, TaskState::Success)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
    let mut rt = WorkflowRuntime::new(def.clone(), Some(("d", Scope::Upstream))).unwrap();
    assert_eq!(created(&rt.apply(Event::Start)), vec![0]);
    assert!(
        WorkflowRuntime::new(def, Some(("zz", Scope::Only)))
            .unwrap_err()
            .0
            .contains("'zz'")
    );
}

#[test]
fn a_workflow_timeout_with_fail_stops_the_run_as_failed() {
    let mut rt = runtime(
        "name: t\ntimeout: 1h\ntimeout_strategy: fail\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, depends_on: [a]}\n",
    );
    rt.apply(Event::Start);
    let actions = rt.time_out();
    assert!(
        actions.contains(&Action::KillTask {
            node: 0,
            attempt: 1
        }),
        "{actions:?}"
    );
    assert!(rt.time_out().is_empty(), "only once");
    let out = rt.apply(task(0, TaskState::Killed));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Failure
        }]
    );
}

#[test]
fn a_task_lost_with_its_worker_gets_a_new_attempt_without_using_a_retry() {
    let mut rt = runtime("name: l\ntasks:\n- {name: a, type: noop}\n");
    rt.apply(Event::Start);
    let out = rt.apply(task(0, TaskState::NeedFaultTolerance));
    assert_eq!(created_with(&out), vec![(0, 2, None)]);
    assert_eq!(
        rt.apply(attempt(0, 2, TaskState::Success)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
}

#[test]
fn outputs_flow_along_the_whole_path() {
    let mut rt = runtime(
        "name: o\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, depends_on: [a]}\n- {name: c, type: noop, depends_on: [b]}\n",
    );
    rt.apply(Event::Start);
    let out: Params = [("rows".to_string(), "42".to_string())].into();
    rt.apply(Event::Task {
        node: 0,
        attempt: 1,
        state: TaskState::Success,
        output: out,
    });
    let b_out: Params = [("b".to_string(), "1".to_string())].into();
    rt.apply(Event::Task {
        node: 1,
        attempt: 1,
        state: TaskState::Success,
        output: b_out,
    });
    let p = rt.task_params(2, &Params::new(), &Params::new());
    assert_eq!((p["rows"].as_str(), p["b"].as_str()), ("42", "1"));
}

const CONDITIONS: &str = "name: c\ntasks:\n- {name: load, type: noop}\n- {name: check, type: conditions, depends_on: [load], conditions: {success: [publish], failure: [alert]}}\n- {name: publish, type: noop, depends_on: [check]}\n- {name: alert, type: noop, depends_on: [check]}\n- {name: after_publish, type: noop, depends_on: [publish]}\n";

#[test]
fn conditions_take_the_success_branch_and_prune_the_other() {
    let mut rt = runtime(CONDITIONS);
    rt.apply(Event::Start);
    assert_eq!(created(&rt.apply(task(0, TaskState::Success))), vec![1]);
    assert_eq!(
        created(&rt.apply(task(1, TaskState::Success))),
        vec![2],
        "alert is pruned"
    );
    assert_eq!(created(&rt.apply(task(2, TaskState::Success))), vec![4]);
    let out = rt.apply(task(4, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );
}

#[test]
fn a_failure_handled_by_conditions_does_not_fail_the_instance() {
    let mut rt = runtime(CONDITIONS);
    rt.apply(Event::Start);
    let out = rt.apply(task(0, TaskState::Failure));
    assert_eq!(created(&out), vec![1], "no kill, the conditions task runs");
    assert_eq!(
        created(&rt.apply(task(1, TaskState::Success))),
        vec![3],
        "the failure branch"
    );
    let out = rt.apply(task(3, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }],
        "publish and after_publish pruned"
    );
}

#[test]
fn a_switch_runs_the_chosen_branch_and_a_join_after_it() {
    let yaml = "name: s\ntasks:\n- {name: route, type: switch, switch: {cases: [{when: '1 == 1', then: eu}], default: us}}\n- {name: eu, type: noop, depends_on: [route]}\n- {name: us, type: noop, depends_on: [route]}\n- {name: join, type: noop, depends_on: [eu, us]}\n";
    let mut rt = runtime(yaml);
    rt.apply(Event::Start);
    let out = rt.apply(Event::Branched {
        node: 0,
        attempt: 1,
        chosen: vec!["eu".into()],
    });
    assert_eq!(created(&out), vec![1]);
    assert_eq!(
        created(&rt.apply(task(1, TaskState::Success))),
        vec![3],
        "the join runs after the chosen branch"
    );
    assert_eq!(
        rt.apply(task(3, TaskState::Success)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }]
    );

    let mut none = runtime(yaml);
    none.apply(Event::Start);
    let out = none.apply(Event::Branched {
        node: 0,
        attempt: 1,
        chosen: vec![],
    });
    assert_eq!(
        out.actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }],
        "everything after it is pruned"
    );
}

#[test]
fn failed_tasks_are_named_for_alerts_and_a_slot_wait_moves_on_to_dispatch() {
    let mut rt = runtime(
        "name: f\nfailure_strategy: continue\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop}\n- {name: c, type: noop}\n",
    );
    rt.apply(Event::Start);
    // Waiting for a task-group slot is as far as being queued: dispatch goes on from it.
    assert!(
        rt.apply(task(2, TaskState::WaitingTaskGroup))
            .actions
            .is_empty()
    );
    assert!(rt.apply(task(2, TaskState::Dispatched)).accepted);
    assert!(
        !rt.apply(task(2, TaskState::WaitingTaskGroup)).accepted,
        "no way back"
    );
    rt.apply(task(0, TaskState::Failure));
    rt.apply(task(1, TaskState::Success));
    rt.apply(task(2, TaskState::Failure));
    assert_eq!(rt.state(), WorkflowState::Failure);
    assert_eq!(rt.failed_tasks(), vec!["a", "c"]);
}

#[test]
fn a_wait_s_on_timeout_branch_runs_only_when_it_timed_out_live_and_after_a_failover() {
    let yaml = "name: w\ntasks:\n- {name: gate, type: wait, timeout: 1m, on_timeout: escalate}\n- {name: proceed, type: noop, depends_on: [gate]}\n- {name: escalate, type: noop, depends_on: [gate]}\n";
    let timed_out = Params::from([(TIMED_OUT.to_string(), "true".to_string())]);
    let ended = |output: &Params| Event::Task {
        node: 0,
        attempt: 1,
        state: TaskState::Success,
        output: output.clone(),
    };
    let mut rt = runtime(yaml);
    rt.apply(Event::Start);
    assert!(rt.apply(task(0, TaskState::Waiting)).accepted);
    assert_eq!(
        created(&rt.apply(ended(&Params::new()))),
        vec![1],
        "completed in time"
    );

    let mut late = runtime(yaml);
    late.apply(Event::Start);
    late.apply(task(0, TaskState::Waiting));
    assert_eq!(
        created(&late.apply(ended(&timed_out))),
        vec![2],
        "timed out"
    );

    // A master taking the run over reads the same choice from the stored row.
    let row = |output| Recorded {
        name: "gate",
        attempt: 1,
        state: TaskState::Success,
        output,
    };
    for (output, runs) in [(&timed_out, 2), (&Params::new(), 1)] {
        let mut restored =
            WorkflowRuntime::restore(rt.definition().clone(), &[row(output)], Recovery::Failover);
        assert_eq!(created(&restored.apply(Event::Start)), vec![runs]);
    }
}

#[test]
fn a_terminate_task_kills_what_runs_starts_nothing_more_and_ends_the_run_its_way() {
    let yaml = "name: t\ntasks:\n- {name: long, type: shell, command: sleep 60}\n- {name: check, type: noop}\n- {name: stop, type: terminate, depends_on: [check], terminate: {state: success, message: no data}}\n- {name: after, type: noop, depends_on: [stop]}\n";
    let mut rt = runtime(yaml);
    assert_eq!(created(&rt.apply(Event::Start)), vec![0, 1]);
    rt.apply(task(0, TaskState::Running));
    assert_eq!(created(&rt.apply(task(1, TaskState::Success))), vec![2]);
    let out = rt.apply(task(2, TaskState::Success));
    assert_eq!(
        out.actions,
        vec![Action::KillTask {
            node: 0,
            attempt: 1
        }],
        "long is killed and after never starts"
    );
    assert_eq!(rt.end_message(), Some("no data"));
    assert_eq!(
        rt.apply(task(0, TaskState::Killed)).actions,
        vec![Action::Finish {
            state: WorkflowState::Success
        }],
        "the run ends in the terminate task's state"
    );

    // A master that takes the run over before the kill landed kills it then.
    let none = Params::new();
    let row = |name, state| Recorded {
        name,
        attempt: 1,
        state,
        output: &none,
    };
    let rows = [
        row("long", TaskState::Running),
        row("check", TaskState::Success),
        row("stop", TaskState::Success),
    ];
    let mut restored = WorkflowRuntime::restore(rt.definition().clone(), &rows, Recovery::Failover);
    assert_eq!(
        restored.apply(Event::Start).actions,
        vec![Action::KillTask {
            node: 0,
            attempt: 1
        }]
    );
}

const CAUGHT: &str = "name: c\nfailure_strategy: continue\ntasks:\n- {name: load, type: shell, command: x, on_error: {action: catch, then: cleanup}}\n- {name: after, type: noop, depends_on: [load]}\n- {name: cleanup, type: shell, command: 'echo ${error.task}'}\n- {name: other, type: noop}\n";

fn finished(out: &Outcome) -> Option<WorkflowState> {
    out.actions.iter().find_map(|a| match a {
        Action::Finish { state } => Some(*state),
        _ => None,
    })
}

#[test]
fn a_caught_failure_runs_only_its_handler_and_the_run_fails_only_if_the_handler_does() {
    let mut rt = runtime(CAUGHT);
    assert_eq!(
        created(&rt.apply(Event::Start)),
        vec![0, 3],
        "the handler is not a root"
    );
    rt.apply(task(3, TaskState::Success));
    let failed = Event::Task {
        node: 0,
        attempt: 1,
        state: TaskState::Failure,
        output: Params::from([("error.message".to_string(), "exit code 3".to_string())]),
    };
    assert_eq!(
        created(&rt.apply(failed)),
        vec![2],
        "cleanup runs, after does not"
    );
    let seen = rt.task_params(2, &Params::new(), &Params::new());
    assert_eq!(seen["error.task"], "load");
    assert_eq!(seen["error.message"], "exit code 3");
    assert_eq!(
        finished(&rt.apply(task(2, TaskState::Success))),
        Some(WorkflowState::Success)
    );

    let mut handler_fails = runtime(CAUGHT);
    handler_fails.apply(Event::Start);
    handler_fails.apply(task(3, TaskState::Success));
    handler_fails.apply(task(0, TaskState::Failure));
    let out = handler_fails.apply(task(2, TaskState::Failure));
    assert_eq!(finished(&out), Some(WorkflowState::Failure));

    let mut no_failure = runtime(CAUGHT);
    no_failure.apply(Event::Start);
    no_failure.apply(task(3, TaskState::Success));
    assert_eq!(
        created(&no_failure.apply(task(0, TaskState::Success))),
        vec![1]
    );
    let out = no_failure.apply(task(1, TaskState::Success));
    assert_eq!(
        finished(&out),
        Some(WorkflowState::Success),
        "the unused handler is pruned"
    );

    // After a failover the caught failure still releases its handler and nothing else.
    let none = Params::new();
    let rows = [
        Recorded {
            name: "load",
            attempt: 1,
            state: TaskState::Failure,
            output: &none,
        },
        Recorded {
            name: "other",
            attempt: 1,
            state: TaskState::Success,
            output: &none,
        },
    ];
    let mut restored = WorkflowRuntime::restore(rt.definition().clone(), &rows, Recovery::Failover);
    assert_eq!(created(&restored.apply(Event::Start)), vec![2]);
    assert_eq!(
        finished(&restored.apply(task(2, TaskState::Success))),
        Some(WorkflowState::Success)
    );
}

#[test]
fn an_ignored_failure_passes_and_a_thrown_one_fails_the_run_at_once() {
    let yaml = "name: e\nfailure_strategy: continue\ntasks:\n- {name: flaky, type: noop, on_error: {action: ignore, retries: 1}}\n- {name: next, type: noop, depends_on: [flaky]}\n- {name: fatal, type: noop, on_error: {action: throw}}\n- {name: slow, type: noop}\n- {name: later, type: noop, depends_on: [slow]}\n";
    let mut rt = runtime(yaml);
    assert_eq!(created(&rt.apply(Event::Start)), vec![0, 2, 3]);
    let out = rt.apply(task(0, TaskState::Failure));
    assert_eq!(
        created_with(&out),
        vec![(0, 2, None)],
        "its on_error retries come first"
    );
    let out = rt.apply(attempt(0, 2, TaskState::Failure));
    assert_eq!(created(&out), vec![1], "ignored: next runs");
    rt.apply(task(3, TaskState::Running));
    let out = rt.apply(task(2, TaskState::Failure));
    assert_eq!(
        out.actions,
        vec![
            Action::KillTask {
                node: 1,
                attempt: 1
            },
            Action::KillTask {
                node: 3,
                attempt: 1
            }
        ],
        "thrown: everything running is killed, although the strategy is continue"
    );
    rt.apply(task(1, TaskState::Killed));
    let out = rt.apply(task(3, TaskState::Killed));
    assert_eq!(finished(&out), Some(WorkflowState::Failure));
    assert!(created(&out).is_empty(), "later never starts");
}
