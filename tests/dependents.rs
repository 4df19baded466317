//! Dependent tasks in full and backfills with their dependents, over `shoal standalone` and
//! a cluster: items combined by and/or across date cycles, judged on runs made by
//! backfills, the awaited item on the task's row and in `shoal status`, a failed
//! dependency failing the task, a dependency's outputs passed on, and `shoal backfill
//! --with-dependents` running each stage after the one it waits for.

mod support;

use serde_json::Value;
use support::{Env, LONG, attempts, cli, lines, text, wait_for};

support::deployments!(
    dependent_items_combine_over_date_cycles_of_backfilled_runs,
    backfill_with_dependents_runs_each_stage_after_the_one_it_waits_for,
);

/// Backfills `workflow` over `from..=to` (days at 00:00 UTC; it has no schedule).
fn backfill(e: &Env, workflow: &str, from: &str, to: &str, params: &str) -> Value {
    let body = format!(r#"{{"from": "{from}", "to": "{to}", "params": {params}}}"#);
    let path = format!("/projects/default/workflows/{workflow}/backfill");
    let (status, created) = e.api().post(&path, &body);
    assert_eq!(status, 201, "{created}");
    created
}

/// Waits until backfill `id` ends; its JSON.
fn backfill_ended(e: &Env, id: &Value) -> Value {
    wait_for(&format!("backfill {id} to end"), LONG, || {
        let b = e.api().get(&format!("/backfills/{id}"));
        (b["state"] != "running").then_some(b)
    })
}

fn dependent_items_combine_over_date_cycles_of_backfilled_runs(e: Env) {
    let built = e.path("built");
    e.apply(
        "name: ods\nparams: { fail: '0' }\ntasks:\n- { name: extract, type: shell, command: 'exit ${fail}' }\n- { name: publish, type: noop, depends_on: [extract] }\n",
    );
    e.apply("name: dim\ntasks:\n- { name: load, type: noop }\n");
    // ods's extract yesterday AND every run of ods over the last two days, AND (dim today
    // OR a workflow that never runs this week).
    e.apply(&format!(
        r#"
name: report
tasks:
  - name: gate
    type: dependent
    dependent:
      check_interval: 500ms
      timeout: 2m
      groups:
        - items:
            - {{ workflow: ods, task: extract, date: yesterday }}
            - {{ workflow: ods, date: last_2_days }}
        - relation: or
          items:
            - {{ workflow: dim }}
            - {{ workflow: never_runs, date: this_week }}
  - {{ name: build, type: shell, command: "echo built >> {f}", depends_on: [gate] }}
"#,
        f = built.display()
    ));

    // Nothing upstream yet: the run for 2026-03-10 waits, and says for what.
    backfill(&e, "report", "2026-03-10", "2026-03-10", "{}");
    let report = wait_for("the report run", LONG, || {
        let list = e.api().get("/instances?workflow=report");
        list[0]["id"].as_i64()
    });
    let gate_says = |what: &str| {
        wait_for(&format!("the gate to say {what:?}"), LONG, || {
            let inst = e.api().get(&format!("/instances/{report}"));
            // The run may be listed before its first cycle recorded the gate.
            let gate = (*attempts(&inst, "gate").first()?).clone();
            let message = gate["message"].as_str().unwrap_or_default().to_string();
            message.contains(what).then_some(gate)
        })
    };
    let gate = gate_says("waiting for default/ods task extract (yesterday 2026-03-09): no run yet");
    assert_eq!(gate["state"], "submitted", "{gate}");
    let status = cli(e.api(), &["status", &report.to_string()]);
    assert!(
        text(&status.stdout).contains("waiting for default/ods task extract"),
        "shoal status shows the awaited item: {}",
        text(&status.stdout)
    );

    // ods for both days: the and-group is met; the or-group still waits for dim.
    let ods = backfill(&e, "ods", "2026-03-08", "2026-03-09", "{}");
    assert_eq!(backfill_ended(&e, &ods["id"])["state"], "success");
    gate_says("waiting for default/dim (today 2026-03-10): no run yet");
    assert_eq!(
        e.api().get(&format!("/instances/{report}"))["state"],
        "running"
    );

    // dim today meets the or-group (never_runs does not matter): the report runs.
    let dim = backfill(&e, "dim", "2026-03-10", "2026-03-10", "{}");
    assert_eq!(backfill_ended(&e, &dim["id"])["state"], "success");
    let inst = e.end(report);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(
        attempts(&inst, "gate")[0]["message"],
        "its dependencies succeeded"
    );
    assert_eq!(lines(&built), ["built"]);

    // ods's extract failed on 2026-03-11: the run for the 12th fails at once, naming it.
    let failed = backfill(&e, "ods", "2026-03-11", "2026-03-11", r#"{"fail": "1"}"#);
    assert_eq!(backfill_ended(&e, &failed["id"])["state"], "failure");
    let second = backfill(&e, "report", "2026-03-12", "2026-03-12", "{}");
    let ended = backfill_ended(&e, &second["id"]);
    assert_eq!(ended["state"], "failure", "{ended}");
    let id = ended["runs"][0]["workflow_instance_id"].as_i64().unwrap();
    let inst = e.api().get(&format!("/instances/{id}"));
    let gate = attempts(&inst, "gate")[0];
    assert_eq!(gate["state"], "failure", "{inst}");
    let message = gate["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "default/ods task extract failed (yesterday 2026-03-11): task 'extract' of instance"
        ),
        "{message}"
    );
    assert!(attempts(&inst, "build").is_empty(), "{inst}");
    assert_eq!(
        lines(&built),
        ["built"],
        "nothing built on a failed dependency"
    );
}

fn backfill_with_dependents_runs_each_stage_after_the_one_it_waits_for(e: Env) {
    let ran = e.path("ran");
    let log = |name: &str, after: &str| {
        format!(
            "{{ name: work, type: shell, command: 'echo {name} >> {f}', depends_on: [{after}] }}",
            f = ran.display()
        )
    };
    e.apply(&format!(
        "name: raw\ntasks:\n- {{ name: first, type: shell, command: \"echo '${{setValue(batch=b7)}}'\" }}\n- {}\n",
        log("raw", "first")
    ));
    // mart's gate passes raw's outputs on to the task after it.
    e.apply(&format!(
        "name: mart\ntasks:\n- {{ name: gate, type: dependent, dependent: {{ workflow: raw, check_interval: 500ms, pass_outputs: true }} }}\n- {}\n",
        log("mart-${batch}", "gate")
    ));
    e.apply(&format!(
        "name: agg\ntasks:\n- name: gate\n  type: dependent\n  dependent:\n    check_interval: 500ms\n    groups: [{{ items: [{{ workflow: mart }}, {{ workflow: raw }}] }}]\n- {}\n",
        log("agg", "gate")
    ));
    e.apply("name: unrelated\ntasks:\n- { name: n, type: noop }\n");

    let out = cli(
        e.api(),
        &[
            "backfill",
            "raw",
            "--from",
            "2026-04-01",
            "--to",
            "2026-04-02",
            "--with-dependents",
            "--wait",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("runs of default/mart (stage 1"), "{stderr}");
    assert!(stderr.contains("runs of default/agg (stage 2"), "{stderr}");

    let ids = |workflow: &str| -> Vec<i64> {
        let list = e.api().get(&format!("/instances?workflow={workflow}"));
        let list = list.as_array().unwrap();
        assert!(
            list.iter().all(|i| i["state"] == "success"),
            "{workflow}: {list:?}"
        );
        list.iter().map(|i| i["id"].as_i64().unwrap()).collect()
    };
    let (raw, mart, agg) = (ids("raw"), ids("mart"), ids("agg"));
    assert_eq!((raw.len(), mart.len(), agg.len()), (2, 2, 2));
    // A stage starts only when the one before it has ended.
    assert!(raw.iter().max() < mart.iter().min(), "{raw:?} {mart:?}");
    assert!(mart.iter().max() < agg.iter().min(), "{mart:?} {agg:?}");
    assert_eq!(
        lines(&ran),
        ["raw", "raw", "mart-b7", "mart-b7", "agg", "agg"]
    );
    assert!(
        e.api()
            .get("/instances?workflow=unrelated")
            .as_array()
            .unwrap()
            .is_empty(),
        "a workflow that waits for none of them is not backfilled"
    );
}
