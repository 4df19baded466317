//! Who is calling and what they may do. With auth on, every request under `/api/v1` (and
//! `GET /metrics`) carries `Authorization: Bearer <token>` of a user, except the liveness
//! probe, the OpenAPI document, the session check and webhook trigger calls (which carry
//! the trigger's own credential, checked by [`crate::hooks`]); each operation needs the
//! role its [`policy::rule`] names. Every mutation is audited: in the transaction of its
//! change, or, when it committed nothing (refused, or a no-op), right after.

pub(crate) mod audit;
pub(crate) mod policy;
pub(crate) mod tokens;
pub(crate) mod users;

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, OriginalUri, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use policy::{Need, Scope};
use serde::Serialize;
use shoal_common::access::{Role, token_hash};
use shoal_store::{AuditEntry, TokenOwner, audited};
use std::collections::{BTreeMap, HashMap};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

/// How the API authenticates its callers.
#[derive(Clone, Debug, Default)]
pub enum Auth {
    /// No tokens: every caller is an anonymous global admin (standalone on loopback).
    #[default]
    Off,
    /// Callers carry a user's API token. `admin_token` (SHOAL_TOKEN), when set, is accepted
    /// too, as a global admin: the operator's way in before any user exists, or back in.
    Tokens { admin_token: Option<String> },
}

impl Auth {
    /// Tokens on, with `admin_token` (None or empty: only users' tokens).
    pub fn tokens(admin_token: Option<String>) -> Auth {
        Auth::Tokens {
            admin_token: admin_token.filter(|t| !t.is_empty()),
        }
    }

    pub fn is_on(&self) -> bool {
        matches!(self, Auth::Tokens { .. })
    }
}

/// Name the holder of `SHOAL_TOKEN` is audited as.
const ADMIN_TOKEN_ACTOR: &str = "SHOAL_TOKEN";

/// The caller of a request, as the guard found them; handlers that list across projects
/// or act on a user's own things read it (`Extension<Caller>`).
#[derive(Clone, Debug)]
pub struct Caller {
    pub name: String,
    /// None for the anonymous caller (auth off) and for the holder of SHOAL_TOKEN.
    pub user_id: Option<i64>,
    pub admin: bool,
    roles: HashMap<String, Role>,
}

impl Caller {
    fn global_admin(name: &str) -> Caller {
        Caller {
            name: name.to_string(),
            user_id: None,
            admin: true,
            roles: HashMap::new(),
        }
    }

    fn user(owner: TokenOwner) -> Caller {
        Caller {
            name: owner.user,
            user_id: Some(owner.user_id),
            admin: owner.admin,
            roles: owner.roles.into_iter().collect(),
        }
    }

    /// Their role in `project` (a global admin is admin everywhere).
    pub fn role_in(&self, project: &str) -> Option<Role> {
        if self.admin {
            Some(Role::Admin)
        } else {
            self.roles.get(project).copied()
        }
    }

    /// Notes a role they were just given (the project they created).
    pub fn grant(&mut self, project: &str, role: Role) {
        self.roles.insert(project.to_string(), role);
    }

    /// The projects they may see; None: all of them. A worker sees none.
    pub fn visible_projects(&self) -> Option<Vec<String>> {
        (!self.admin).then(|| self.projects_where(|r| r >= Role::Viewer))
    }

    /// The projects whose external tasks they may work on; None: all of them.
    pub fn external_projects(&self) -> Option<Vec<String>> {
        (!self.admin).then(|| self.projects_where(Role::works_external_tasks))
    }

    fn projects_where(&self, allowed: impl Fn(Role) -> bool) -> Vec<String> {
        let roles = self.roles.iter().filter(|(_, r)| allowed(**r));
        roles.map(|(p, _)| p.clone()).collect()
    }

    /// 403 unless they may see `project`.
    pub fn check_visible(&self, project: &str) -> Result<()> {
        self.check(project, Role::Viewer)
    }

