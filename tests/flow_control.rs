//! Flow control, each test over the real `shoal standalone` and over a cluster of
//! processes: a terminate task that ends its run while a sibling runs (whose process is
//! gone afterwards) in the state and with the message it names.

mod support;

use serde_json::Value;
use std::path::Path;
use support::{Env, wait_for};

support::deployments!(a_terminate_task_ends_the_run_at_once_and_kills_what_runs,);

fn attempts<'a>(inst: &'a Value, name: &str) -> Vec<&'a Value> {
    inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == name)
        .collect()
}

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
