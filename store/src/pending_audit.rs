//! The audit entry of the API mutation a task runs: [`audited`] holds it pending, and the
//! first transaction the mutation commits writes its row, so a change and its record land
//! together or not at all.

use super::schema::AuditLog as Audit;
use super::sql::insert_rows;
use sea_query::InsertStatement;
use shoal_common::types::now_ms;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// One mutation: who, what, on what, from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub actor: String,
    /// The API operation, e.g. `startWorkflow`.
    pub action: String,
    /// Method and path, e.g. `POST /api/v1/instances/7/stop`.
    pub target: String,
    pub project: Option<String>,
    pub address: String,
}

struct Pending {
    entry: Mutex<AuditEntry>,
    written: AtomicBool,
    /// The id of the row written, once it is.
    row: Mutex<Option<i64>>,
}

tokio::task_local! {
    static PENDING: Arc<Pending>;
}

/// Runs `mutation` with `entry` pending: the first transaction it commits writes the row
/// (result `ok`; [`super::Store::set_audit_result`] corrects it when the mutation fails after
/// all). Returns the output, the id of that row when one was written, and the entry as it
/// ended.
pub async fn audited<F: Future>(
    entry: AuditEntry,
    mutation: F,
) -> (F::Output, Option<i64>, AuditEntry) {
    let pending = Arc::new(Pending {
        entry: Mutex::new(entry),
        written: AtomicBool::new(false),
        row: Mutex::new(None),
    });
    let output = PENDING.scope(pending.clone(), mutation).await;
    let entry = pending.entry.lock().expect("audit entry lock").clone();
    let row = *pending.row.lock().expect("audit row lock");
    (output, row, entry)
}

/// Names the project of the mutation this task runs, when only its body tells (a project
/// being created).
pub fn audit_project(project: &str) {
    let _ = PENDING.try_with(|p| {
        p.entry.lock().expect("audit entry lock").project = Some(project.to_string());
    });
}

/// Adds what a mutation acted on to its target, when its path does not tell (the tasks a
/// batch completes): `POST /api/v1/external/complete (task instances 5, 6)`.
pub fn audit_detail(detail: &str) {
    let _ = PENDING.try_with(|p| {
        p.entry
            .lock()
            .expect("audit entry lock")
            .target
            .push_str(&format!(" ({detail})"));
    });
}

/// The columns of a row but its id, in [`AuditRow`]'s order.
pub(super) const FIELDS: [Audit; 7] = [
    Audit::At,
    Audit::Actor,
    Audit::Action,
    Audit::Target,
    Audit::Project,
    Audit::Address,
    Audit::Result,
];

pub(super) fn insert(entry: &AuditEntry, result: &str) -> InsertStatement {
    insert_rows(
        Audit::Table,
        FIELDS,
        [[
            now_ms().into(),
            entry.actor.as_str().into(),
            entry.action.as_str().into(),
            entry.target.as_str().into(),
            entry.project.clone().into(),
            entry.address.as_str().into(),
            result.into(),
        ]],
    )
}

/// The entry of the mutation this task runs, while its row is still to be written: the
/// commit that takes it writes the row ([`Claim::insert`]) before committing.
pub(super) fn claim() -> Option<Claim> {
    let pending = PENDING.try_with(Arc::clone).ok()?;
    if pending.written.swap(true, Ordering::AcqRel) {
        return None;
    }
    Some(Claim(pending))
}

/// The pending entry one commit writes.
pub(super) struct Claim(Arc<Pending>);

impl Claim {
    /// The insert of its row (result `ok`), returning the row's id.
    pub(super) fn insert(&self) -> InsertStatement {
        let entry = self.0.entry.lock().expect("audit entry lock").clone();
        let mut insert = insert(&entry, "ok");
        insert.returning_col(Audit::Id);
        insert
    }

    /// Records the id of the row written.
    pub(super) fn written(self, id: i64) {
        *self.0.row.lock().expect("audit row lock") = Some(id);
    }
}
