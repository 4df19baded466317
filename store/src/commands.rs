//! The command queue: the API writes commands, masters claim them and turn each into
//! exactly one workflow instance.

use super::codec::{from_json, parse, to_json};
use super::command_rows::{
    CommandRecord, ErrorCommandRow, insert_command_in, insert_error_commands, select_commands,
};
use super::db::{DEADLOCK_RETRIES, Tx, is_deadlock};
use super::definitions::{DefinitionLookup, load_definition};
use super::instance_rows::{
    INSTANCE_COLUMNS, InstanceRecord, TaskRecord, insert_instances, select_tasks,
};
use super::offline::is_offline;
use super::schema::TaskInstance as Task;
use super::schema::{Command as Cmd, ErrorCommand as ErrCmd, WorkflowInstance as Inst};
use super::serial;
use super::signal::{Signal, Written};
use super::{
    CancelRefused, ClaimedInstance, CommandStatus, InstanceRow, NewCommand, PendingCommand, Store,
};
use sea_query::{Cond, Expr, ExprTrait, LockBehavior, LockType, Order, Query};
use shoal_common::definition::WorkflowDef;
use shoal_common::error::{Error, Result};
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, Priority, WorkflowState, now_ms};
use std::collections::HashMap;
use std::collections::hash_map::Entry;

impl Store {
    /// Writes a command and wakes the masters.
    pub async fn insert_command(&self, cmd: &NewCommand) -> Result<i64> {
        let mut tx = self.db.begin().await?;
        let id = insert_command_in(&mut tx, cmd).await?;
        super::audit_object(&format!("command {id}"));
        tx.commit().await?;
        self.commands_written();
        Ok(id)
    }

