//! Users and their API tokens. A token is stored as its hash only ([`shoal_common::access`]).

use super::Store;
use super::db::Tx;
use super::schema::{ApiToken as Tok, AppUser as User, ProjectMember as Member};
use super::sql::{insert_rows, with_id};
use sea_query::{Expr, ExprTrait, Order, Query, SelectStatement};
use shoal_common::access::Role;
use shoal_common::error::{Error, Result};
use shoal_common::types::now_ms;

/// The user `shoal api-server` creates on a cluster's first start.
pub const BOOTSTRAP_ADMIN: &str = "admin";
/// Name of the token it gets then.
pub const BOOTSTRAP_TOKEN: &str = "bootstrap";
/// A token's last use is written at most this often (ms), so reads do not all write.
const LAST_USED_PRECISION_MS: i64 = 60_000;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserRow {
    pub id: i64,
    pub name: String,
    pub admin: bool,
    pub disabled: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub user: String,
    pub name: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// Who a valid token belongs to, with their project roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub user_id: i64,
    pub user: String,
    pub admin: bool,
    pub roles: Vec<(String, Role)>,
}

/// A user row's columns but the id, in the order [`insert_user`] writes them.
const USER_FIELDS: [User; 4] = [User::Name, User::Admin, User::Disabled, User::CreatedAt];

/// The columns a [`UserRow`] is read from.
const USER_COLUMNS: [User; 5] = with_id(User::Id, USER_FIELDS);

/// User `name`'s row.
fn select_user(name: &str) -> SelectStatement {
    Query::select()
        .columns(USER_COLUMNS)
        .from(User::Table)
        .and_where(Expr::col(User::Name).eq(name))
        .to_owned()
}

async fn insert_user(tx: &mut Tx, name: &str, admin: bool) -> Result<UserRow> {
    let mut insert = insert_rows(
        User::Table,
        USER_FIELDS,
        [[name.into(), admin.into(), false.into(), now_ms().into()]],
    );
    insert.returning_col(User::Id);
    match tx.insert_id(&insert).await {
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
            Err(Error::Conflict(format!("user '{name}' exists already")))
        }
        Err(e) => Err(e),
        // Read back (MySQL returns only the id).
        Ok(_) => tx.fetch_one(&select_user(name)).await,
    }
}

async fn insert_token(
    tx: &mut Tx,
    user_id: i64,
    name: &str,
    hash: &str,
    expires_at: Option<i64>,
) -> Result<i64> {
    let mut insert = insert_rows(
        Tok::Table,
        [
            Tok::UserId,
            Tok::Name,
            Tok::Hash,
            Tok::CreatedAt,
            Tok::ExpiresAt,
        ],
        [[
            user_id.into(),
            name.into(),
            hash.into(),
            now_ms().into(),
            expires_at.into(),
        ]],
    );
    insert.returning_col(Tok::Id);
    match tx.insert_id(&insert).await {
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => Err(
            Error::Conflict(format!("the user has a token named '{name}' already")),
        ),
        other => other,
    }
}

/// The id of user `user`; NotFound when there is none.
pub(super) async fn user_id(tx: &mut Tx, user: &str) -> Result<i64> {
    let id: Option<(i64,)> = tx
        .fetch_optional(
            Query::select()
                .column(User::Id)
                .from(User::Table)
                .and_where(Expr::col(User::Name).eq(user)),
        )
        .await?;
    id.map(|(id,)| id)
        .ok_or_else(|| Error::NotFound(format!("user '{user}'")))
}

/// A token as an audit row names it: by its name and id, never its value.
fn token_object(name: &str, id: i64) -> String {
    format!("token '{name}' (id {id})")
}

