//! Flow control, each test over the real `shoal standalone` and over a cluster of
//! processes: a terminate task that ends its run while a sibling runs (whose process is
//! gone afterwards) in the state and with the message it names; error handlers that catch
//! a failure into a handler task (which may fail itself), ignore it, or throw it; a
//! failed run's exception workflow, started once with the failed run's context.

mod support;

use std::path::Path;
use support::{Env, attempts, wait_for};

support::deployments!(
    a_terminate_task_ends_the_run_at_once_and_kills_what_runs,
    error_handlers_catch_ignore_and_throw,
    a_failed_run_starts_its_exception_workflow_with_its_context,
);

fn alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{}", pid.trim())).exists()
}

fn a_terminate_task_ends_the_run_at_once_and_kills_what_runs(e: Env) {
    for (state, message) in [("failure", "no data today"), ("success", "nothing to do")] {
        let (pid, after) = (
            e.path(&format!("pid_{state}")),
            e.path(&format!("after_{state}")),
        );
        let name = format!("stopper_{state}");
        e.apply(&format!(
            r#"
name: {name}
tasks:
  - {{ name: long, type: shell, command: 'echo $$ > {p}; sleep 60' }}
  - {{ name: check, type: shell, command: 'sleep 1' }}
  - {{ name: stop_here, type: terminate, depends_on: [check],
       terminate: {{ state: {state}, message: "{message}" }} }}
  - {{ name: after, type: shell, depends_on: [stop_here], command: 'echo ran > {a}' }}
"#,
            p = pid.display(),
            a = after.display()
        ));
        let started = std::time::Instant::now();
        let id = e.start(&name, "{}");
        let inst = e.end(id);
        assert!(
            started.elapsed().as_secs() < 30,
            "ended at once, not after long's 60 s"
        );
        assert_eq!(inst["state"], state, "{inst}");
        assert_eq!(inst["message"], message);
        assert_eq!(attempts(&inst, "long")[0]["state"], "killed");
        assert_eq!(attempts(&inst, "stop_here")[0]["state"], "success");
        assert!(attempts(&inst, "after").is_empty(), "{inst}");
        assert!(!after.exists(), "nothing after the terminate task ran");
        let pid = std::fs::read_to_string(&pid).unwrap();
        wait_for("long's process to be gone", support::LONG, || {
            (!alive(&pid)).then_some(())
        });
    }
}

fn error_handlers_catch_ignore_and_throw(e: Env) {
    let (ran, pid) = (e.path("ran"), e.path("pid"));
    e.apply(&format!(
        r#"
name: handled
failure_strategy: continue
tasks:
  - {{ name: load, type: shell, command: 'echo loading; exit 3', on_error: {{ action: catch, then: cleanup }} }}
  - {{ name: publish, type: shell, depends_on: [load], command: 'echo publish >> {f}' }}
  - {{ name: cleanup, type: shell, command: 'echo "${{error.task}} ${{error.exit_code}}" >> {f}' }}
  - {{ name: optional, type: shell, command: 'exit 1', on_error: {{ action: ignore, retries: 1 }} }}
  - {{ name: after_optional, type: shell, depends_on: [optional], command: 'echo after_optional >> {f}' }}
"#,
        f = ran.display()
    ));
    let inst = e.end(e.start("handled", "{}"));
    assert_eq!(
        inst["state"], "success",
        "caught and ignored failures pass: {inst}"
    );
    let mut lines: Vec<String> = std::fs::read_to_string(&ran)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, vec!["after_optional", "load 3"], "publish never ran");
    assert_eq!(
        attempts(&inst, "load")[0]["state"],
        "failure",
        "the failure is on record"
    );
    assert_eq!(
        attempts(&inst, "optional").len(),
        2,
        "its on_error retry ran first"
    );

    e.apply(
        "name: handler_fails\ntasks:\n- { name: load, type: shell, command: 'exit 1', on_error: { action: catch, then: cleanup } }\n- { name: cleanup, type: shell, command: 'exit 2' }\n",
    );
    let inst = e.end(e.start("handler_fails", "{}"));
    assert_eq!(inst["state"], "failure", "the handler failed: {inst}");
    assert_eq!(attempts(&inst, "cleanup")[0]["state"], "failure");

    e.apply(&format!(
        r#"
name: thrown
failure_strategy: continue
tasks:
  - {{ name: long, type: shell, command: 'echo $$ > {p}; sleep 60' }}
  - {{ name: fatal, type: shell, command: 'sleep 1; exit 1', on_error: {{ action: throw }} }}
"#,
        p = pid.display()
    ));
    let started = std::time::Instant::now();
    let inst = e.end(e.start("thrown", "{}"));
    assert!(
        started.elapsed().as_secs() < 30,
        "failed at once, not after long's 60 s"
    );
    assert_eq!(inst["state"], "failure", "{inst}");
    assert_eq!(attempts(&inst, "long")[0]["state"], "killed");
    let pid = std::fs::read_to_string(&pid).unwrap();
    wait_for("long's process to be gone", support::LONG, || {
        (!alive(&pid)).then_some(())
    });
}

fn a_failed_run_starts_its_exception_workflow_with_its_context(e: Env) {
    let paged = e.path("paged");
    e.apply(&format!(
        "name: on_call\ntasks:\n- {{ name: page, type: shell, command: 'echo \"${{team}} ${{failed.workflow}} ${{failed.tasks}} ${{failed.instance_id}} ${{dt}}\" >> {f}' }}\n",
        f = paged.display()
    ));
    e.apply(
        "name: fragile\non_failure: { workflow: on_call, params: { team: data, dt: '${dt}' } }\ntasks:\n- { name: fatal, type: shell, command: 'exit 1', on_error: { action: throw } }\n",
    );
    let id = e.start("fragile", r#"{"params": {"dt": "2026-11-25"}}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure");
    assert_eq!(
        inst["message"],
        "its exception workflow 'on_call' was started"
    );
    let handler = wait_for("the exception run", support::LONG, || {
        let list = e.api().get("/instances?workflow=on_call");
        list.as_array()?.first().cloned()
    });
    assert_eq!(handler["options"]["handles_failure_of"], id, "{handler}");
    let handler = e.end(handler["id"].as_i64().unwrap());
    assert_eq!(handler["state"], "success", "{handler}");
    assert_eq!(
        std::fs::read_to_string(&paged).unwrap(),
        format!("data fragile fatal {id} 2026-11-25\n"),
        "it ran once, with the failed run's context and the parameters it passes"
    );
}
