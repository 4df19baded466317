//! do_while loops, each test over the real `shoal standalone` and over a cluster of
//! processes: a loop that stops when its condition no longer holds, handing each
//! iteration's outputs to the next; one that reaches max_iterations; one whose iteration
//! fails.

mod support;

use support::{Env, attempts};

support::deployments!(
    a_loop_runs_until_its_condition_no_longer_holds,
    a_loop_that_reaches_max_iterations_or_fails_an_iteration_fails,
);

fn a_loop_runs_until_its_condition_no_longer_holds(e: Env) {
    let seen = e.path("seen");
    e.apply(&format!(
        r#"
name: countdown
params: {{ left: 3 }}
tasks:
  - {{ name: poll, type: do_while,
       do_while: {{ condition: "outputs.step.left > 0", max_iterations: 10,
                   tasks: [ {{ name: step, type: shell, command: 'echo "${{iteration}} ${{left}}" >> {f}; echo "\${{setValue(left=$((${{left}} - 1)))}}"' }},
                            {{ name: note, type: noop, depends_on: [step] }} ] }} }}
  - {{ name: after, type: shell, depends_on: [poll], command: 'echo "after ${{left}} ${{iterations}}" >> {f}' }}
"#,
        f = seen.display()
    ));
    let inst = e.end(e.start("countdown", "{}"));
    assert_eq!(inst["state"], "success", "{inst}");
    let lines = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        lines, "1 3\n2 2\n3 1\nafter 0 3\n",
        "each iteration sees the one before; what follows sees the last"
    );
    for k in 1..=3 {
        for task in ["step", "note"] {
            let rows = attempts(&inst, &format!("poll[{k}].{task}"));
            assert_eq!(rows.len(), 1, "poll[{k}].{task}: {inst}");
            assert_eq!(rows[0]["state"], "success");
        }
    }
    assert!(attempts(&inst, "poll[4].step").is_empty());
    let poll = attempts(&inst, "poll")[0];
    assert_eq!(poll["state"], "success");
    assert_eq!(
        poll["message"],
        "3 iterations; the condition no longer holds"
    );
    assert_eq!(poll["output"]["iterations"], "3");
}

fn a_loop_that_reaches_max_iterations_or_fails_an_iteration_fails(e: Env) {
    e.apply(
        r#"
name: forever
tasks:
  - { name: poll, type: do_while,
      do_while: { condition: "iteration < 100", max_iterations: 3,
                  tasks: [ { name: step, type: noop } ] } }
  - { name: after, type: noop, depends_on: [poll] }
"#,
    );
    let inst = e.end(e.start("forever", "{}"));
    assert_eq!(inst["state"], "failure", "{inst}");
    let poll = attempts(&inst, "poll")[0];
    assert_eq!(
        poll["message"],
        "reached max_iterations (3) with the condition still true"
    );
    assert_eq!(attempts(&inst, "poll[3].step").len(), 1);
    assert!(attempts(&inst, "after").is_empty());

    e.apply(
        r#"
name: breaks
tasks:
  - { name: poll, type: do_while, on_error: { action: ignore },
      do_while: { condition: "true",
                  tasks: [ { name: step, type: shell, retries: 1, command: 'test ${iteration} -lt 2' } ] } }
  - { name: after, type: noop, depends_on: [poll] }
"#,
    );
    let inst = e.end(e.start("breaks", "{}"));
    assert_eq!(
        inst["state"], "success",
        "the loop's on_error ignores it: {inst}"
    );
    let failed = attempts(&inst, "poll[2].step");
    assert_eq!(failed.len(), 2, "its retry is its own attempt: {inst}");
    let poll = attempts(&inst, "poll")[0];
    assert_eq!(poll["state"], "failure");
    assert_eq!(
        poll["message"],
        "iteration 2: task 'poll[2].step' ended failure"
    );
    assert_eq!(attempts(&inst, "after")[0]["state"], "success");

    let (status, body) = e.api().post(
        "/projects/default/workflows",
        "name: bad\ntasks:\n- {name: poll, type: do_while, do_while: {condition: 'outputs.x.y >', tasks: [{name: s, type: noop}]}}\n",
    );
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("task 'poll': do_while condition: column"),
        "{body}"
    );
}