    /// 403 unless they have at least `role` in `project`; `Worker` asks for a role that
    /// works on external tasks (worker, or operator and up: not viewer).
    pub fn check(&self, project: &str, role: Role) -> Result<()> {
        let enough = |has: Role| match role {
            Role::Worker => has.works_external_tasks(),
            _ => has >= role,
        };
        match self.role_in(project) {
            Some(has) if enough(has) => Ok(()),
            has => Err(Error::Forbidden(format!(
                "user '{}' needs the {role} role in project '{project}' (has {}); a project admin can grant it",
                self.name,
                has.map_or("none".to_string(), |r| r.to_string())
            ))),
        }
    }

    /// 403 unless they are a global admin.
    pub fn check_admin(&self) -> Result<()> {
        if self.admin {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "user '{}' is not a global admin, which this needs",
                self.name
            )))
        }
    }
}

/// The bearer token a request carries (the scheme's name is case-insensitive, RFC 7235).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Who carries `headers`: 401 when auth is on and they carry no valid token.
async fn authenticate(ctx: &Ctx, headers: &HeaderMap) -> Result<Caller> {
    if !ctx.auth.is_on() {
        return Ok(Caller::global_admin("anonymous"));
    }
    let token = bearer(headers).ok_or(Error::Unauthorized)?;
    token_caller(ctx, token).await
}

/// Who holds `token`: 401 when it is no one's (auth on; with auth off, anyone is the
/// anonymous admin). Pages a browser loads without the web UI (forms) take the token as
/// an HTTP Basic password, since a browser sends nothing else by itself.
pub(crate) async fn token_caller(ctx: &Ctx, token: &str) -> Result<Caller> {
    let Auth::Tokens { admin_token } = &*ctx.auth else {
        return Ok(Caller::global_admin("anonymous"));
    };
    if admin_token
        .as_deref()
        .is_some_and(|t| t.as_bytes().ct_eq(token.as_bytes()).into())
    {
        return Ok(Caller::global_admin(ADMIN_TOKEN_ACTOR));
    }
    match ctx.store.token_owner(&token_hash(token)).await? {
        Some(owner) => Ok(Caller::user(owner)),
        None => Err(Error::Unauthorized),
    }
}

/// Marks a successful answer to a mutation that changed nothing (an external worker's
/// poll that took no task): it is not audited.
#[derive(Clone, Copy, Debug)]
pub struct Unchanged;

/// Why the guard refused a request: what the caller is told, and, when that hides the
/// reason, what the audit row records instead.
struct Refusal {
    error: Error,
    audit: Option<String>,
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Refusal {
        Refusal { error, audit: None }
    }
}

/// The `{id}` of a request and the project of the object it names (None: there is none).
async fn project_of_id(
    ctx: &Ctx,
    params: &RawPathParams,
    scope: Scope,
) -> Result<(i64, Option<String>)> {
    let raw = params
        .iter()
        .find(|(k, _)| *k == "id")
        .map_or("", |(_, v)| v);
    let id = raw.parse::<i64>().map_err(|_| {
        Error::BadRequest(format!(
            "'{raw}' is not a {} id: use a number",
            scope.noun()
        ))
    })?;
    match scope.owned(id) {
        Some(owned) => Ok((id, ctx.store.project_of(owned).await?)),
        None => Ok((id, None)),
    }
}

