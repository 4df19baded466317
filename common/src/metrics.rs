//! Process-wide Prometheus metrics, without a metrics crate.
//!
//! Every metric of shoal is a `pub static` declared here, so one [`render`] shows them all
//! in a stable order (the order of [`ALL`]), and a process renders every metric whether or
//! not its code touches it (an api-server shows the master's counters at 0). Recording is
//! one relaxed atomic operation: no lock, no allocation, no registration step.
//!
//! Labels are fixed at compile time: a labelled metric is one static per label value
//! (e.g. [`INSTANCES_FINISHED_SUCCESS`] is `shoal_instances_finished_total{state="success"}`).
//! Statics that share a name are listed next to each other in [`ALL`] and rendered under
//! one `# HELP`/`# TYPE` header.
//!
//! The output is the Prometheus text exposition format, version 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>).

use crate::types::WorkflowState;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A fixed set of `name="value"` label pairs.
pub type Labels = &'static [(&'static str, &'static str)];

/// A value that only goes up.
pub struct Counter {
    name: &'static str,
    help: &'static str,
    labels: Labels,
    value: AtomicU64,
}

impl Counter {
    pub const fn new(name: &'static str, help: &'static str) -> Self {
        Self::with_labels(name, help, &[])
    }

    pub const fn with_labels(name: &'static str, help: &'static str, labels: Labels) -> Self {
        Counter {
            name,
            help,
            labels,
            value: AtomicU64::new(0),
        }
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
pub struct Gauge {
    name: &'static str,
    help: &'static str,
    labels: Labels,
    value: AtomicI64,
}

impl Gauge {
    pub const fn new(name: &'static str, help: &'static str) -> Self {
        Self::with_labels(name, help, &[])
    }

    pub const fn with_labels(name: &'static str, help: &'static str, labels: Labels) -> Self {
        Gauge {
            name,
            help,
            labels,
            value: AtomicI64::new(0),
        }
    }

    pub fn set(&self, v: i64) {
        self.value.store(v, Ordering::Relaxed);
    }

    pub fn add(&self, n: i64) {
        self.value.fetch_add(n, Ordering::Relaxed);
    }

    pub fn sub(&self, n: i64) {
        self.value.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn dec(&self) {
        self.sub(1);
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// Upper bounds of the histogram buckets in nanoseconds (the `+Inf` bucket comes on top).
const BOUNDS_NS: [u64; 11] = [
    1_000_000,       // 1 ms
    5_000_000,       // 5 ms
    10_000_000,      // 10 ms
    50_000_000,      // 50 ms
    100_000_000,     // 100 ms
    500_000_000,     // 500 ms
    1_000_000_000,   // 1 s
    5_000_000_000,   // 5 s
    30_000_000_000,  // 30 s
    60_000_000_000,  // 1 min
    300_000_000_000, // 5 min
];
/// The same bounds as rendered in `le`, `+Inf` last.
const LE: [&str; 12] = [
    "0.001", "0.005", "0.01", "0.05", "0.1", "0.5", "1", "5", "30", "60", "300", "+Inf",
];

/// A distribution of durations over fixed buckets (1 ms to 5 min, then `+Inf`).
///
/// Each observation increments exactly one bucket (the first whose bound it does not
/// exceed) and adds its nanoseconds to the sum. The cumulative `_bucket` series and
/// `_count` are computed from one read of the buckets when rendering, so `+Inf` always
/// equals `_count` even while other threads observe.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    labels: Labels,
    buckets: [AtomicU64; 12],
    sum_ns: AtomicU64,
}

impl Histogram {
    pub const fn new(name: &'static str, help: &'static str) -> Self {
        Self::with_labels(name, help, &[])
    }

    pub const fn with_labels(name: &'static str, help: &'static str, labels: Labels) -> Self {
        Histogram {
            name,
            help,
            labels,
            buckets: [const { AtomicU64::new(0) }; 12],
            sum_ns: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        // u64 nanoseconds hold 584 years; a longer observation is clamped.
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NS.partition_point(|&bound| bound < ns);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Sum of the observations so far.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed))
    }
}

/// One entry of the registry.
#[derive(Clone, Copy)]
pub enum Metric {
    Counter(&'static Counter),
    Gauge(&'static Gauge),
    Histogram(&'static Histogram),
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Counter(m) => m.name,
            Metric::Gauge(m) => m.name,
            Metric::Histogram(m) => m.name,
        }
    }

    fn help(self) -> &'static str {
        match self {
            Metric::Counter(m) => m.help,
            Metric::Gauge(m) => m.help,
            Metric::Histogram(m) => m.help,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Metric::Counter(_) => "counter",
            Metric::Gauge(_) => "gauge",
            Metric::Histogram(_) => "histogram",
        }
    }
}

// ---- master ----------------------------------------------------------------------------

pub static COMMANDS_CLAIMED: Counter = Counter::new(
    "shoal_commands_claimed_total",
    "Commands claimed by this master (start, resume, rerun, resubmit-failed).",
);
pub static INSTANCES_STARTED: Counter = Counter::new(
    "shoal_instances_started_total",
    "Workflow instance runs this master started from a command (start, resume, rerun, resubmit-failed); takeovers count in shoal_failovers_total.",
);
const FINISHED_HELP: &str = "Workflow instance runs this master ended, by final state.";
pub static INSTANCES_FINISHED_SUCCESS: Counter = Counter::with_labels(
    "shoal_instances_finished_total",
    FINISHED_HELP,
    &[("state", "success")],
);
pub static INSTANCES_FINISHED_FAILURE: Counter = Counter::with_labels(
    "shoal_instances_finished_total",
    FINISHED_HELP,
    &[("state", "failure")],
);
pub static INSTANCES_FINISHED_STOPPED: Counter = Counter::with_labels(
    "shoal_instances_finished_total",
    FINISHED_HELP,
    &[("state", "stopped")],
);
pub static INSTANCES_FINISHED_PAUSED: Counter = Counter::with_labels(
    "shoal_instances_finished_total",
    FINISHED_HELP,
    &[("state", "paused")],
);
pub static INSTANCES_RUNNING: Gauge = Gauge::new(
    "shoal_instances_running",
    "Workflow instances this master drives right now.",
);
pub static QUEUE_DEPTH: Gauge = Gauge::new(
    "shoal_queue_depth",
    "Tasks in this master's dispatch queue, waiting for a worker.",
);
pub static DISPATCH_LATENCY: Histogram = Histogram::new(
    "shoal_dispatch_latency_seconds",
    "Time from a task entering the dispatch queue to a worker accepting it.",
);
pub static EVENTS_APPLIED: Counter = Counter::new(
    "shoal_events_applied_total",
    "Events the master's workflow runtimes accepted (task state changes, starts, timers).",
);
pub static EVENTS_IGNORED: Counter = Counter::new(
    "shoal_events_ignored_total",
    "Events the master ignored: duplicates, another attempt, backwards moves, tasks it no longer drives.",
);
pub static FAILOVERS: Counter = Counter::new(
    "shoal_failovers_total",
    "Workflow instances this master took over from a dead master.",
);
pub static TASKS_LOST: Counter = Counter::new(
    "shoal_tasks_lost_total",
    "Task attempts marked need_fault_tolerance because their worker left.",
);

/// The `shoal_instances_finished_total` series of a final state; `None` for a state that
/// does not end a run.
pub fn instances_finished(state: WorkflowState) -> Option<&'static Counter> {
    match state {
        WorkflowState::Success => Some(&INSTANCES_FINISHED_SUCCESS),
        WorkflowState::Failure => Some(&INSTANCES_FINISHED_FAILURE),
        WorkflowState::Stopped => Some(&INSTANCES_FINISHED_STOPPED),
        WorkflowState::Paused => Some(&INSTANCES_FINISHED_PAUSED),
        WorkflowState::Submitted
        | WorkflowState::Running
        | WorkflowState::ReadyPause
        | WorkflowState::ReadyStop
        | WorkflowState::SerialWait => None,
    }
}

// ---- worker ----------------------------------------------------------------------------

pub static WORKER_TASKS_RUNNING: Gauge = Gauge::new(
    "shoal_worker_tasks_running",
    "Task attempts running on this worker.",
);
pub static WORKER_TASKS_STARTED: Counter = Counter::new(
    "shoal_worker_tasks_started_total",
    "Task attempts this worker accepted and started.",
);
pub static WORKER_TASK_DURATION: Histogram = Histogram::new(
    "shoal_worker_task_duration_seconds",
    "Run time of task attempts on this worker, from acceptance to the final event.",
);
const WORKER_FINISHED_HELP: &str = "Task attempts this worker finished, by final state.";
pub static WORKER_TASKS_FINISHED_SUCCESS: Counter = Counter::with_labels(
    "shoal_worker_tasks_finished_total",
    WORKER_FINISHED_HELP,
    &[("state", "success")],
);
pub static WORKER_TASKS_FINISHED_FAILURE: Counter = Counter::with_labels(
    "shoal_worker_tasks_finished_total",
    WORKER_FINISHED_HELP,
    &[("state", "failure")],
);
pub static WORKER_TASKS_FINISHED_KILLED: Counter = Counter::with_labels(
    "shoal_worker_tasks_finished_total",
    WORKER_FINISHED_HELP,
    &[("state", "killed")],
);
pub static WORKER_EVENTS_UNACKED: Gauge = Gauge::new(
    "shoal_worker_events_unacked",
    "Task events in the worker's outbox that no master has acked yet.",
);

// ---- api-server ------------------------------------------------------------------------

pub static API_REQUESTS: Counter = Counter::new(
    "shoal_api_requests_total",
    "Requests to the REST API (/api/v1), any outcome.",
);
pub static API_COMMANDS_WRITTEN: Counter = Counter::new(
    "shoal_api_commands_written_total",
    "Commands the api-server wrote (start, resume, rerun, resubmit-failed).",
);

/// Every metric, in rendering order; series of one name are adjacent.
pub static ALL: &[Metric] = &[
    Metric::Counter(&COMMANDS_CLAIMED),
    Metric::Counter(&INSTANCES_STARTED),
    Metric::Counter(&INSTANCES_FINISHED_SUCCESS),
    Metric::Counter(&INSTANCES_FINISHED_FAILURE),
    Metric::Counter(&INSTANCES_FINISHED_STOPPED),
    Metric::Counter(&INSTANCES_FINISHED_PAUSED),
    Metric::Gauge(&INSTANCES_RUNNING),
    Metric::Gauge(&QUEUE_DEPTH),
    Metric::Histogram(&DISPATCH_LATENCY),
    Metric::Counter(&EVENTS_APPLIED),
    Metric::Counter(&EVENTS_IGNORED),
    Metric::Counter(&FAILOVERS),
    Metric::Counter(&TASKS_LOST),
    Metric::Gauge(&WORKER_TASKS_RUNNING),
    Metric::Counter(&WORKER_TASKS_STARTED),
    Metric::Histogram(&WORKER_TASK_DURATION),
    Metric::Counter(&WORKER_TASKS_FINISHED_SUCCESS),
    Metric::Counter(&WORKER_TASKS_FINISHED_FAILURE),
    Metric::Counter(&WORKER_TASKS_FINISHED_KILLED),
    Metric::Gauge(&WORKER_EVENTS_UNACKED),
    Metric::Counter(&API_REQUESTS),
    Metric::Counter(&API_COMMANDS_WRITTEN),
];

/// Every metric of the process in the Prometheus text format (0.0.4).
pub fn render() -> String {
    render_metrics(ALL)
}

/// Renders `metrics` in order, with one `# HELP`/`# TYPE` header per run of equal names.
pub fn render_metrics(metrics: &[Metric]) -> String {
    let mut out = String::with_capacity(metrics.len() * 160);
    let mut previous = None;
    for &m in metrics {
        if previous != Some(m.name()) {
            let _ = writeln!(out, "# HELP {} {}", m.name(), escape_help(m.help()));
            let _ = writeln!(out, "# TYPE {} {}", m.name(), m.kind());
            previous = Some(m.name());
        }
        match m {
            Metric::Counter(c) => sample(&mut out, c.name, "", c.labels, None, c.get()),
            Metric::Gauge(g) => sample(&mut out, g.name, "", g.labels, None, g.get()),
            Metric::Histogram(h) => {
                let counts = h.buckets.each_ref().map(|b| b.load(Ordering::Relaxed));
                let mut cumulative = 0u64;
                for (le, n) in LE.iter().zip(counts) {
                    cumulative += n;
                    sample(&mut out, h.name, "_bucket", h.labels, Some(le), cumulative);
                }
                let sum = h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
                sample(&mut out, h.name, "_sum", h.labels, None, sum);
                sample(&mut out, h.name, "_count", h.labels, None, cumulative);
            }
        }
    }
    out
}

/// One `name{labels} value` line.
fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: Labels,
    le: Option<&str>,
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    out.push_str(suffix);
    let pairs = labels.iter().copied().chain(le.map(|le| ("le", le)));
    for (i, (key, val)) in pairs.enumerate() {
        out.push(if i == 0 { '{' } else { ',' });
        let _ = write!(out, "{key}=\"{}\"", escape_label(val));
    }
    if !labels.is_empty() || le.is_some() {
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

fn escape_help(s: &str) -> String {
    s.replace('\\', r"\\").replace('\n', r"\n")
}

fn escape_label(s: &str) -> String {
    s.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn counters_and_gauges_render_under_one_header_per_name() {
        static C: Counter = Counter::new("t_requests_total", "Requests.");
        static OK: Counter = Counter::with_labels("t_done_total", "Done.", &[("state", "ok")]);
        static BAD: Counter = Counter::with_labels(
            "t_done_total",
            "Done.",
            &[("state", "b\"a\\d\n"), ("kind", "x")],
        );
        static G: Gauge = Gauge::new("t_depth", "Depth\\of the\nqueue.");
        C.add(3);
        OK.inc();
        BAD.add(2);
        G.set(10);
        G.sub(12);
        G.inc();
        let text = render_metrics(&[
            Metric::Counter(&C),
            Metric::Counter(&OK),
            Metric::Counter(&BAD),
            Metric::Gauge(&G),
        ]);
        assert_eq!(
            text,
            "# HELP t_requests_total Requests.\n\
             # TYPE t_requests_total counter\n\
             t_requests_total 3\n\
             # HELP t_done_total Done.\n\
             # TYPE t_done_total counter\n\
             t_done_total{state=\"ok\"} 1\n\
             t_done_total{state=\"b\\\"a\\\\d\\n\",kind=\"x\"} 2\n\
             # HELP t_depth Depth\\\\of the\\nqueue.\n\
             # TYPE t_depth gauge\n\
             t_depth -1\n"
        );
    }

    #[test]
    fn histograms_render_cumulative_buckets_sum_and_count() {
        static H: Histogram =
            Histogram::with_labels("t_latency_seconds", "Latency.", &[("q", "a")]);
        for d in [
            Duration::from_micros(500), // 0.001
            Duration::from_millis(1),   // 0.001: bounds are inclusive
            Duration::from_millis(7),   // 0.01
            Duration::from_secs(2),     // 5
            Duration::from_secs(600),   // +Inf
        ] {
            H.observe(d);
        }
        assert_eq!(H.count(), 5);
        let text = render_metrics(&[Metric::Histogram(&H)]);
        let expected = "\
# HELP t_latency_seconds Latency.
# TYPE t_latency_seconds histogram
t_latency_seconds_bucket{q=\"a\",le=\"0.001\"} 2
t_latency_seconds_bucket{q=\"a\",le=\"0.005\"} 2
t_latency_seconds_bucket{q=\"a\",le=\"0.01\"} 3
t_latency_seconds_bucket{q=\"a\",le=\"0.05\"} 3
t_latency_seconds_bucket{q=\"a\",le=\"0.1\"} 3
t_latency_seconds_bucket{q=\"a\",le=\"0.5\"} 3
t_latency_seconds_bucket{q=\"a\",le=\"1\"} 3
t_latency_seconds_bucket{q=\"a\",le=\"5\"} 4
t_latency_seconds_bucket{q=\"a\",le=\"30\"} 4
t_latency_seconds_bucket{q=\"a\",le=\"60\"} 4
t_latency_seconds_bucket{q=\"a\",le=\"300\"} 4
t_latency_seconds_bucket{q=\"a\",le=\"+Inf\"} 5
t_latency_seconds_sum{q=\"a\"} 602.0085
t_latency_seconds_count{q=\"a\"} 5
";
        assert_eq!(text, expected);
    }

    #[test]
    fn an_unlabelled_histogram_has_only_le() {
        static H: Histogram = Histogram::new("t_h_seconds", "H.");
        let text = render_metrics(&[Metric::Histogram(&H)]);
        assert!(
            text.contains("t_h_seconds_bucket{le=\"0.001\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("t_h_seconds_bucket{le=\"+Inf\"} 0\n"),
            "{text}"
        );
        assert!(
            text.ends_with("t_h_seconds_sum 0\nt_h_seconds_count 0\n"),
            "{text}"
        );
    }

    #[test]
    fn concurrent_updates_add_up() {
        static C: Counter = Counter::new("t_concurrent_total", "C.");
        static G: Gauge = Gauge::new("t_concurrent", "G.");
        static H: Histogram = Histogram::new("t_concurrent_seconds", "H.");
        const THREADS: u64 = 8;
        const PER_THREAD: u64 = 10_000;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        C.inc();
                        G.inc();
                        G.dec();
                        G.add(1);
                        H.observe(Duration::from_millis((t * PER_THREAD + i) % 400));
                    }
                });
            }
        });
        let n = THREADS * PER_THREAD;
        assert_eq!(C.get(), n);
        assert_eq!(G.get(), n as i64);
        assert_eq!(H.count(), n);
        let expected_ms: u64 = (0..n).map(|k| k % 400).sum();
        assert_eq!(H.sum(), Duration::from_millis(expected_ms));
        let text = render_metrics(&[Metric::Histogram(&H)]);
        assert!(
            text.contains(&format!("t_concurrent_seconds_bucket{{le=\"+Inf\"}} {n}\n")),
            "{text}"
        );
        assert!(text.contains(&format!("t_concurrent_seconds_count {n}\n")));
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
        assert_eq!(headers.len(), 17);
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
                assert_eq!(c.labels, &[("state", state.as_str())]);
            }
        }
    }
}
