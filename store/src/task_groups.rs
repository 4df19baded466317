//! Task groups: N slots shared by every task that names the group, across workflows and
//! masters.
//!
//! An attempt holds a slot while its row is `submitted`, `dispatched` or `running` with
//! `task_group` set, and waits for one as `waiting_task_group`. So the write that ends
//! an attempt (success, failure, kill, pause, lost worker) is the one that frees its
//! slot, in the same transaction, and nothing can leak. Slots are handed out in the store:
//! under the group row's lock, the best waiters of the whole cluster (task-group priority,
//! then submit order) move to `submitted`, whichever master drives them; each master
//! then picks up those of its own.

use super::codec::parse;
use super::db::Tx;
use super::schema::{TaskGroup as Group, TaskInstance as Task};
use super::sql::insert_rows;
use super::{SlotGrants, Store, TaskGroup, TaskGroupUsage};
use sea_query::{Expr, ExprTrait, Func, LockType, Order, Query, SelectStatement};
use shoal_common::definition::name_problem;
use shoal_common::error::{Error, Result};
use shoal_common::types::{TaskState, now_ms};

/// A task group row's columns, in the order it is written and read.
const GROUP_COLUMNS: [Group; 4] = [
    Group::Name,
    Group::Slots,
    Group::Description,
    Group::CreatedAt,
];
use std::collections::{BTreeMap, HashMap};

/// States in which an attempt uses its group: holding a slot (the first three), or waiting.
const IN_GROUP: [TaskState; 4] = [
    TaskState::Submitted,
    TaskState::Dispatched,
    TaskState::Running,
    TaskState::WaitingTaskGroup,
];
const HOLDING: &[TaskState] = IN_GROUP.split_at(3).0;

/// The group's slot count.
fn slots_of(name: &str) -> SelectStatement {
    Query::select()
        .column(Group::Slots)
        .from(Group::Table)
        .and_where(Expr::col(Group::Name).eq(name))
        .to_owned()
}

/// How many attempts of the group are in one of `states`.
fn count_of(group: &str, states: &[TaskState]) -> SelectStatement {
    Query::select()
        .expr(Func::count(Expr::col(Task::Id)))
        .from(Task::Table)
        .and_where(Expr::col(Task::TaskGroup).eq(group))
        .and_where(Expr::col(Task::GroupState).is_in(states.iter().map(|s| s.as_str())))
        .to_owned()
}

/// The group's slot count, its row locked until commit (None: no such group).
async fn lock_group(tx: &mut Tx, name: &str) -> Result<Option<i32>> {
    let slots: Option<(i32,)> = tx
        .fetch_optional(slots_of(name).lock(LockType::Update))
        .await?;
    Ok(slots.map(|(n,)| n))
}

async fn count_attempts(tx: &mut Tx, group: &str, states: &[TaskState]) -> Result<i64> {
    let (n,): (i64,) = tx.fetch_one(&count_of(group, states)).await?;
    Ok(n)
}

/// Under the group row's lock, moves the best waiters of the whole cluster into the free
/// slots, conditioned on still waiting (an attempt cancelled meanwhile gets none).
async fn grant(tx: &mut Tx, group: &str) -> Result<()> {
    let Some(slots) = lock_group(tx, group).await? else {
        return Ok(());
    };
    let free = i64::from(slots) - count_attempts(tx, group, HOLDING).await?;
    if free <= 0 {
        return Ok(());
    }
    let best: Vec<(i64,)> = tx
        .fetch_all(
            Query::select()
                .column(Task::Id)
                .from(Task::Table)
                .and_where(Expr::col(Task::TaskGroup).eq(group))
                .and_where(Expr::col(Task::GroupState).eq(TaskState::WaitingTaskGroup.as_str()))
                .order_by(Task::TaskGroupPriority, Order::Desc)
                .order_by(Task::Id, Order::Asc)
                .limit(free.unsigned_abs()),
        )
        .await?;
    if best.is_empty() {
        return Ok(());
    }
    tx.execute(
        Query::update()
            .table(Task::Table)
            .value(Task::State, TaskState::Submitted.as_str())
            .value(Task::Message, Option::<String>::None)
            .and_where(Expr::col(Task::Id).is_in(best.into_iter().map(|(id,)| id)))
            .and_where(Expr::col(Task::State).eq(TaskState::WaitingTaskGroup.as_str())),
    )
    .await
}

fn valid_group(group: &TaskGroup) -> Result<()> {
    if let Some(problem) = name_problem(&group.name) {
        return Err(Error::Invalid(format!(
            "invalid task group name '{}': {problem}",
            group.name
        )));
    }
    if group.slots < 1 {
        return Err(Error::Invalid(format!(
            "task group '{}' needs at least 1 slot, not {}",
            group.name, group.slots
        )));
    }
    Ok(())
}