/// Whether `caller` may call operation `op` (None, or one the policy does not know: for
/// global admins only), and the project the request is about.
///
/// An object an `{id}` names that does not exist is 404 for everyone, decided here before
/// its handler runs, and so is one in a project the caller may not even view (a 403 would
/// tell them which project the id belongs to). Ids are never reused and an object's
/// project never changes, so the handler acts on the object checked here.
///
/// A `{project}` that does not exist is 404 too, but only once the caller passed the
/// role check: one without a role in it is refused with the same 403 whether it exists
/// or not, so a 404 tells nothing to whom may not see the project (only global admins
/// can be allowed into a project that does not exist).
async fn authorize(
    ctx: &Ctx,
    caller: &Caller,
    op: Option<&str>,
    params: &RawPathParams,
) -> (Option<String>, std::result::Result<(), Refusal>) {
    let (role, project) = match op.and_then(policy::rule) {
        Some(Need::Open | Need::SignedIn) => return (None, Ok(())),
        None | Some(Need::GlobalAdmin) => return (None, caller.check_admin().map_err(Into::into)),
        Some(Need::Project(role, Scope::Path)) => {
            let project = params.iter().find(|(k, _)| *k == "project");
            (role, project.map(|(_, v)| v.to_string()))
        }
        Some(Need::Project(role, scope)) => {
            let (id, project) = match project_of_id(ctx, params, scope).await {
                Ok(found) => found,
                Err(e) => return (None, Err(e.into())),
            };
            let missing = || Error::NotFound(format!("{} {id} does not exist", scope.noun()));
            match project {
                None => return (None, Err(missing().into())),
                Some(project) if caller.role_in(&project).is_none() => {
                    let audit = format!(
                        "404: hidden: {} {id} is in project '{project}', where user '{}' has no role",
                        scope.noun(),
                        caller.name
                    );
                    let refusal = Refusal {
                        error: missing(),
                        audit: Some(audit),
                    };
                    return (Some(project), Err(refusal));
                }
                project => (role, project),
            }
        }
    };
    let Some(project) = project else {
        // A route of this scope without its parameter: a policy mistake, refused.
        return (None, caller.check_admin().map_err(Into::into));
    };
    if let Err(refused) = caller.check(&project, role) {
        return (Some(project), Err(refused.into()));
    }
    let exists = if op.is_some_and(policy::needs_existing_project) {
        ctx.store.project_exists(&project).await
    } else {
        Ok(true)
    };
    let checked = match exists {
        Ok(true) => Ok(()),
        Ok(false) => Err(crate::projects::no_such_project(&project).into()),
        Err(e) => Err(Error::from(e).into()),
    };
    (Some(project), checked)
}

/// The middleware in front of every route: authenticates, authorizes and audits.
pub async fn guard(State(ctx): State<Ctx>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let op = req
        .extensions()
        .get::<MatchedPath>()
        .and_then(|p| {
            ctx.operations
                .get(&(method.clone(), p.as_str().to_string()))
        })
        .cloned();
    let need = op.as_deref().and_then(policy::rule);
    if need == Some(Need::Open) {
        return next.run(req).await;
    }
    let caller = match authenticate(&ctx, req.headers()).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let (mut parts, body) = req.into_parts();
    let params = match RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(params) => params,
        Err(e) => return Error::BadRequest(e.body_text()).into_response(),
    };
    let (project, verdict) = authorize(&ctx, &caller, op.as_deref(), &params).await;
    parts.extensions.insert(caller.clone());
    let mutation = !matches!(method, Method::GET | Method::HEAD)
        && op.as_deref().is_none_or(|op| !policy::is_read(op));
    let req = Request::from_parts(parts, body);
    let entry = AuditEntry {
        actor: caller.name,
        action: op.unwrap_or_else(|| "unknown".into()),
        target: format!("{method} {}", original_path(&req)),
        project,
        object: None,
        address: caller_address(&ctx, &req),
    };
    match verdict {
        Ok(()) if mutation => audit(&ctx, entry, next.run(req)).await,
        Ok(()) => next.run(req).await,
        Err(refusal) if mutation => refused(&ctx, entry, refusal).await,
        Err(refusal) => refusal.error.into_response(),
    }
}

/// The caller's address for the audit log: the TCP peer, or the client a trusted proxy
/// (`--trusted-proxy`) says it forwarded.
fn caller_address(ctx: &Ctx, req: &Request) -> String {
    crate::client_address::request_client(req, &ctx.trusted_proxies)
        .map_or_else(|| "unknown".into(), |ip| ip.to_string())
}

