//! Process-wide Prometheus metrics, on the `prometheus-client` crate.
//!
//! Every metric of shoal is a static declared here and registered in one process-wide
//! registry, so one [`render`] shows them all in a stable order (the order of
//! registration), and a process renders every metric whether or not its code touches it
//! (an api-server shows the master's counters at 0). Recording a counter or gauge is one
//! atomic operation; a histogram takes a short lock.
//!
//! Labels are fixed: every series of a labelled family is created with the family, so it
//! renders at 0 before its first use (e.g. `shoal_instances_finished_total{state="paused"}`).
//!
//! The output is the Prometheus text exposition format, version 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>), so counters keep
//! their `_total` name in `# HELP` and `# TYPE` too. The crate adds `_total` to a
//! counter's name and the unit to a histogram's, and a `.` to every help text.

use crate::types::WorkflowState;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use std::sync::LazyLock;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
pub use prometheus_client::metrics::counter::Counter;
pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::metrics::histogram::Histogram;

/// The label set of a family split by final state: `state="…"`.
type State = [(&'static str, &'static str); 1];

/// Upper bounds of the histogram buckets in seconds, 1 ms to 5 min (`+Inf` comes on top).
/// A bound is inclusive: an observation of exactly 1 ms counts in `le="0.001"`.
const BUCKETS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0,
];

fn durations() -> Histogram {
    Histogram::new(BUCKETS)
}

/// A counter family with one series per `state` in `states`, each at 0.
fn by_state(states: impl IntoIterator<Item = &'static str>) -> Family<State, Counter> {
    let family = Family::default();
    for state in states {
        family.get_or_create_owned(&[("state", state)]);
    }
    family
}

/// The series of `state` in `family`, which has it from the start.
fn series(family: &Family<State, Counter>, state: &'static str) -> Counter {
    family
        .get(&[("state", state)])
        .map(|c| c.clone())
        .expect("the family is created with every state")
}

// ---- master ----------------------------------------------------------------------------

pub static COMMANDS_CLAIMED: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static INSTANCES_STARTED: LazyLock<Counter> = LazyLock::new(Counter::default);
static INSTANCES_FINISHED: LazyLock<Family<State, Counter>> = LazyLock::new(|| {
    by_state(
        WorkflowState::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| s.as_str()),
    )
});
pub static INSTANCES_RUNNING: LazyLock<Gauge> = LazyLock::new(Gauge::default);
pub static QUEUE_DEPTH: LazyLock<Gauge> = LazyLock::new(Gauge::default);
pub static DISPATCH_LATENCY: LazyLock<Histogram> = LazyLock::new(durations);
pub static EVENTS_APPLIED: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static EVENTS_IGNORED: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static FAILOVERS: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static TASKS_LOST: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static MASTER_OVERLOADED: LazyLock<Gauge> = LazyLock::new(Gauge::default);

/// The `shoal_instances_finished_total` series of a final state; `None` for a state that
/// does not end a run.
pub fn instances_finished(state: WorkflowState) -> Option<Counter> {
    state
        .is_terminal()
        .then(|| series(&INSTANCES_FINISHED, state.as_str()))
}

// ---- worker ----------------------------------------------------------------------------

pub static WORKER_TASKS_RUNNING: LazyLock<Gauge> = LazyLock::new(Gauge::default);
pub static WORKER_TASKS_STARTED: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static WORKER_TASK_DURATION: LazyLock<Histogram> = LazyLock::new(durations);
static WORKER_TASKS_FINISHED: LazyLock<Family<State, Counter>> =
    LazyLock::new(|| by_state(["success", "failure", "killed"]));
pub static WORKER_TASKS_FINISHED_SUCCESS: LazyLock<Counter> =
    LazyLock::new(|| series(&WORKER_TASKS_FINISHED, "success"));
