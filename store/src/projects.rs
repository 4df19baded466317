//! Projects and their members.

use super::Store;
use super::backfills::Backfill;
use super::db::Tx;
use super::external::IDS_PER_READ;
use super::schema::{
    AppUser as User, Command, ErrorCommand, Project, ProjectMember as Member, TaskInstance as Task,
    WorkflowDefinition as Def, WorkflowInstance as Inst,
};
use super::sql::insert_rows;
use super::users::user_id;
use sea_query::{Expr, ExprTrait, Func, OnConflict, Order, Query, SelectStatement};
use shoal_common::access::Role;
use shoal_common::error::{Error, Result};
use shoal_common::types::now_ms;
use std::collections::HashMap;

/// A project row's columns, in the order it is written and read.
const PROJECT_COLUMNS: [Project; 4] = [
    Project::Name,
    Project::Description,
    Project::CreatedBy,
    Project::CreatedAt,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRow {
    pub name: String,
    pub description: String,
    pub created_by: String,
    pub created_at: i64,
    /// How many workflows it has.
    pub workflows: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub user: String,
    pub role: Role,
}

/// What a project-scoped object is found by, to learn its project.
#[derive(Debug, Clone, Copy)]
pub enum Owned {
    Instance(i64),
    TaskInstance(i64),
    Command(i64),
    Backfill(i64),
}

/// Creates `project` unless it exists (a workflow applied to a new project creates it).
pub(super) async fn ensure_project(tx: &mut Tx, project: &str, by: &str) -> Result<()> {
    let mut insert = insert_rows(
        Project::Table,
        [Project::Name, Project::CreatedBy, Project::CreatedAt],
        [[project.into(), by.into(), now_ms().into()]],
    );
    insert.on_conflict(
        OnConflict::column(Project::Name)
            .do_nothing_on([Project::Name])
            .to_owned(),
    );
    tx.execute(&insert).await
}

impl Store {
    /// Creates a project, made by `by`; `admin`, when given, becomes its first member, as
    /// admin.
    pub async fn create_project(
        &self,
        name: &str,
        description: &str,
        by: &str,
        admin: Option<&str>,
    ) -> Result<ProjectRow> {
        let mut tx = self.db.begin().await?;
        let insert = insert_rows(
            Project::Table,
            PROJECT_COLUMNS,
            [[name.into(), description.into(), by.into(), now_ms().into()]],
        );
        match tx.execute(&insert).await {
            Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                return Err(Error::Conflict(format!("project '{name}' exists already")));
            }
            other => other?,
        }
        if let Some(user) = admin {
            set_member(&mut tx, name, user, Role::Admin).await?;
        }
        tx.commit().await?;
        self.get_project(name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("project '{name}'")))
    }

    /// Every project with its workflow count, by name.
    pub async fn list_projects(&self) -> Result<Vec<ProjectRow>> {
        self.projects(None).await
    }

    /// Whether project `name` exists (one look-up by its key, for every request naming one).
    pub async fn project_exists(&self, name: &str) -> Result<bool> {
        let found: Option<(String,)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column(Project::Name)
                    .from(Project::Table)
                    .and_where(Expr::col(Project::Name).eq(name)),
            )
            .await?;
        Ok(found.is_some())
    }

    pub async fn get_project(&self, name: &str) -> Result<Option<ProjectRow>> {
        Ok(self.projects(Some(name)).await?.pop())
    }

    async fn projects(&self, name: Option<&str>) -> Result<Vec<ProjectRow>> {
        let workflows = Query::select()
            .expr(Func::count_distinct(Expr::col((Def::Table, Def::Name))))
            .from(Def::Table)
            .and_where(
                Expr::col((Def::Table, Def::Project)).equals((Project::Table, Project::Name)),
            )
            .to_owned();
        let rows: Vec<(String, String, String, i64, i64)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns(PROJECT_COLUMNS)
                    .expr(Expr::SubQuery(None, Box::new(workflows.into())))
                    .from(Project::Table)
                    .and_where_option(name.map(|n| Expr::col(Project::Name).eq(n)))
                    .order_by(Project::Name, Order::Asc),
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(name, description, created_by, created_at, workflows)| ProjectRow {
                    name,
                    description,
                    created_by,
                    created_at,
                    workflows,
                },
            )
            .collect())
    }

    /// Deletes a project that has no workflows, and with it everything of its runs:
    /// instances with their task rows, kept logs, callbacks and alerts, refused commands,
    /// backfills, trigger calls, secrets, environments and members (audit rows stay: they are the
    /// record of what was done). A project made later under the same name starts empty.
    /// Err(Conflict) while it has workflows, a run that has not ended, a command not
    /// claimed yet or a running backfill; Ok(false) when there is no such project.
    pub async fn delete_project(&self, name: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        tx.lock_key(&format!("project/{name}")).await?;
        refuse_if_in_use(&mut tx, name).await?;
        let runs = Query::select()
            .column(Inst::Id)
            .from(Inst::Table)
            .and_where(Expr::col(Inst::Project).eq(name))
            .to_owned();
        super::retention::delete_instances(&mut tx, runs).await?;
        super::backfills::delete_of_project(&mut tx, name).await?;
        tx.execute(
            Query::delete()
                .from_table(ErrorCommand::Table)
                .and_where(Expr::col(ErrorCommand::Project).eq(name)),
        )
        .await?;
        // Members, secrets, environments, trigger calls and kept events go by their
        // foreign keys.
        let deleted = tx
            .execute_counted(
                Query::delete()
                    .from_table(Project::Table)
                    .and_where(Expr::col(Project::Name).eq(name)),
            )
            .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// Members of `project`, by user name.
    pub async fn list_members(&self, project: &str) -> Result<Vec<MemberRow>> {
        let rows: Vec<(String, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .column((User::Table, User::Name))
                    .column((Member::Table, Member::Role))
                    .from(Member::Table)
                    .inner_join(
                        User::Table,
                        Expr::col((User::Table, User::Id)).equals((Member::Table, Member::UserId)),
                    )
                    .and_where(Expr::col((Member::Table, Member::Project)).eq(project))
                    .order_by((User::Table, User::Name), Order::Asc),
            )
            .await?;
        rows.into_iter()
            .map(|(user, role)| {
                let role = role
                    .parse()
                    .map_err(|e: String| Error::Corrupt(format!("member {project}/{user}: {e}")))?;
                Ok(MemberRow { user, role })
            })
            .collect()
    }

    /// Gives `user` `role` in `project` (replacing the role they had).
    pub async fn set_member(&self, project: &str, user: &str, role: Role) -> Result<()> {
        let mut tx = self.db.begin().await?;
        set_member(&mut tx, project, user, role).await?;
        tx.commit().await
    }

    /// Takes `user` out of `project`; false when they were not a member.
    pub async fn remove_member(&self, project: &str, user: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        let user_id = user_id(&mut tx, user).await?;
        let removed = tx
            .execute_counted(
                Query::delete()
                    .from_table(Member::Table)
                    .and_where(Expr::col(Member::Project).eq(project))
                    .and_where(Expr::col(Member::UserId).eq(user_id)),
            )
            .await?;
        tx.commit().await?;
        Ok(removed > 0)
    }

    /// The project an instance, task attempt, command or backfill belongs to; None when
    /// there is no such object.
    pub async fn project_of(&self, owned: Owned) -> Result<Option<String>> {
        let mut select = Query::select();
        match owned {
            Owned::Instance(id) => select
                .column(Inst::Project)
                .from(Inst::Table)
                .and_where(Expr::col(Inst::Id).eq(id)),
            Owned::TaskInstance(id) => {
                select = task_projects();
                select.and_where(Expr::col((Task::Table, Task::Id)).eq(id))
            }
            Owned::Command(id) => return self.project_of_command(id).await,
            Owned::Backfill(id) => select
                .column(Backfill::Project)
                .from(Backfill::Table)
                .and_where(Expr::col(Backfill::Id).eq(id)),
        };
        Ok(self
            .db
            .fetch_optional::<(String,)>(&select)
            .await?
            .map(|(p,)| p))
    }
}

