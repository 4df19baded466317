//! Running tasks: admission against the slots, one tokio task per accepted task, and the
//! RUNNING / SUCCESS / FAILURE / KILLED events each one reports through the outbox.
//!
//! Task types: `noop` succeeds at once; `shell` and `python` run their script in a process
//! group of their own (see [`process`]); `http` sends a request ([`http`]); `sql` runs a
//! query against a configured datasource ([`sql`]). Any other type fails with a message
//! naming the types this worker runs. `spark` runs spark-submit ([`spark`]) and `notebook`
//! papermill ([`notebook`]) as processes the way script tasks run theirs.
//!
//! Timeouts: a task with a `timeout` gets a timer beside its run. With strategy `fail` the
//! timer stops the task like a kill does (process group killed, request or query dropped)
//! and the attempt ends FAILURE `timed out after <N>s`; with `warn` it writes one warning
//! line to the task log and lets the task run on.
//!
//! Abandoning: when the worker's registry lease was lost, or shutdown's grace period ran
//! out, the masters treat the worker's attempts as lost and run them again elsewhere. The
//! worker then kills them and reports nothing more for them: a KILLED event would read as an
//! operator's kill, and any late event is for a superseded attempt. Their unsent events are
//! dropped from the outbox, and a later dispatch of the same attempt is refused.
//!
//! Script tasks record their process group under `data_dir/running` while they run, so that
//! a worker restarting after a crash can kill what its predecessor left ([`orphans`]).

mod admission;
mod container;
mod fence;
mod http;
mod kill;
mod kubernetes;
mod launch;
mod notebook;
mod orphans;
mod process;
mod publish;
mod reuse;
mod run;
mod scratch;
mod script;
mod set_value;
mod spark;
mod sql;
mod stop;
mod table;
mod task_log;
mod tenant;
mod timeout;

use crate::disk::DiskCheck;
use crate::outbox::Outbox;
use fence::Fences;
use orphans::Records;
use scratch::Scratch;
use shoal_common::registry::LeaseGate;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use table::Table;
use tokio::sync::watch;
use tracing::warn;

/// `exit_code` of a failure that is not a process exit (bad definition, spawn error).
pub(crate) const NO_EXIT_CODE: i32 = -1;

/// Where tasks write.
#[derive(Clone, Debug)]
pub(crate) struct ExecutorDirs {
    pub(crate) logs: PathBuf,
    pub(crate) work: PathBuf,
    /// Process group records of the running script tasks.
    pub(crate) running: PathBuf,
}

pub(crate) use container::Containers;
pub use launch::PASSED as TASK_ENV;
pub(crate) use launch::TaskEnvironment;
pub(crate) use orphans::kill_leftovers;
pub(crate) use scratch::clear as clear_work_dirs;
pub(crate) use spark::spark_submit;
pub(crate) use sql::Datasources;
pub use sql::EVERY_PROJECT;
pub(crate) use stop::abandon_on_lease_loss;
pub(crate) use tenant::Tenants;

/// How tasks run on this worker.
pub(crate) struct ExecutorConfig {
    pub(crate) slots: u32,
    pub(crate) dirs: ExecutorDirs,
    /// Interpreter of python tasks, and of papermill for notebook tasks.
    pub(crate) python: String,
    /// The spark-submit of spark tasks ([`spark_submit`]).
    pub(crate) spark_submit: PathBuf,
    pub(crate) containers: Containers,
    /// What script tasks get of the worker's environment.
    pub(crate) task_env: TaskEnvironment,
    pub(crate) datasources: Datasources,
    /// Which OS user script tasks run as.
    pub(crate) tenants: Tenants,
    /// The data dir, and the least free space on its disk for taking a new task.
    pub(crate) data_dir: PathBuf,
    pub(crate) min_free_disk: u64,
}

/// How a task ended.
enum Outcome {
    Success {
        output: HashMap<String, String>,
    },
    Failure {
        exit_code: i32,
        message: String,
        output: HashMap<String, String>,
    },
    Killed {
        message: String,
    },
}