pub static WORKER_TASKS_FINISHED_FAILURE: LazyLock<Counter> =
    LazyLock::new(|| series(&WORKER_TASKS_FINISHED, "failure"));
pub static WORKER_TASKS_FINISHED_KILLED: LazyLock<Counter> =
    LazyLock::new(|| series(&WORKER_TASKS_FINISHED, "killed"));
pub static WORKER_EVENTS_UNACKED: LazyLock<Gauge> = LazyLock::new(Gauge::default);

// ---- api-server ------------------------------------------------------------------------

pub static API_REQUESTS: LazyLock<Counter> = LazyLock::new(Counter::default);
pub static API_COMMANDS_WRITTEN: LazyLock<Counter> = LazyLock::new(Counter::default);

// ---- triggers (api-server for webhooks, brokers' consumers) -----------------------------

/// What became of a message a trigger received (a webhook call, a broker message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerOutcome {
    /// It started a run.
    Started,
    /// Its trigger's `when` did not match: nothing was written.
    Filtered,
    /// It could not be used (not JSON, a mapping or `when` failed on it).
    Ignored,
    /// It repeated one that started a run (or delivered its event) already.
    Duplicate,
    /// It was delivered as its trigger's event (completing the waits of its key).
    Delivered,
}

impl TriggerOutcome {
    fn as_str(self) -> &'static str {
        match self {
            TriggerOutcome::Started => "started",
            TriggerOutcome::Filtered => "filtered",
            TriggerOutcome::Ignored => "ignored",
            TriggerOutcome::Duplicate => "duplicate",
            TriggerOutcome::Delivered => "delivered",
        }
    }
}

/// `trigger="project/workflow/name"`, `outcome="…"`. Triggers come and go with
/// definitions, so their series (and the family's header) appear with their first
/// message, unlike the fixed ones.
type TriggerLabels = [(&'static str, String); 2];
static TRIGGER_MESSAGES: LazyLock<Family<TriggerLabels, Counter>> = LazyLock::new(Family::default);

/// Counts one message of trigger `trigger` (`project/workflow/name`).
pub fn trigger_message(trigger: &str, outcome: TriggerOutcome) {
    let labels = [
        ("trigger", trigger.to_string()),
        ("outcome", outcome.as_str().to_string()),
    ];
    TRIGGER_MESSAGES.get_or_create(&labels).inc();
}

/// Every metric of the process, `shoal_` before each name, in rendering order.
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let mut r = Registry::with_prefix("shoal");
    r.register(
        "commands_claimed",
        "Commands claimed by this master (start, resume, rerun, resubmit-failed)",
        COMMANDS_CLAIMED.clone(),
    );
    r.register(
        "instances_started",
        "Workflow instance runs this master started from a command (start, resume, rerun, resubmit-failed); takeovers count in shoal_failovers_total",
        INSTANCES_STARTED.clone(),
    );
    r.register(
        "instances_finished",
        "Workflow instance runs this master ended, by final state",
        INSTANCES_FINISHED.clone(),
    );
    r.register(
        "instances_running",
        "Workflow instances this master drives right now",
        INSTANCES_RUNNING.clone(),
    );
    r.register(
        "queue_depth",
        "Tasks in this master's dispatch queue, waiting for a worker",
        QUEUE_DEPTH.clone(),
    );
    r.register_with_unit(
        "dispatch_latency",
        "Time from a task entering the dispatch queue to a worker accepting it",
        Unit::Seconds,
        DISPATCH_LATENCY.clone(),
    );
    r.register(
        "events_applied",
        "Events the master's workflow runtimes accepted (task state changes, starts, timers)",
        EVENTS_APPLIED.clone(),
    );
    r.register(
        "events_ignored",
        "Events the master ignored: duplicates, another attempt, backwards moves, tasks it no longer drives",
        EVENTS_IGNORED.clone(),
    );
    r.register(
        "failovers",
        "Workflow instances this master took over from a dead master",
        FAILOVERS.clone(),
    );
    r.register(
        "tasks_lost",
        "Task attempts marked need_fault_tolerance because their worker left",
        TASKS_LOST.clone(),
    );
    r.register(
        "master_overloaded",
        "1 while this master claims no new commands because the host is over --max-cpu-load or under --min-free-memory",
        MASTER_OVERLOADED.clone(),
    );
    r.register(
        "worker_tasks_running",
        "Task attempts running on this worker",
        WORKER_TASKS_RUNNING.clone(),
    );
    r.register(
        "worker_tasks_started",
        "Task attempts this worker accepted and started",
        WORKER_TASKS_STARTED.clone(),
    );
    r.register_with_unit(
        "worker_task_duration",
        "Run time of task attempts on this worker, from acceptance to the final event",
        Unit::Seconds,
        WORKER_TASK_DURATION.clone(),
    );
    r.register(
        "worker_tasks_finished",
        "Task attempts this worker finished, by final state",
        WORKER_TASKS_FINISHED.clone(),
    );
    r.register(
        "worker_events_unacked",
        "Task events in the worker's outbox that no master has acked yet",
        WORKER_EVENTS_UNACKED.clone(),
    );
    r.register(
        "api_requests",
        "Requests to the REST API (/api/v1), any outcome",
        API_REQUESTS.clone(),
    );
    r.register(
        "api_commands_written",
        "Commands the api-server wrote (start, resume, rerun, resubmit-failed)",
        API_COMMANDS_WRITTEN.clone(),
    );
    r.register(
        "trigger_messages",
        "Messages triggers received (webhook calls, broker messages), by trigger and outcome: started, filtered by when, ignored (unusable), duplicate, delivered (as an event)",
        TRIGGER_MESSAGES.clone(),
    );
    r
});

