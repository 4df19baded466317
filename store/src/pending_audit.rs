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
    /// What it concerned (see [`audit_object`]).
    pub object: Option<String>,
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

/// Names what the mutation this task runs concerned, e.g. `workflow 'etl' version 3`,
/// `token 'ci' (id 7)`, `task instances 5, 6`: its row says what changed when its path
/// does not say it all. Called by a handler with what it knows, or by the store where it
/// makes the id or version, before the commit that writes the row (the last call wins).
/// Never with a secret's value. Outside an API mutation (a master's writes) it does
/// nothing.
pub fn audit_object(object: &str) {
    let _ = PENDING.try_with(|p| {
        p.entry.lock().expect("audit entry lock").object = Some(object.to_string());
    });
}

/// The columns of a row but its id, in [`AuditRow`]'s order.
pub(super) const FIELDS: [Audit; 8] = [
    Audit::At,
    Audit::Actor,
    Audit::Action,
    Audit::Target,
    Audit::Project,
    Audit::Object,
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
            entry.object.clone().into(),
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