impl Outcome {
    fn failure(message: impl Into<String>) -> Self {
        Outcome::Failure {
            exit_code: NO_EXIT_CODE,
            message: message.into(),
            output: HashMap::new(),
        }
    }

    /// What a runner returns when its task was stopped (for whichever reason).
    fn killed() -> Self {
        Outcome::Killed {
            message: "killed by request".into(),
        }
    }
}

pub(crate) struct Executor {
    slots: u32,
    dirs: ExecutorDirs,
    /// Work directories of script tasks.
    scratch: Arc<Scratch>,
    /// Process group records of running script tasks.
    records: Records,
    python: String,
    spark_submit: PathBuf,
    containers: Containers,
    task_env: TaskEnvironment,
    datasources: Datasources,
    tenants: Tenants,
    disk: DiskCheck,
    outbox: Outbox,
    table: Mutex<Table>,
    running_count: watch::Sender<u32>,
    /// Task futures not yet done: unlike `running_count`, it drops only after the last
    /// event is queued, which is what shutdown waits for before flushing the outbox.
    active: watch::Sender<usize>,
    /// Counts the registry leases the worker lost, and says whether its lease is fresh
    /// ([`Executor::follow_lease`]).
    lease: OnceLock<(watch::Receiver<u64>, LeaseGate)>,
}

impl Executor {
    pub(crate) fn new(config: ExecutorConfig, outbox: Outbox) -> Arc<Self> {
        let ExecutorConfig {
            slots,
            dirs,
            python,
            spark_submit,
            containers,
            task_env,
            datasources,
            tenants,
            data_dir,
            min_free_disk,
        } = config;
        Arc::new(Executor {
            disk: DiskCheck::new(data_dir, min_free_disk),
            slots,
            scratch: Arc::new(Scratch::new(dirs.work.clone())),
            records: Records::new(dirs.running.clone()),
            dirs,
            python,
            spark_submit,
            containers,
            task_env,
            datasources,
            tenants,
            outbox,
            table: Mutex::new(Table {
                running: HashMap::new(),
                finished: HashMap::new(),
                finished_order: VecDeque::new(),
                fences: Fences::default(),
                accepting: true,
            }),
            running_count: watch::Sender::new(0),
            active: watch::Sender::new(0),
            lease: OnceLock::new(),
        })
    }

    /// Tags every task accepted from now on with the current value of `lost` (the count of
    /// lost registry leases, [`shoal_common::registry::Membership::lost`]), so that
    /// [`Executor::abandon_older`] can tell the tasks of a lost lease from those dispatched
    /// after the worker registered again. While `gate` says the lease is not fresh, new
    /// attempts are refused: they would be killed with it. Set once, before the worker serves.
    pub(crate) fn follow_lease(&self, lost: watch::Receiver<u64>, gate: LeaseGate) {
        if self.lease.set((lost, gate)).is_err() {
            warn!("lease generation already followed");
        }
    }

    /// The attempts running now (task instance id, attempt).
    pub(crate) fn running_attempts(&self) -> std::collections::HashSet<(i64, i32)> {
        let table = self.table.lock().expect("task table lock");
        table
            .running
            .keys()
            .map(|k| (k.task_instance_id, k.attempt))
            .collect()
    }

    /// The number of running tasks, updated on every change.
    pub(crate) fn running(&self) -> watch::Receiver<u32> {
        self.running_count.subscribe()
    }

    /// Refuses dispatches of new attempts from now on (a known attempt is still recognised,
    /// so that a master taking over can adopt it).
    pub(crate) fn drain(&self) {
        self.table.lock().expect("task table lock").accepting = false;
    }

    /// Waits up to `wait` for every accepted task to finish and queue its last event. True
    /// if none is left.
    pub(crate) async fn wait_idle(&self, wait: Duration) -> bool {
        let mut active = self.active.subscribe();
        tokio::time::timeout(wait, active.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Releases what tasks share (datasource pools); called once no task runs any more.
    pub(crate) async fn close(&self) {
        self.datasources.close().await;
    }
}

#[cfg(test)]
mod tests;
