//! Webhook trigger calls: the start command a call writes, its idempotency key, and the
//! progress of the run a caller waits for.

use super::Store;
use super::codec::{parse, to_json};
use super::command_rows::{insert_command_statement, notify_masters};
use super::definitions::{decode_spec, is_latest_version};
use super::schema::{TriggerCall as Call, WorkflowDefinition as Def, WorkflowInstance as Inst};
use super::sql::insert_rows;
use super::{CommandStatus, NewCommand};
use sea_query::{Alias, Expr, ExprTrait, Order, Query};
use shoal_common::access::token_hash;
use shoal_common::error::{Error, Result};
use shoal_common::trigger::TriggerDef;
use shoal_common::types::{WorkflowState, now_ms};

/// The idempotency key a call carried, and the trigger it called.
#[derive(Debug, Clone, Copy)]
pub struct CallKey<'a> {
    pub trigger: &'a str,
    pub key: &'a str,
}

/// The run a trigger call started (or, for a repeated key, the one a call before started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggeredRun {
    pub command_id: i64,
    /// Known once a master claimed the command.
    pub workflow_instance_id: Option<i64>,
    /// Whether the key was seen before (nothing new was started).
    pub replayed: bool,
}

/// Where the run of a trigger call is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunProgress {
    /// No master claimed the command yet.
    Pending,
    /// The command could not become an instance; why.
    Rejected(String),
    /// The instance, and its state.
    Instance(i64, WorkflowState),
    /// The instance it became was deleted since.
    Deleted(i64),
}

impl Store {
    /// Writes the start command of a trigger call. With a key, the command and the key's
    /// row are one transaction, and a key seen before returns the run it started instead
    /// (refused when that call's parameters differ: it is another payload, not a retry).
    pub async fn start_triggered(
        &self,
        cmd: &NewCommand,
        key: Option<CallKey<'_>>,
    ) -> Result<TriggeredRun> {
        let now = now_ms();
        let mut tx = self.db.begin().await?;
        let params_hash = token_hash(&to_json(&cmd.params)?);
        if let Some(k) = key {
            // Two calls with one key at once: the second waits here, then sees the first.
            tx.lock_key(&format!(
                "trigger_call/{}/{}/{}/{}",
                cmd.project, cmd.workflow, k.trigger, k.key
            ))
            .await?;
            let seen: Option<(i64, Option<i64>, String)> = tx
                .fetch_optional(
                    Query::select()
                        .columns([Call::CommandId, Call::WorkflowInstanceId, Call::ParamsHash])
                        .from(Call::Table)
                        .and_where(Expr::col(Call::Project).eq(cmd.project.as_str()))
                        .and_where(Expr::col(Call::Workflow).eq(cmd.workflow.as_str()))
                        .and_where(Expr::col(Call::TriggerName).eq(k.trigger))
                        .and_where(Expr::col(Call::IdempotencyKey).eq(k.key)),
                )
                .await?;
            if let Some((command_id, workflow_instance_id, hash)) = seen {
                if hash != params_hash {
                    return Err(Error::Conflict(format!(
                        "Idempotency-Key '{}' of trigger '{}' was first sent with other parameters \
                         (command {command_id}); send a new key for a new payload",
                        k.key, k.trigger
                    )));
                }
                // Commits nothing but the audit row of the call.
                tx.commit().await?;
                return Ok(TriggeredRun {
                    command_id,
                    workflow_instance_id,
                    replayed: true,
                });
            }
        }
        let command_id = tx.insert_id(&insert_command_statement(cmd, now)?).await?;
        if let Some(k) = key {
            tx.execute(&insert_rows(
                Call::Table,
                [
                    Call::Project,
                    Call::Workflow,
                    Call::TriggerName,
                    Call::IdempotencyKey,
                    Call::ParamsHash,
                    Call::CommandId,
                    Call::CreatedAt,
                ],
                [[
                    cmd.project.as_str().into(),
                    cmd.workflow.as_str().into(),
                    k.trigger.into(),
                    k.key.into(),
                    params_hash.into(),
                    command_id.into(),
                    now.into(),
                ]],
            ))
            .await?;
        }
        notify_masters(&mut tx).await?;
        tx.commit().await?;
        self.commands_written();
        Ok(TriggeredRun {
            command_id,
            workflow_instance_id: None,
            replayed: false,
        })
    }

    /// Notes the instance a keyed call's command became, so a repeated call finds it even
    /// after a rerun re-pointed the instance to another command.
    pub async fn remember_triggered_instance(
        &self,
        project: &str,
        workflow: &str,
        key: CallKey<'_>,
        instance: i64,
    ) -> Result<()> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            Query::update()
                .table(Call::Table)
                .value(Call::WorkflowInstanceId, instance)
                .and_where(Expr::col(Call::Project).eq(project))
                .and_where(Expr::col(Call::Workflow).eq(workflow))
                .and_where(Expr::col(Call::TriggerName).eq(key.trigger))
                .and_where(Expr::col(Call::IdempotencyKey).eq(key.key))
                .and_where(Expr::col(Call::WorkflowInstanceId).is_null()),
        )
        .await?;
        tx.commit().await
    }

    /// Where the run of `command_id` is; `instance` when already known (one cheap read).
    pub async fn run_progress(
        &self,
        command_id: i64,
        instance: Option<i64>,
    ) -> Result<RunProgress> {
        let id = match instance {
            Some(id) => id,
            None => match self.command_status(command_id).await? {
                Some(CommandStatus::Done {
                    workflow_instance_id,
                }) => workflow_instance_id,
                Some(CommandStatus::Error { error }) => return Ok(RunProgress::Rejected(error)),
                // Gone without a trace only when a rerun already re-pointed its instance:
                // like a run not started yet, the caller's wait ends at its timeout.
                Some(CommandStatus::Pending) | None => return Ok(RunProgress::Pending),
            },
        };
        let state: Option<(String,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(Inst::State)
                    .from(Inst::Table)
                    .and_where(Expr::col(Inst::Id).eq(id)),
            )
            .await?;
        let Some((state,)) = state else {
            return Ok(RunProgress::Deleted(id));
        };
        let state = parse(&format!("workflow_instance {id}"), &state)?;
        Ok(RunProgress::Instance(id, state))
    }

    /// The triggers of the latest version of every workflow of `project`, by workflow name.
    pub async fn project_triggers(&self, project: &str) -> Result<Vec<(String, Vec<TriggerDef>)>> {
        let d = Alias::new("d");
        let rows: Vec<(String, i32, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Def::Name, Def::Version, Def::Spec])
                    .from_as(Def::Table, d.clone())
                    .and_where(Expr::col((d.clone(), Def::Project)).eq(project))
                    .and_where(is_latest_version(d.clone()))
                    // Only definitions with triggers carry the key (it is skipped when
                    // empty), so the others are not decoded.
                    .and_where(Expr::col((d, Def::Spec)).like("%\"triggers\":%"))
                    .order_by(Def::Name, Order::Asc),
            )
            .await?;
        let mut found = Vec::new();
        for (name, version, spec) in rows {
            let def = decode_spec(project, &name, version, &spec)?;
            if !def.triggers.is_empty() {
                found.push((name, def.triggers));
            }
        }
        Ok(found)
    }
}
