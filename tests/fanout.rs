//! Dynamic fan-out, each test over the real `shoal standalone` and over a cluster of
//! processes: a foreach over 1,000 elements of an upstream output with max_parallel 50
//! (never more than 50 children at once, every child its own task instance, the outputs
//! joined in order); a failed child failing the foreach unless its error handler ignores
//! it; a foreach of sub-workflow runs.

mod support;

use serde_json::Value;
use support::{Env, attempts};

// More worker slots than the widest foreach here, so that max_parallel is what limits it.
support::deployments!(env: &[("SHOAL_SLOTS", "64")];
    a_foreach_runs_one_child_per_element_at_most_max_parallel_at_once,
    a_failed_child_fails_the_foreach_unless_it_ignores_failures,
    a_foreach_can_run_a_workflow_per_element,
);

fn results(inst: &Value, name: &str) -> Vec<Value> {
    let row = attempts(inst, name)[0];
    let text = row["output"]["results"]
        .as_str()
        .unwrap_or_else(|| panic!("{row}"));
    serde_json::from_str(text).unwrap()
}

fn a_foreach_runs_one_child_per_element_at_most_max_parallel_at_once(e: Env) {
    let (running, counts, got) = (e.path("running"), e.path("counts"), e.path("got"));
    std::fs::create_dir(&running).unwrap();
    e.apply(&format!(
        r#"
name: fan
tasks:
  - {{ name: list, type: shell, command: 'echo "\${{setValue(files=[$(seq -s, 0 999)])}}"' }}
  - {{ name: each, type: foreach, depends_on: [list],
       foreach: {{ items: "${{files}}", as: n, max_parallel: 50,
                  task: {{ type: shell, command: 'touch {r}/${{n}}; ls {r} | wc -l >> {c}; sleep 0.05; rm {r}/${{n}}; echo "\${{setValue(sq=$((${{n}} * ${{n}})))}}"' }} }} }}
  - {{ name: after, type: shell, depends_on: [each], command: 'echo "$(echo ''${{results}}'' | wc -c)" > {g}' }}
"#,
        r = running.display(),
        c = counts.display(),
        g = got.display(),
    ));
    let inst = e.end(e.start("fan", "{}"));
    assert_eq!(inst["state"], "success", "{inst}");
    for i in [0, 1, 499, 999] {
        let child = attempts(&inst, &format!("each[{i}]"));
        assert_eq!(child.len(), 1, "each[{i}] is its own task instance: {inst}");
        assert_eq!(child[0]["state"], "success");
        assert_eq!(child[0]["attempt"], 1);
    }
    let children = inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("each["))
        .count();
    assert_eq!(children, 1000, "one child per element, none run twice");
    let joined = results(&inst, "each");
    assert_eq!(joined.len(), 1000);
    for (i, r) in joined.iter().enumerate() {
        assert_eq!(r["sq"], (i * i).to_string(), "joined in element order");
    }
    let seen: Vec<usize> = std::fs::read_to_string(&counts)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let most = *seen.iter().max().unwrap();
    assert!(most <= 50, "at most 50 children at once, saw {most}");
    assert!(most > 1, "children ran side by side, saw at most {most}");
    let each = attempts(&inst, "each")[0];
    assert_eq!(each["message"], "1000 of 1000 items passed");
    let size: usize = std::fs::read_to_string(&got)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        size > 10_000,
        "what follows sees ${{results}} ({size} bytes)"
    );
}

fn a_failed_child_fails_the_foreach_unless_it_ignores_failures(e: Env) {
    for (name, handler, state) in [
        ("strict", "", "failure"),
        ("lenient", "on_error: { action: ignore },", "success"),
    ] {
        e.apply(&format!(
            r#"
name: {name}
tasks:
  - {{ name: each, type: foreach, {handler}
       foreach: {{ items: "[{{'n': 1}}, {{'n': 2}}, {{'n': 3}}]", max_parallel: 1,
                  task: {{ type: shell, retries: 1, command: 'test ${{item.n}} != 2 && echo "\${{setValue(n=${{item.n}})}}"' }} }} }}
  - {{ name: after, type: noop, depends_on: [each] }}
"#
        ));
        let inst = e.end(e.start(name, "{}"));
        assert_eq!(inst["state"], state, "{name}: {inst}");
        let failed = attempts(&inst, "each[1]");
        assert_eq!(failed.len(), 2, "its retry is its own attempt: {inst}");
        assert!(failed.iter().all(|r| r["state"] == "failure"));
        assert_eq!(
            attempts(&inst, "each[2]")[0]["state"],
            "success",
            "siblings go on: {inst}"
        );
        let each = attempts(&inst, "each")[0];
        assert_eq!(each["state"], "failure");
        assert_eq!(each["message"], "2 of 3 items passed; failed: each[1]");
        let joined = results(&inst, "each");
        assert_eq!(
            joined,
            vec![
                serde_json::json!({"n": "1"}),
                Value::Null,
                serde_json::json!({"n": "3"}),
            ]
        );
        assert_eq!(
            attempts(&inst, "after").len(),
            usize::from(state == "success")
        );
    }
}

fn a_foreach_can_run_a_workflow_per_element(e: Env) {
    let out = e.path("days");
    e.apply(&format!(
        "name: daily\ntasks:\n- {{ name: load, type: shell, command: 'echo ${{day}}-${{mode}} >> {f}; echo \"\\${{setValue(loaded=${{day}})}}\"' }}\n",
        f = out.display()
    ));
    e.apply(
        r#"
name: backfill_days
params: { days: '["d1", "d2"]' }
tasks:
  - { name: each, type: foreach, foreach: { items: "days", as: day, workflow: daily, params: { mode: full } } }
"#,
    );
    let inst = e.end(e.start("backfill_days", "{}"));
    assert_eq!(inst["state"], "success", "{inst}");
    let mut lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, ["d1-full", "d2-full"]);
    let joined = results(&inst, "each");
    assert_eq!(joined[0]["loaded"], "d1");
    assert_eq!(joined[1]["loaded"], "d2");
    let child = attempts(&inst, "each[1]")[0];
    assert!(
        child["message"]
            .as_str()
            .unwrap()
            .contains("child instance"),
        "each element is a linked child run: {child}"
    );
}