impl Store {
    /// The projects of the task attempts among `ids`, by id (those that do not exist left
    /// out).
    pub async fn projects_of_tasks(&self, ids: &[i64]) -> Result<HashMap<i64, String>> {
        let mut found = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_READ) {
            let mut select = task_projects();
            select
                .column((Task::Table, Task::Id))
                .and_where(Expr::col((Task::Table, Task::Id)).is_in(chunk.iter().copied()));
            let rows: Vec<(String, i64)> = self.db.fetch_all(&select).await?;
            found.extend(rows.into_iter().map(|(project, id)| (id, project)));
        }
        Ok(found)
    }

    /// A command is pending, or claimed: then its instance or its error row has it.
    async fn project_of_command(&self, id: i64) -> Result<Option<String>> {
        let pending = Query::select()
            .column(Command::Project)
            .from(Command::Table)
            .and_where(Expr::col(Command::Id).eq(id))
            .to_owned();
        let started = Query::select()
            .column(Inst::Project)
            .from(Inst::Table)
            .and_where(Expr::col(Inst::CommandId).eq(id))
            .to_owned();
        let refused = Query::select()
            .column(ErrorCommand::Project)
            .from(ErrorCommand::Table)
            .and_where(Expr::col(ErrorCommand::Id).eq(id))
            .to_owned();
        // In this order: a claim deletes the command and writes the others in one transaction.
        for select in [pending, started, refused] {
            if let Some((project,)) = self.db.fetch_optional::<(String,)>(&select).await? {
                return Ok(Some(project));
            }
        }
        Ok(None)
    }
}

