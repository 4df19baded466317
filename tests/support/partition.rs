//! What tests/partitions.rs checks beyond the fault harness's end state: each execution of
//! a task leaves a marker file of its own with its start, a tick every 0.1 s and its end
//! (wall-clock times, one clock: every host is on this machine), so that executions of
//! one task can be checked for overlap; and an audit of the store's writes by node, so
//! that a fenced master is seen to have stopped writing.
#![allow(dead_code)]

use crate::fault::{Cluster, recorded};
use std::collections::BTreeMap;
use std::path::Path;

/// A workflow's tasks, each with its upstream tasks, as [`ticking`] takes them.
pub type Dag<'a> = [(&'a str, &'a [&'a str])];

/// a → b, c → d.
pub const DIAMOND: [(&str, &[&str]); 4] =
    [("a", &[]), ("b", &["a"]), ("c", &["a"]), ("d", &["b", "c"])];

/// One task.
pub const TICK: [(&str, &[&str]); 1] = [("tick", &[])];

/// A workflow whose tasks (name, upstream tasks) each run `t_<task>` tenths of a second,
/// recording their execution in the execution log (as [`recorded`]) and in a marker file
/// `<instance>-<task>-<task instance>-<pid>` under `markers`.
pub fn ticking(name: &str, execs: &Path, markers: &Path, tasks: &Dag) -> String {
    let params: Vec<String> = tasks.iter().map(|t| format!("t_{}: '20'", t.0)).collect();
    let mut yaml = format!(
        "name: {name}\nparams: {{ {} }}\ntasks:\n",
        params.join(", ")
    );
    let m = markers.display();
    for (task, deps) in tasks {
        // `recorded` with no sleep: its start line, then the ticks, then its end line.
        let rec = recorded(execs, task, "nap");
        let (head, tail) = rec.split_once("sleep ${nap}; ").unwrap();
        let me = format!("${{system.workflow.instance.id}}-{task}-${{system.task.instance.id}}");
        yaml.push_str(&format!(
            "  - name: {task}\n    type: shell\n    command: |\n      \
             {head}m={m}/{me}-$$; echo start $EPOCHREALTIME > $m\n      \
             i=0; while [ $i -lt ${{t_{task}}} ]; do sleep 0.1; echo t $EPOCHREALTIME >> $m; i=$((i+1)); done\n      \
             echo end $EPOCHREALTIME >> $m; {tail}\n"
        ));
        if !deps.is_empty() {
            yaml.push_str(&format!("    depends_on: [{}]\n", deps.join(", ")));
        }
    }
    yaml
}

/// One execution, from its marker file.
#[derive(Debug)]
pub struct Execution {
    pub instance: i64,
    pub task: String,
    pub tid: i64,
    pub start: f64,
    /// Its last sign of life: its end, or the last tick before it was killed.
    pub last: f64,
    pub completed: bool,
}

pub fn executions(markers: &Path) -> Vec<Execution> {
    let mut out = vec![];
    for entry in std::fs::read_dir(markers).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let f: Vec<&str> = name.split('-').collect();
        assert_eq!(f.len(), 4, "marker {name}");
        let text = std::fs::read_to_string(&path).unwrap();
        let times: Vec<(&str, f64)> = text
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, t)| (k, t.parse().unwrap()))
            .collect();
        assert_eq!(times.first().map(|t| t.0), Some("start"), "{name}: {text}");
        out.push(Execution {
            instance: f[0].parse().unwrap(),
            task: f[1].to_string(),
            tid: f[2].parse().unwrap(),
            start: times[0].1,
            last: times.last().unwrap().1,
            completed: times.last().unwrap().0 == "end",
        });
    }
    out
}

/// No two executions of one task overlap, none started before its upstream tasks ended,
/// and each task of `instances` has exactly one completed execution. Returns the
/// executions.
pub fn check_markers(c: &Cluster, markers: &Path, instances: &[i64], dag: &Dag) -> Vec<Execution> {
    let all = check_no_overlap(c, markers);
    check_order(c, &all, instances, dag);
    let tasks: Vec<&str> = dag.iter().map(|(task, _)| *task).collect();
    let mut by_task: BTreeMap<(i64, &str), Vec<&Execution>> = BTreeMap::new();
    for e in &all {
        by_task.entry((e.instance, &e.task)).or_default().push(e);
    }
    for id in instances {
        for task in &tasks {
            let done: Vec<_> = by_task
                .get(&(*id, task))
                .into_iter()
                .flatten()
                .filter(|e| e.completed)
                .collect();
            assert_eq!(
                done.len(),
                1,
                "instance {id}: task {task} must have completed exactly once: {done:?}:{}",
                c.describe(&[*id])
            );
        }
    }
    all
}