impl Store {
    pub async fn create_task_group(&self, group: &TaskGroup) -> Result<()> {
        valid_group(group)?;
        let mut tx = self.db.begin().await?;
        let insert = insert_rows(
            Group::Table,
            GROUP_COLUMNS,
            [[
                group.name.as_str().into(),
                group.slots.into(),
                group.description.as_str().into(),
                now_ms().into(),
            ]],
        );
        match tx.execute(&insert).await {
            Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                return Err(Error::Conflict(format!(
                    "task group '{}' exists already",
                    group.name
                )));
            }
            other => other?,
        }
        tx.commit().await
    }

    /// Every group with how many attempts hold and wait for its slots, by name.
    pub async fn list_task_groups(&self) -> Result<Vec<TaskGroupUsage>> {
        let groups: Vec<(String, i32, String, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(GROUP_COLUMNS)
                    .from(Group::Table)
                    .order_by(Group::Name, Order::Asc),
            )
            .await?;
        let counts: Vec<(Option<String>, String, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Task::TaskGroup, Task::GroupState])
                    .expr(Func::count(Expr::col(Task::Id)))
                    .from(Task::Table)
                    .and_where(Expr::col(Task::TaskGroup).is_not_null())
                    .and_where(
                        Expr::col(Task::GroupState).is_in(IN_GROUP.iter().map(|s| s.as_str())),
                    )
                    .group_by_columns([Task::TaskGroup, Task::GroupState]),
            )
            .await?;
        let mut usage: HashMap<String, (i64, i64)> = HashMap::new();
        for (group, state, n) in counts {
            let entry = usage.entry(group.unwrap_or_default()).or_default();
            if state == TaskState::WaitingTaskGroup.as_str() {
                entry.1 += n;
            } else {
                entry.0 += n;
            }
        }
        Ok(groups
            .into_iter()
            .map(|(name, slots, description, created_at)| {
                let (in_use, waiting) = usage.get(&name).copied().unwrap_or_default();
                TaskGroupUsage {
                    group: TaskGroup {
                        name,
                        slots,
                        description,
                    },
                    in_use,
                    waiting,
                    created_at,
                }
            })
            .collect())
    }

    /// Deletes a group that no attempt holds or waits for.
    pub async fn delete_task_group(&self, name: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        if lock_group(&mut tx, name).await?.is_none() {
            return Err(Error::NotFound(format!(
                "task group '{name}' does not exist"
            )));
        }
        let busy = count_attempts(&mut tx, name, &IN_GROUP).await?;
        if busy > 0 {
            return Err(Error::Conflict(format!(
                "task group '{name}' has {busy} task(s) running or waiting for a slot; delete it when they have ended"
            )));
        }
        tx.execute(
            Query::delete()
                .from_table(Group::Table)
                .and_where(Expr::col(Group::Name).eq(name)),
        )
        .await?;
        tx.commit().await
    }

    /// Which of `names` are not task groups.
    pub async fn missing_task_groups(&self, names: &[&str]) -> Result<Vec<String>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<(String,)> = self
            .db
            .fetch_all(
                Query::select()
                    .column(Group::Name)
                    .from(Group::Table)
                    .and_where(Expr::col(Group::Name).is_in(names.iter().copied())),
            )
            .await?;
        Ok(names
            .iter()
            .filter(|n| !found.iter().any(|(f,)| f == *n))
            .map(|n| n.to_string())
            .collect())
    }

    /// Hands the free slots of each group in `waiting` to the cluster's best waiters, then
    /// says which of `waiting` (attempt id, group) hold a slot now. One transaction per
    /// group with free slots, in name order, each under the group row's lock: concurrent
    /// masters hand out a group's slots one after another, never more than it has.
    pub async fn acquire_task_group_slots(&self, waiting: &[(i64, String)]) -> Result<SlotGrants> {
        let mut by_group: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (id, group) in waiting {
            by_group.entry(group.as_str()).or_default().push(*id);
        }
        let mut grants = SlotGrants::default();
        for (group, ids) in by_group {
            // Reads first: while the group is full, the usual case for a waiter, nothing
            // is written (and on SQLite the engine's writes are not held up).
            let slots: Option<(i32,)> = self.db.fetch_optional(&slots_of(group)).await?;
            let Some((slots,)) = slots else {
                grants
                    .no_group
                    .extend(ids.into_iter().map(|id| (id, group.to_string())));
                continue;
            };
            let in_use: Option<(i64,)> = self.db.fetch_optional(&count_of(group, HOLDING)).await?;
            if in_use.map_or(0, |(n,)| n) < i64::from(slots) {
                let mut tx = self.db.begin().await?;
                grant(&mut tx, group).await?;
                tx.commit().await?;
            }
            let holding: Vec<(i64, String)> = self
                .db
                .fetch_all(
                    Query::select()
                        .columns([Task::Id, Task::State])
                        .from(Task::Table)
                        .and_where(Expr::col(Task::Id).is_in(ids)),
                )
                .await?;
            for (id, state) in holding {
                let state: TaskState = parse(&format!("task_instance {id}"), &state)?;
                if state == TaskState::Submitted {
                    grants.granted.push(id);
                }
            }
        }
        grants.granted.sort_unstable();
        Ok(grants)
    }
}