/// The project of task attempts: select from them, narrowed by the caller.
fn task_projects() -> SelectStatement {
    Query::select()
        .column((Inst::Table, Inst::Project))
        .from(Task::Table)
        .inner_join(
            Inst::Table,
            Expr::col((Inst::Table, Inst::Id)).equals((Task::Table, Task::WorkflowInstanceId)),
        )
        .to_owned()
}

/// Refuses, inside `tx`, to delete a project that still has workflows, or a run that has
/// not ended or is about to start.
async fn refuse_if_in_use(tx: &mut Tx, name: &str) -> Result<()> {
    let first = |select: &mut sea_query::SelectStatement| select.limit(1).to_owned();
    let workflow: Option<(String,)> = tx
        .fetch_optional(&first(
            Query::select()
                .column(Def::Name)
                .from(Def::Table)
                .and_where(Expr::col(Def::Project).eq(name)),
        ))
        .await?;
    if let Some((workflow,)) = workflow {
        return Err(Error::Conflict(format!(
            "project '{name}' still has workflows (e.g. '{workflow}'): only an empty project can be deleted"
        )));
    }
    let ended = super::lifecycle::ENDED.map(|s| s.as_str());
    let active: Option<(i64,)> = tx
        .fetch_optional(&first(
            Query::select()
                .column(Inst::Id)
                .from(Inst::Table)
                .and_where(Expr::col(Inst::Project).eq(name))
                .and_where(Expr::col(Inst::State).is_not_in(ended)),
        ))
        .await?;
    if let Some((id,)) = active {
        return Err(Error::Conflict(format!(
            "project '{name}' has a run that has not ended (instance {id}); stop it first"
        )));
    }
    let pending: Option<(i64,)> = tx
        .fetch_optional(&first(
            Query::select()
                .column(Command::Id)
                .from(Command::Table)
                .and_where(Expr::col(Command::Project).eq(name)),
        ))
        .await?;
    if let Some((id,)) = pending {
        return Err(Error::Conflict(format!(
            "project '{name}' has a run about to start (command {id}); wait for it and stop it"
        )));
    }
    Ok(())
}

async fn set_member(tx: &mut Tx, project: &str, user: &str, role: Role) -> Result<()> {
    let user_id = user_id(tx, user).await?;
    let mut insert = insert_rows(
        Member::Table,
        [Member::Project, Member::UserId, Member::Role],
        [[project.into(), user_id.into(), role.as_str().into()]],
    );
    insert.on_conflict(
        OnConflict::columns([Member::Project, Member::UserId])
            .update_column(Member::Role)
            .to_owned(),
    );
    match tx.execute(&insert).await {
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_foreign_key_violation() => {
            Err(Error::NotFound(format!("project '{project}'")))
        }
        other => other,
    }
}