/// Records every committed write to instance and task rows with the writing session's
/// `application_name` (the node) in `shoal_audit`. A write refused (rolled back) leaves
/// no row.
pub fn install_audit(c: &Cluster) {
    c.db.query(
        "CREATE TABLE shoal_audit (at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), \
           node TEXT NOT NULL, tbl TEXT NOT NULL, instance BIGINT NOT NULL, row_id BIGINT NOT NULL, \
           state TEXT, owner TEXT, epoch BIGINT);
         CREATE FUNCTION shoal_audit_instance() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           INSERT INTO shoal_audit (node, tbl, instance, row_id, state, owner, epoch) VALUES \
           (current_setting('application_name'), 'workflow_instance', NEW.id, NEW.id, NEW.state, NEW.owner, NEW.owner_epoch); \
           RETURN NEW; END $$;
         CREATE FUNCTION shoal_audit_task() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           INSERT INTO shoal_audit (node, tbl, instance, row_id, state) VALUES \
           (current_setting('application_name'), 'task_instance', NEW.workflow_instance_id, NEW.id, NEW.state); \
           RETURN NEW; END $$;
         CREATE TRIGGER shoal_audit AFTER INSERT OR UPDATE ON workflow_instance \
           FOR EACH ROW EXECUTE FUNCTION shoal_audit_instance();
         CREATE TRIGGER shoal_audit AFTER INSERT OR UPDATE ON task_instance \
           FOR EACH ROW EXECUTE FUNCTION shoal_audit_task();",
    );
}

/// The audit's rows, in commit-visible order: `(seq, node, table, instance, state, owner,
/// epoch)` as text lines.
pub fn audit(c: &Cluster) -> Vec<String> {
    c.db.query(
        "SELECT at, node, tbl, instance, row_id, coalesce(state, ''), coalesce(owner, ''), \
         coalesce(epoch::text, '') FROM shoal_audit ORDER BY at",
    )
    .lines()
    .filter(|l| !l.is_empty())
    .map(str::to_string)
    .collect()
}

/// As [`check_markers`], for a campaign where a worker may be cut off while its task
/// ends: no two executions of one task overlap, each task of `instances` has exactly one
/// completed execution of its successful attempt, and any other completed execution is of
/// an attempt the master counted lost with its worker (`need_fault_tolerance`: it ended
/// unreported on a worker whose lease lapsed, at-least-once). Returns how many of those.
pub fn check_markers_unreported(
    c: &Cluster,
    markers: &Path,
    instances: &[i64],
    dag: &Dag,
) -> usize {
    let all = check_no_overlap(c, markers);
    check_order(c, &all, instances, dag);
    let mut unreported = 0;
    for id in instances {
        let inst = c.instance(*id);
        let rows = inst["tasks"].as_array().unwrap();
        let state_of = |tid: i64| {
            rows.iter()
                .find(|r| r["id"] == tid)
                .and_then(|r| r["state"].as_str())
                .unwrap_or("?")
                .to_string()
        };
        for (task, _) in dag {
            let done: Vec<_> = all
                .iter()
                .filter(|e| e.instance == *id && e.task == *task && e.completed)
                .collect();
            let ok = done.iter().filter(|e| state_of(e.tid) == "success").count();
            let lost = done
                .iter()
                .filter(|e| state_of(e.tid) == "need_fault_tolerance")
                .count();
            assert!(
                ok == 1 && ok + lost == done.len(),
                "instance {id}: task {task} must have completed once, besides attempts lost \
                 with their worker: {done:?}:{}",
                c.describe(&[*id])
            );
            unreported += lost;
        }
    }
    unreported
}

/// No two executions of one task overlap; returns every execution.
fn check_no_overlap(c: &Cluster, markers: &Path) -> Vec<Execution> {
    let all = executions(markers);
    let mut by_task: BTreeMap<(i64, &str), Vec<&Execution>> = BTreeMap::new();
    for e in &all {
        by_task.entry((e.instance, &e.task)).or_default().push(e);
    }
    for runs in by_task.values_mut() {
        runs.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in runs.windows(2) {
            assert!(
                w[1].start > w[0].last,
                "two executions of one task overlap: {:?} and {:?}:{}",
                w[0],
                w[1],
                c.describe(&[w[0].instance])
            );
        }
    }
    all
}

/// No execution of a task of `instances` started before a completed execution of each of
/// its upstream tasks had ended.
fn check_order(c: &Cluster, all: &[Execution], instances: &[i64], dag: &Dag) {
    for id in instances {
        let of = |task: &str| -> Vec<&Execution> {
            all.iter()
                .filter(|e| e.instance == *id && e.task == task)
                .collect()
        };
        for (task, upstream) in dag {
            for up in *upstream {
                // The first end of the upstream task (it may have completed twice).
                let ended = of(up)
                    .iter()
                    .filter(|e| e.completed)
                    .map(|e| e.last)
                    .fold(f64::INFINITY, f64::min);
                for e in of(task) {
                    assert!(
                        e.start > ended,
                        "instance {id}: task {task} started at {} before its upstream task {up} \
                         ended ({ended}): {e:?}:{}",
                        e.start,
                        c.describe(&[*id])
                    );
                }
            }
        }
    }
}