/// Every metric of the process in the Prometheus text format (0.0.4).
pub fn render() -> String {
    encode(&REGISTRY)
}

fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_text::encode(&mut out, registry).expect("writing to a String does not fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    #[test]
    fn histograms_count_durations_in_inclusive_buckets_of_seconds() {
        let h = durations();
        for d in [
            Duration::from_micros(500), // 0.001
            Duration::from_millis(1),   // 0.001: bounds are inclusive
            Duration::from_millis(7),   // 0.01
            Duration::from_secs(2),     // 5
            Duration::from_secs(600),   // +Inf
        ] {
            h.observe(d.as_secs_f64());
        }
        let mut r = Registry::with_prefix("t");
        r.register_with_unit("latency", "Latency", Unit::Seconds, h);
        let expected = "\
# HELP t_latency_seconds Latency.
# TYPE t_latency_seconds histogram
t_latency_seconds_bucket{le=\"0.001\"} 2
t_latency_seconds_bucket{le=\"0.005\"} 2
t_latency_seconds_bucket{le=\"0.01\"} 3
t_latency_seconds_bucket{le=\"0.05\"} 3
t_latency_seconds_bucket{le=\"0.1\"} 3
t_latency_seconds_bucket{le=\"0.5\"} 3
t_latency_seconds_bucket{le=\"1\"} 3
t_latency_seconds_bucket{le=\"5\"} 4
t_latency_seconds_bucket{le=\"30\"} 4
t_latency_seconds_bucket{le=\"60\"} 4
t_latency_seconds_bucket{le=\"300\"} 4
t_latency_seconds_bucket{le=\"+Inf\"} 5
t_latency_seconds_sum 602.0085
t_latency_seconds_count 5
";
        assert_eq!(encode(&r), expected);
    }

    #[test]
    fn the_process_registry_lists_every_name_once_with_one_header() {
        let text = render();
        let mut headers = HashSet::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split(' ').nth(2).unwrap();
            assert!(headers.insert(name.to_string()), "{name} has two headers");
        }
        for name in [
            "shoal_commands_claimed_total",
            "shoal_instances_started_total",
            "shoal_instances_finished_total",
            "shoal_instances_running",
            "shoal_queue_depth",
            "shoal_dispatch_latency_seconds",
            "shoal_events_applied_total",
            "shoal_events_ignored_total",
            "shoal_failovers_total",
            "shoal_tasks_lost_total",
            "shoal_master_overloaded",
            "shoal_worker_tasks_running",
            "shoal_worker_tasks_started_total",
            "shoal_worker_task_duration_seconds",
            "shoal_worker_tasks_finished_total",
            "shoal_worker_events_unacked",
            "shoal_api_requests_total",
            "shoal_api_commands_written_total",
        ] {
            assert!(headers.contains(name), "{name} missing from:\n{text}");
        }
        // Not shoal_trigger_messages_total: it has no series, so no header, until a trigger
        // receives a message.
        assert_eq!(headers.len(), 18);
        for state in ["success", "failure", "stopped", "paused"] {
            let line = format!("shoal_instances_finished_total{{state=\"{state}\"}} ");
            assert!(text.contains(&line), "{line} missing");
        }
        for state in ["success", "failure", "killed"] {
            let line = format!("shoal_worker_tasks_finished_total{{state=\"{state}\"}} ");
            assert!(text.contains(&line), "{line} missing");
        }
        assert!(text.contains("# TYPE shoal_queue_depth gauge\n"));
        assert!(text.contains("# TYPE shoal_dispatch_latency_seconds histogram\n"));
        assert!(text.contains("shoal_dispatch_latency_seconds_bucket{le=\"+Inf\"} "));
        assert!(text.contains(
            "# HELP shoal_queue_depth Tasks in this master's dispatch queue, waiting for a worker.\n"
        ));
        assert!(
            !text.contains(".."),
            "a help text ends in two dots:\n{text}"
        );
        // Every sample line belongs to the family whose header came last.
        let mut family = "";
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap();
            } else if !line.starts_with('#') {
                assert!(line.starts_with(family), "{line} outside {family}");
            }
        }
    }

    #[test]
    fn final_states_map_to_their_series() {
        for &state in WorkflowState::ALL {
            let counter = instances_finished(state);
            assert_eq!(counter.is_some(), state.is_terminal(), "{state}");
            if let Some(c) = counter {
                let before = c.get();
                c.inc();
                let line = format!(
                    "shoal_instances_finished_total{{state=\"{}\"}} {}",
                    state.as_str(),
                    before + 1
                );
                assert!(render().lines().any(|l| l == line), "{line} missing");
            }
        }
    }

    #[test]
    fn trigger_messages_count_by_trigger_and_outcome() {
        trigger_message("p/w/t", TriggerOutcome::Filtered);
        trigger_message("p/w/t", TriggerOutcome::Filtered);
        trigger_message("p/w/t", TriggerOutcome::Started);
        // Names in any script are label values as they are (UTF-8).
        trigger_message("数据仓库/日次集計/café", TriggerOutcome::Started);
        let text = render();
        for line in [
            "shoal_trigger_messages_total{trigger=\"p/w/t\",outcome=\"filtered\"} 2",
            "shoal_trigger_messages_total{trigger=\"p/w/t\",outcome=\"started\"} 1",
            "shoal_trigger_messages_total{trigger=\"数据仓库/日次集計/café\",outcome=\"started\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn the_worker_series_are_the_familys() {
        for (counter, state) in [
            (&WORKER_TASKS_FINISHED_SUCCESS, "success"),
            (&WORKER_TASKS_FINISHED_FAILURE, "failure"),
            (&WORKER_TASKS_FINISHED_KILLED, "killed"),
        ] {
            counter.inc_by(7);
            let line = format!("shoal_worker_tasks_finished_total{{state=\"{state}\"}} 7");
            assert!(render().lines().any(|l| l == line), "{line} missing");
        }
    }
}
