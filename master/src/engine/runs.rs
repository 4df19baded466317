//! The runs this master drives, and the definitions their runtimes share.

use super::definitions::Definitions;
use crate::runtime::WorkflowRuntime;
use shoal_common::definition::WorkflowDef;
use shoal_common::metrics;
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::Priority;
use std::collections::HashMap;
use std::sync::Arc;

/// An instance this master drives.
pub(super) struct Run {
    pub instance_id: i64,
    pub project: String,
    pub run_no: i32,
    pub started_at: i64,
    /// The schedule time of a cron or backfill run (or of such a run's child).
    pub schedule_time: Option<i64>,
    pub rt: WorkflowRuntime,
    pub epoch: i64,
    pub priority: Priority,
    pub start_params: Params,
    pub options: StartOptions,
    /// Current attempt's task-instance id per node.
    pub task_ids: Vec<Option<i64>>,
}

impl Run {
    /// The instant the run stands for: its schedule time, else its start.
    pub fn stands_for(&self) -> i64 {
        self.schedule_time.unwrap_or(self.started_at)
    }
}

/// The runs by instance id; it counts them in `instances_running`.
#[derive(Default)]
pub(super) struct Runs {
    by_id: HashMap<i64, Run>,
    /// The definitions the runs' runtimes hold, one per version and start options.
    definitions: Definitions,
}

impl Runs {
    pub fn get(&self, instance: &i64) -> Option<&Run> {
        self.by_id.get(instance)
    }

    pub fn get_mut(&mut self, instance: &i64) -> Option<&mut Run> {
        self.by_id.get_mut(instance)
    }

    pub fn contains_key(&self, instance: &i64) -> bool {
        self.by_id.contains_key(instance)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Each run's instance id and owner epoch.
    pub fn epochs(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.by_id.iter().map(|(id, run)| (*id, run.epoch))
    }

    /// Drives `run` from now on, in place of any run of its instance driven before.
    pub fn insert(&mut self, run: Run) {
        if self.by_id.insert(run.instance_id, run).is_none() {
            metrics::INSTANCES_RUNNING.inc();
        }
    }

    pub fn remove(&mut self, instance: &i64) -> Option<Run> {
        let run = self.by_id.remove(instance)?;
        metrics::INSTANCES_RUNNING.dec();
        Some(run)
    }

    /// `def` (version `version`), or an equal one a run holds already.
    pub fn share(&mut self, version: i32, def: WorkflowDef) -> Arc<WorkflowDef> {
        self.definitions.share(version, def)
    }
}