impl Store {
    /// On a store without users: creates the global admin [`BOOTSTRAP_ADMIN`] with a token
    /// of hash `hash`, and returns true. With users already, changes nothing.
    pub async fn bootstrap_admin(&self, hash: &str) -> Result<bool> {
        let mut tx = self.db.begin().await?;
        // Two api-servers starting at once: one creates, the other sees the user.
        tx.lock_key("bootstrap_admin").await?;
        let any: Option<(i64,)> = tx
            .fetch_optional(Query::select().column(User::Id).from(User::Table).limit(1))
            .await?;
        if any.is_some() {
            return Ok(false);
        }
        let admin = insert_user(&mut tx, BOOTSTRAP_ADMIN, true).await?;
        insert_token(&mut tx, admin.id, BOOTSTRAP_TOKEN, hash, None).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn create_user(&self, name: &str, admin: bool) -> Result<UserRow> {
        let mut tx = self.db.begin().await?;
        let user = insert_user(&mut tx, name, admin).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Every user, by name.
    pub async fn list_users(&self) -> Result<Vec<UserRow>> {
        self.db
            .fetch_all(
                Query::select()
                    .columns(USER_COLUMNS)
                    .from(User::Table)
                    .order_by(User::Name, Order::Asc),
            )
            .await
    }

    pub async fn get_user(&self, name: &str) -> Result<Option<UserRow>> {
        self.db
            .fetch_optional(
                Query::select()
                    .columns(USER_COLUMNS)
                    .from(User::Table)
                    .and_where(Expr::col(User::Name).eq(name)),
            )
            .await
    }

    /// Disables (or enables again) a user: a disabled user's tokens are refused. Returns
    /// the user, None when there is none of that name.
    pub async fn set_user_disabled(&self, name: &str, disabled: bool) -> Result<Option<UserRow>> {
        let mut tx = self.db.begin().await?;
        let user: Option<UserRow> = tx
            .update_returning(
                Query::update()
                    .table(User::Table)
                    .value(User::Disabled, disabled)
                    .and_where(Expr::col(User::Name).eq(name))
                    .returning(Query::returning().columns(USER_COLUMNS)),
                &select_user(name),
            )
            .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Stores a token of `user` (by its hash); returns its id.
    pub async fn create_token(
        &self,
        user: &str,
        name: &str,
        hash: &str,
        expires_at: Option<i64>,
    ) -> Result<i64> {
        let mut tx = self.db.begin().await?;
        let user_id = user_id(&mut tx, user).await?;
        let id = insert_token(&mut tx, user_id, name, hash, expires_at).await?;
        super::audit_object(&token_object(name, id));
        tx.commit().await?;
        Ok(id)
    }

    /// Tokens (revoked ones too), of one user or of all, newest first.
    pub async fn list_tokens(&self, user: Option<&str>) -> Result<Vec<TokenRow>> {
        self.db
            .fetch_all(
                Query::select()
                    .column((Tok::Table, Tok::Id))
                    .expr_as(Expr::col((User::Table, User::Name)), "user")
                    .column((Tok::Table, Tok::Name))
                    .column((Tok::Table, Tok::CreatedAt))
                    .columns([Tok::ExpiresAt, Tok::LastUsedAt, Tok::RevokedAt])
                    .from(Tok::Table)
                    .inner_join(
                        User::Table,
                        Expr::col((User::Table, User::Id)).equals((Tok::Table, Tok::UserId)),
                    )
                    .and_where_option(user.map(|u| Expr::col((User::Table, User::Name)).eq(u)))
                    .order_by((Tok::Table, Tok::Id), Order::Desc),
            )
            .await
    }

    /// Revokes token `id` (of user `user` only, when given). Returns the token as it is
    /// now, None when there is no such token.
    pub async fn revoke_token(&self, id: i64, user: Option<&str>) -> Result<Option<TokenRow>> {
        let Some(token) = self
            .list_tokens(user)
            .await?
            .into_iter()
            .find(|t| t.id == id)
        else {
            return Ok(None);
        };
        super::audit_object(&token_object(&token.name, id));
        let mut tx = self.db.begin().await?;
        let now = now_ms();
        tx.execute(
            Query::update()
                .table(Tok::Table)
                .value(Tok::RevokedAt, now)
                .and_where(Expr::col(Tok::Id).eq(id))
                .and_where(Expr::col(Tok::RevokedAt).is_null()),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(TokenRow {
            revoked_at: token.revoked_at.or(Some(now)),
            ..token
        }))
    }

    /// The owner of the token with hash `hash`, if it is valid now: not revoked, not
    /// expired, its user not disabled. Notes the token's use (at most once a minute).
    pub async fn token_owner(&self, hash: &str) -> Result<Option<TokenOwner>> {
        let now = now_ms();
        let found: Option<(i64, Option<i64>, i64, String, bool)> = self
            .db
            .fetch_optional(
                Query::select()
                    .column((Tok::Table, Tok::Id))
                    .column(Tok::LastUsedAt)
                    .column((User::Table, User::Id))
                    .column((User::Table, User::Name))
                    .column(User::Admin)
                    .from(Tok::Table)
                    .inner_join(
                        User::Table,
                        Expr::col((User::Table, User::Id)).equals((Tok::Table, Tok::UserId)),
                    )
                    .and_where(Expr::col(Tok::Hash).eq(hash))
                    .and_where(Expr::col(Tok::RevokedAt).is_null())
                    .and_where(
                        Expr::col(Tok::ExpiresAt)
                            .is_null()
                            .or(Expr::col(Tok::ExpiresAt).gt(now)),
                    )
                    .and_where(Expr::col(User::Disabled).eq(false)),
            )
            .await?;
        let Some((token_id, last_used, user_id, user, admin)) = found else {
            return Ok(None);
        };
        if last_used.is_none_or(|t| now - t >= LAST_USED_PRECISION_MS) {
            let mut tx = self.db.begin().await?;
            tx.execute(
                Query::update()
                    .table(Tok::Table)
                    .value(Tok::LastUsedAt, now)
                    .and_where(Expr::col(Tok::Id).eq(token_id)),
            )
            .await?;
            tx.commit().await?;
        }
        let roles = self.roles_of(user_id).await?;
        Ok(Some(TokenOwner {
            user_id,
            user,
            admin,
            roles,
        }))
    }

    /// The projects `user_id` is a member of, with the role.
    async fn roles_of(&self, user_id: i64) -> Result<Vec<(String, Role)>> {
        let rows: Vec<(String, String)> = self
            .db
            .fetch_all(
                Query::select()
                    .columns([Member::Project, Member::Role])
                    .from(Member::Table)
                    .and_where(Expr::col(Member::UserId).eq(user_id)),
            )
            .await?;
        rows.into_iter()
            .map(|(project, role)| {
                let role = role.parse().map_err(|e: String| {
                    Error::Corrupt(format!("project_member {project}/{user_id}: {e}"))
                })?;
                Ok((project, role))
            })
            .collect()
    }
}

/// Whether user `id` may start runs in `project` now (the operator role, or global
/// admin): the reason, naming them, the project and the role, when they may not.
pub(super) async fn may_start(
    tx: &mut Tx,
    id: i64,
    project: &str,
) -> Result<std::result::Result<(), String>> {
    let row: Option<(String, bool, bool, Option<String>)> = tx
        .fetch_optional(
            Query::select()
                .columns([
                    (User::Table, User::Name),
                    (User::Table, User::Admin),
                    (User::Table, User::Disabled),
                ])
                .column((Member::Table, Member::Role))
                .from(User::Table)
                .left_join(
                    Member::Table,
                    Expr::col((Member::Table, Member::UserId))
                        .equals((User::Table, User::Id))
                        .and(Expr::col((Member::Table, Member::Project)).eq(project)),
                )
                .and_where(Expr::col((User::Table, User::Id)).eq(id)),
        )
        .await?;
    let Some((name, admin, disabled, role)) = row else {
        return Ok(Err(format!(
            "the user who started it (id {id}) no longer exists"
        )));
    };
    let role = role
        .map(|r| r.parse::<Role>().map_err(Error::Corrupt))
        .transpose()?;
    Ok(match role {
        _ if disabled => Err(format!("user '{name}' who started it is disabled")),
        _ if admin => Ok(()),
        Some(role) if role >= Role::Operator => Ok(()),
        has => Err(format!(
            "user '{name}' who started it needs the operator role in project '{project}' \
             (has {}); a project admin can grant it",
            has.map_or("none".to_string(), |r| r.to_string())
        )),
    })
}