    pub async fn command_status(&self, id: i64) -> Result<Option<CommandStatus>> {
        // In this order: a claim deletes the command and writes its instance or error row
        // in one transaction, so once the command is gone the outcome is visible.
        let pending: Option<(i64,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(Cmd::Id)
                    .from(Cmd::Table)
                    .and_where(Expr::col(Cmd::Id).eq(id)),
            )
            .await?;
        if pending.is_some() {
            return Ok(Some(CommandStatus::Pending));
        }
        let instance: Option<(i64,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(Inst::Id)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::CommandId).eq(id)),
            )
            .await?;
        if let Some((workflow_instance_id,)) = instance {
            return Ok(Some(CommandStatus::Done {
                workflow_instance_id,
            }));
        }
        let error: Option<(String,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(ErrCmd::Error)
                    .from(ErrCmd::Table)
                    .and_where(Expr::col(ErrCmd::Id).eq(id)),
            )
            .await?;
        Ok(error.map(|(error,)| CommandStatus::Error { error }))
    }

    /// The commands of `project` no master has claimed yet, those due soonest first
    /// (a command due at once counts as due when it was written).
    pub async fn pending_commands(&self, project: &str) -> Result<Vec<PendingCommand>> {
        let mut select = select_commands();
        select.and_where(Expr::col(Cmd::Project).eq(project));
        let records: Vec<CommandRecord> = self.db.fetch_all(&select).await?;
        let mut pending = records
            .into_iter()
            .map(|c| {
                let row = format!("command {}", c.id);
                Ok(PendingCommand {
                    id: c.id,
                    kind: parse(&row, &c.kind)?,
                    version: c.version,
                    params: from_json(&row, "params", &c.params)?,
                    priority: c.priority.as_deref().map(|p| parse(&row, p)).transpose()?,
                    options: from_json(&row, "options", &c.options)?,
                    workflow_instance_id: c.workflow_instance_id,
                    created_at: c.created_at,
                    due_at: c.due_at,
                    project: c.project,
                    workflow: c.workflow,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        pending.sort_by_key(|c| (c.due_at.unwrap_or(c.created_at), c.id));
        Ok(pending)
    }

    /// Cancels a command no master has claimed: it moves to the error-command table as
    /// cancelled (by `by`), so `command_status` says so, and never runs. Refused with
    /// what became of it when it was claimed (or cancelled) already.
    pub async fn cancel_command(
        &self,
        id: i64,
        by: &str,
    ) -> Result<std::result::Result<(), CancelRefused>> {
        let mut tx = self.db.begin().await?;
        // Waits for a master claiming it right now; then it is gone, and its instance shows.
        let command: Option<CommandRecord> = tx
            .fetch_optional(
                select_commands()
                    .and_where(Expr::col(Cmd::Id).eq(id))
                    .lock(LockType::Update),
            )
            .await?;
        let Some(command) = command else {
            drop(tx);
            return Ok(Err(match self.command_status(id).await? {
                Some(CommandStatus::Done {
                    workflow_instance_id,
                }) => CancelRefused::Started {
                    workflow_instance_id,
                },
                Some(CommandStatus::Error { error }) => CancelRefused::Ended { error },
                Some(CommandStatus::Pending) | None => CancelRefused::Missing,
            }));
        };
        let now = now_ms();
        let reason = format!("cancelled by {by} before it started");
        insert_error_commands(&mut tx, &[ErrorCommandRow::of(&command, &reason)], now).await?;
        tx.execute(
            Query::delete()
                .from_table(Cmd::Table)
                .and_where(Expr::col(Cmd::Id).eq(id)),
        )
        .await?;
        super::audit_object(&format!("command {id}"));
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// When the earliest command that is not due yet becomes due (ms), if any: a master
    /// sleeps until then rather than polling.
    pub async fn next_due_at(&self) -> Result<Option<i64>> {
        let next: Option<(Option<i64>,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .expr(Expr::col(Cmd::DueAt).min())
                    .from(Cmd::Table)
                    .and_where(Expr::col(Cmd::DueAt).gt(now_ms())),
            )
            .await?;
        Ok(next.and_then(|(at,)| at))
    }

    /// Wakes when commands were written (on Postgres over a connection of its own).
    pub async fn command_signal(&self) -> Result<Signal> {
        self.db.signal(Written::Commands).await
    }

    /// Claims up to `limit` commands and turns each into a running workflow instance owned
    /// by `owner` at `owner_epoch`, in one transaction that also deletes the claimed
    /// commands. A command whose definition version is gone moves to the error-command
    /// table with the reason; a start of a serial workflow may become a waiting or a
    /// discarded instance instead of a running one.
    pub async fn claim_commands(
        &self,
        owner: &str,
        owner_epoch: i64,
        limit: usize,
    ) -> Result<Vec<ClaimedInstance>> {
        Ok(self.claim_batch(owner, owner_epoch, limit).await?.0)
    }

    /// `claim_commands`, also saying how many commands the batch took (a caller drains
    /// the queue while batches come back full, whatever became of their commands).
    pub async fn claim_batch(
        &self,
        owner: &str,
        owner_epoch: i64,
        limit: usize,
    ) -> Result<(Vec<ClaimedInstance>, usize)> {
        let mut again = DEADLOCK_RETRIES;
        loop {
            match self.claim_batch_once(owner, owner_epoch, limit).await {
                Err(e) if again > 0 && is_deadlock(&e) => again -= 1,
                done => return done,
            }
        }
    }

    async fn claim_batch_once(
        &self,
        owner: &str,
        owner_epoch: i64,
        limit: usize,
    ) -> Result<(Vec<ClaimedInstance>, usize)> {
        if limit == 0 {
            return Ok((Vec::new(), 0));
        }
        let mut select = select_commands();
        select
            // A run at a later time waits until it is due.
            .cond_where(
                Cond::any()
                    .add(Expr::col(Cmd::DueAt).is_null())
                    .add(Expr::col(Cmd::DueAt).lte(now_ms())),
            )
            .order_by(Cmd::Id, Order::Asc)
            .limit(u64::try_from(limit).unwrap_or(u64::MAX))
            // FOR UPDATE SKIP LOCKED on Postgres: concurrent masters take disjoint batches.
            // The SQLite builder renders no lock clause; its write transaction is exclusive.
            .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);

        let mut tx = self.db.begin().await?;
        let commands: Vec<CommandRecord> = tx.fetch_all(&select).await?;
        if commands.is_empty() {
            return Ok((Vec::new(), 0));
        }

        let now = now_ms();
        let mut definitions: HashMap<(String, String, i32), DefinitionLookup> = HashMap::new();
        let mut accepted: Vec<(InstanceRow, WorkflowDef)> = Vec::new();
        let mut recovered: Vec<ClaimedInstance> = Vec::new();
        let mut serial_started: Vec<ClaimedInstance> = Vec::new();
        let mut rejected: Vec<(&CommandRecord, String)> = Vec::new();
        for command in &commands {
            let key = (
                command.project.clone(),
                command.workflow.clone(),
                command.version,
            );
            let definition = match definitions.entry(key) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) => {
                    let lookup = load_definition(
                        &mut tx,
                        &command.project,
                        &command.workflow,
                        command.version,
                    )
                    .await?;
                    entry.insert(lookup)
                }
            };
            // A run at a later time whose workflow went offline meanwhile is refused, as a
            // start of it would be then.
            let went_offline = command.workflow_instance_id.is_none()
                && command.due_at.is_some()
                && is_offline(&mut tx, &command.project, &command.workflow).await?;
            let outcome = match command.workflow_instance_id {
                _ if went_offline => Err(format!(
                    "workflow '{}/{}' was taken offline before this run became due: bring it \
                     online and start it again",
                    command.project, command.workflow
                )),
                Some(instance) => recover_instance(&mut tx, command, instance, definition, owner)
                    .await?
                    .map(|claimed| recovered.push(claimed)),
                None => match plan_instance(command, definition, owner, owner_epoch, now) {
                    Ok((row, def)) if def.execution_type.is_parallel() => {
                        accepted.push((row, def));
                        Ok(())
                    }
                    // One at a time, under the workflow's lock: each sees the one before.
                    Ok((row, def)) => {
                        serial_started.extend(serial::admit(&mut tx, row, def, now).await?);
                        Ok(())
                    }
                    Err(reason) => Err(reason),
                },
            };
            match outcome {
                Ok(()) => {}
                Err(reason) => {
                    tracing::warn!(command_id = command.id, %reason, "command rejected");
                    rejected.push((command, reason));
                }
            }
        }

        let rejected: Vec<ErrorCommandRow> = rejected
            .iter()
            .map(|(command, reason)| ErrorCommandRow::of(command, reason))
            .collect();
        insert_error_commands(&mut tx, &rejected, now).await?;

        let rows: Vec<&InstanceRow> = accepted.iter().map(|(row, _)| row).collect();
        let ids = insert_instances(&mut tx, &rows).await?;

        let claimed: Vec<i64> = commands.iter().map(|c| c.id).collect();
        for chunk in claimed.chunks(tx.rows_per_statement(1)) {
            tx.execute(
                Query::delete()
                    .from_table(Cmd::Table)
                    .and_where(Expr::col(Cmd::Id).is_in(chunk.iter().copied())),
            )
            .await?;
        }

        let claimed = accepted
            .into_iter()
            .map(|(mut instance, definition)| {
                instance.id = *ids.get(&instance.command_id).ok_or_else(|| {
                    Error::Corrupt(format!(
                        "no workflow_instance returned for command {}",
                        instance.command_id
                    ))
                })?;
                Ok(ClaimedInstance {
                    kind: CommandKind::Start,
                    instance,
                    definition,
                    tasks: Vec::new(),
                })
            })
            .chain(recovered.into_iter().chain(serial_started).map(Ok))
            .collect::<Result<Vec<_>>>()?;
        tx.commit().await?;
        Ok((claimed, commands.len()))
    }
}

/// The instance a command becomes (id not yet known), or why it cannot become one. Bad
/// stored text rejects the one command instead of failing the claim, which would wedge
/// the queue behind it.
fn plan_instance(
    command: &CommandRecord,
    definition: &DefinitionLookup,
    owner: &str,
    owner_epoch: i64,
    now: i64,
) -> std::result::Result<(InstanceRow, WorkflowDef), String> {
    let definition = definition.clone()?;
    let row = format!("command {}", command.id);
    let params: Params = from_json(&row, "params", &command.params).map_err(|e| e.to_string())?;
    let priority = match &command.priority {
        Some(text) => parse::<Priority>(&row, text).map_err(|e| e.to_string())?,
        None => definition.priority,
    };
    let options: StartOptions =
        from_json(&row, "options", &command.options).map_err(|e| e.to_string())?;
    let instance = InstanceRow {
        id: 0,
        command_id: command.id,
        project: command.project.clone(),
        workflow: command.workflow.clone(),
        version: command.version,
        state: WorkflowState::Running,
        priority,
        params,
        owner: Some(owner.to_string()),
        owner_epoch,
        run: 1,
        created_at: command.created_at,
        started_at: Some(now),
        ended_at: None,
        options,
        parent_task_id: command.parent_task_id,
        schedule_time: command.schedule_time,
        message: None,
    };
    Ok((instance, definition))
}

/// Takes over a finished or paused instance for a resume, rerun or resubmit-failed
/// command: the instance gets this command's id, a new owner epoch (fencing out whoever
/// drove it before) and, for a rerun, a new run. Returns why not if its state does not
/// allow the command.
async fn recover_instance(
    tx: &mut Tx,
    command: &CommandRecord,
    instance_id: i64,
    definition: &DefinitionLookup,
    owner: &str,
) -> Result<std::result::Result<ClaimedInstance, String>> {
    let Ok(definition) = definition.clone() else {
        return Ok(Err(definition.clone().err().unwrap_or_default()));
    };
    let kind: CommandKind = match parse(&format!("command {}", command.id), &command.kind) {
        Ok(kind) => kind,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let record: Option<InstanceRecord> = tx
        .fetch_optional(
            Query::select()
                .columns(INSTANCE_COLUMNS)
                .from(Inst::Table)
                .and_where(Expr::col(Inst::Id).eq(instance_id))
                .lock(LockType::Update),
        )
        .await?;
    let Some(record) = record else {
        return Ok(Err(format!(
            "workflow instance {instance_id} does not exist"
        )));
    };
    let mut instance = record.decode()?;
    if let Err(reason) = recovery_allowed(kind, instance.state) {
        return Ok(Err(format!(
            "workflow instance {instance_id} is {}: {reason}",
            instance.state
        )));
    }
    if !definition.execution_type.is_parallel()
        && let Some(other) = serial::other_active(tx, &instance).await?
    {
        return Ok(Err(format!(
            "workflow '{}' runs one instance at a time (execution type {}) and instance {other} \
             is active; try again when it has ended",
            instance.workflow, definition.execution_type
        )));
    }
    instance.command_id = command.id;
    instance.message = None;
    instance.state = WorkflowState::Running;
    instance.owner = Some(owner.to_string());
    instance.owner_epoch += 1;
    instance.ended_at = None;
    if kind == CommandKind::Rerun {
        instance.run += 1;
    }
    let asked: StartOptions = match from_json(
        &format!("command {}", command.id),
        "options",
        &command.options,
    ) {
        Ok(options) => options,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // Whose roles its starts of runs in other projects need from now on.
    instance.options.started_by = asked.started_by;
    // Which task a task rerun is about; any other recovery runs the instance as a whole.
    instance.options.rerun_task = if kind == CommandKind::RerunTask {
        match asked.rerun_task {
            Some(task) => Some(task),
            None => return Ok(Err("the command names no task to rerun".into())),
        }
    } else {
        None
    };
    tx.execute(
        Query::update()
            .table(Inst::Table)
            .value(Inst::Options, to_json(&instance.options)?)
            .value(Inst::CommandId, instance.command_id)
            .value(Inst::State, instance.state.as_str())
            .value(Inst::Owner, owner)
            .value(Inst::OwnerEpoch, instance.owner_epoch)
            .value(Inst::Run, instance.run)
            .value(Inst::EndedAt, Option::<i64>::None)
            .value(Inst::Message, Option::<String>::None)
            .and_where(Expr::col(Inst::Id).eq(instance_id)),
    )
    .await?;
    let tasks = if kind == CommandKind::Rerun {
        Vec::new()
    } else {
        let records: Vec<TaskRecord> = tx
            .fetch_all(
                select_tasks()
                    .and_where(Expr::col(Task::WorkflowInstanceId).eq(instance_id))
                    .and_where(Expr::col(Task::Run).eq(instance.run))
                    .order_by(Task::Id, Order::Asc),
            )
            .await?;
        records
            .into_iter()
            .map(TaskRecord::decode)
            .collect::<Result<Vec<_>>>()?
    };
    Ok(Ok(ClaimedInstance {
        kind,
        instance,
        definition,
        tasks,
    }))
}

/// Which instance states each recovery command applies to.
pub fn recovery_allowed(
    kind: CommandKind,
    state: WorkflowState,
) -> std::result::Result<(), &'static str> {
    use WorkflowState::*;
    let ok = match kind {
        CommandKind::Resume => state == Paused,
        CommandKind::ResubmitFailed => matches!(state, Failure | Stopped),
        CommandKind::Rerun => matches!(state, Success | Failure | Stopped | Paused),
        CommandKind::RerunTask => matches!(state, Success | Failure | Stopped),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(match kind {
        CommandKind::Resume => "only a paused instance can be resumed",
        CommandKind::ResubmitFailed => "only a failed or stopped instance can be resubmitted",
        CommandKind::Rerun => "only a finished instance can be rerun",
        CommandKind::RerunTask => {
            "a task can be rerun once its instance succeeded, failed or was stopped"
        }
        _ => "this command does not act on an existing instance",
    })
}