/// Answers with `answer`, the mutation `entry` describes: its first commit writes the
/// audit row (result `ok`, set to the error when the answer is one after all); an answer
/// that committed nothing (refused, or a no-op) is recorded right after, with its result. Routes that authenticate their callers themselves (webhook
/// triggers) call it once they know who calls.
pub(crate) async fn audit(
    ctx: &Ctx,
    entry: AuditEntry,
    answer: impl Future<Output = Response>,
) -> Response {
    let (response, row, entry) = audited(entry, answer).await;
    let unchanged = response.extensions().get::<Unchanged>().is_some();
    if response.status().is_success() && (row.is_some() || unchanged) {
        return response;
    }
    let (response, result) = outcome(response).await;
    if response.status().is_server_error() {
        // Most likely the store failed (unreachable: the answer took its pool's acquire
        // timeout already); the caller gets the error now, not after the audit row's own
        // wait on the same store.
        let ctx = ctx.clone();
        tokio::spawn(async move { record(&ctx, &entry, row, &result).await });
        return response;
    }
    record(ctx, &entry, row, &result).await;
    response
}

/// Answers a request the guard refused, and records it: with what the caller was told,
/// or with the reason that answer hides.
async fn refused(ctx: &Ctx, entry: AuditEntry, refusal: Refusal) -> Response {
    let Some(result) = refusal.audit else {
        return audit(
            ctx,
            entry,
            std::future::ready(refusal.error.into_response()),
        )
        .await;
    };
    record(ctx, &entry, None, &result).await;
    refusal.error.into_response()
}

/// Writes the audit row of `entry` with `result`, or sets the result of row `row` (written
/// by a commit of a mutation that then failed, or answered that nothing was found).
async fn record(ctx: &Ctx, entry: &AuditEntry, row: Option<i64>, result: &str) {
    let recorded = match row {
        Some(id) => ctx.store.set_audit_result(id, result).await,
        None => ctx.store.record_audit(entry, result).await,
    };
    if let Err(error) = recorded {
        tracing::error!(%error, action = %entry.action, "cannot write an audit row");
    }
}

/// The request's path as the client sent it (a nested router sees it without its prefix).
fn original_path(req: &Request) -> String {
    match req.extensions().get::<OriginalUri>() {
        Some(uri) => uri.path().to_string(),
        None => req.uri().path().to_string(),
    }
}

/// An error answer's body is at most this long (a JSON message).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The audit result of an answer that committed nothing: `ok`, or `<status>: <error>`.
async fn outcome(response: Response) -> (Response, String) {
    let status = response.status();
    if status.is_success() {
        return (response, "ok".into());
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, ERROR_BODY_LIMIT)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_default();
    let result = format!("{}: {message}", status.as_u16());
    (Response::from_parts(parts, Body::from(bytes)), result)
}

/// `GET /session`'s answer.
#[derive(Serialize, ToSchema)]
pub struct Session {
    /// Whether the server requires a token.
    auth: bool,
    /// Who the token belongs to (`anonymous` when auth is off).
    user: String,
    /// Whether they are a global admin.
    admin: bool,
    /// Their role in each project they are a member of.
    roles: BTreeMap<String, Role>,
}

/// Who the caller is: 200 when the server has no auth, or when the request carries a
/// valid token; 401 otherwise. A sign-in page asks this before it keeps a token.
#[utoipa::path(
    get,
    path = "/session",
    operation_id = "getSession",
    tag = "access",
    security((), ("bearer" = [])),
    responses(
        (status = 200, body = Session),
        (status = 401, description = "Auth is on and the request carries no valid token", body = ErrorBody),
    )
)]
pub(crate) async fn session(State(ctx): State<Ctx>, headers: HeaderMap) -> Result<Json<Session>> {
    let caller = authenticate(&ctx, &headers).await?;
    Ok(Json(Session {
        auth: ctx.auth.is_on(),
        user: caller.name,
        admin: caller.admin,
        roles: caller.roles.into_iter().collect(),
    }))
}
