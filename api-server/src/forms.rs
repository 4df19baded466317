//! Form triggers: `GET /forms/{project}/{workflow}/{trigger}` serves an HTML form of the
//! trigger's fields; a POST of it (form-encoded, as a browser sends it without any
//! script) starts a run with the fields as parameters and answers with the run, or with
//! the form again and each refused field's error beside it.
//!
//! Not under `/api/v1` and not in the OpenAPI document: these are pages. They check who
//! may use them themselves, as webhooks do: `allow_ips` and `rate` as for a webhook
//! ([`check_address`], [`crate::hooks::Rates`]); `access: login` and
//! `members` need a user, who presents an API token (a bearer token, or, from a browser,
//! as the password of HTTP Basic, which the browser asks for), and `members` needs the
//! operator role in the project. Since a browser replays Basic credentials by itself, a
//! POST to such a form from a page of another site is refused by its `Origin`
//! ([`drive_by::check_origin`]). A public form acts for no one.

mod page;

use crate::Ctx;
use crate::access::{Caller, audit, token_caller};
use crate::commands::refuse_undefined;
use crate::drive_by;
use crate::error::{Error, Result};
use crate::extract::Body;
use crate::hooks::auth::{Presented, check_address, presented};
use crate::hooks::{Follow, start_command};
use axum::Router;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use page::FormPage;
use shoal_common::access::Role;
use shoal_common::metrics::{self, TriggerOutcome};
use shoal_common::trigger::form::validate_submission;
use shoal_common::trigger::{FormAccess, TriggerDef};
use shoal_store::{AuditEntry, StoredDefinition};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The routes of form pages.
pub(crate) fn routes() -> Router<Ctx> {
    Router::new().route(
        "/forms/{project}/{workflow}/{trigger}",
        get(show).post(submit),
    )
}

type Names = Path<(String, String, String)>;

/// The form.
async fn show(State(ctx): State<Ctx>, Path(names): Names, req: Request) -> Response {
    let client = crate::client_address::request_client(&req, &ctx.trusted_proxies);
    let post = req.method() == Method::POST;
    let (def, t, caller) = match open(&ctx, &names, req.headers(), client, post).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    let none = BTreeMap::new();
    let page = FormPage {
        title: &title(&def, &t),
        fields: &t.fields,
        values: &none,
        errors: &none,
        user: caller.as_ref().map(|c| c.name.as_str()),
    };
    html(StatusCode::OK, page::form(&page))
}

/// A submit: the run it started, or the form again with what is wrong.
async fn submit(State(ctx): State<Ctx>, Path(names): Names, req: Request) -> Response {
    let client = crate::client_address::request_client(&req, &ctx.trusted_proxies);
    let post = req.method() == Method::POST;
    let (def, t, caller) = match open(&ctx, &names, req.headers(), client, post).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    if t.access() != FormAccess::Public
        && let Err(origin) = drive_by::check_origin(req.headers())
    {
        return failed(Error::Forbidden(format!(
            "this form was posted by a page of another site (Origin '{origin}'): submit it from its own page"
        )));
    }
    if !drive_by::is_form(req.headers()) {
        return failed(Error::UnsupportedMediaType(
            "a form is posted as application/x-www-form-urlencoded, as a browser sends it".into(),
        ));
    }
    let entry = AuditEntry {
        actor: caller.as_ref().map_or_else(
            || format!("form {}/{}", def.name, t.name),
            |c| c.name.clone(),
        ),
        action: "submitForm".into(),
        target: format!("POST /forms/{}/{}/{}", def.project, def.name, t.name),
        project: Some(def.project.clone()),
        object: None,
        address: client.map_or_else(|| "unknown".into(), |ip| ip.to_string()),
    };
    let answer = async {
        match start(&ctx, &def, &t, caller.as_ref(), req).await {
            Ok(response) => response,
            Err(e) => failed(e),
        }
    };
    audit(&ctx, entry, answer).await
}

/// The latest version of the workflow and its form trigger; one 404 for whatever is
/// missing, as for webhooks.
/// The form `names` names and its caller, if `client` may use it (`post`: to submit); the
/// answer when it is refused.
async fn open(
    ctx: &Ctx,
    names: &(String, String, String),
    headers: &HeaderMap,
    client: Option<IpAddr>,
    post: bool,
) -> std::result::Result<(StoredDefinition, TriggerDef, Option<Caller>), Response> {
    let (def, t) = find(ctx, names).await.map_err(failed)?;
    let caller = admit(ctx, &def, &t, headers, client, post).await?;
    Ok((def, t, caller))
}

async fn find(
    ctx: &Ctx,
    (project, workflow, trigger): &(String, String, String),
) -> Result<(StoredDefinition, TriggerDef)> {
    let def = ctx.store.get_definition(project, workflow, None).await?;
    let found = def.and_then(|d| {
        let t = d
            .definition
            .triggers
            .iter()
            .find(|t| &t.name == trigger && t.trigger_type == "form")?;
        Some((t.clone(), d))
    });
    match found {
        Some((t, d)) => Ok((d, t)),
        None => Err(Error::NotFound(format!(
            "there is no form '{project}/{workflow}/{trigger}': check the address"
        ))),
    }
}

/// Who uses the form, when the trigger's `allow_ips`, `rate` (submits only) and `access`
/// let them; the page that refuses them otherwise.
async fn admit(
    ctx: &Ctx,
    def: &StoredDefinition,
    t: &TriggerDef,
    headers: &HeaderMap,
    client: Option<IpAddr>,
    post: bool,
) -> std::result::Result<Option<Caller>, Response> {
    check_address(t, client).map_err(failed)?;
    if let Some(rate) = t.rate
        && post
    {
        // Before the credential, as for webhooks: a flood costs no token lookups beyond it.
        let trigger = format!("{}/{}/{}", def.project, def.name, t.name);
        ctx.rates.take(&trigger, rate).map_err(failed)?;
    }
    let caller = user(ctx, headers).await;
    match (t.access(), caller) {
        (FormAccess::Public, Ok(caller)) => Ok(caller),
        // A public form asks no one to sign in: a bad credential is as none.
        (FormAccess::Public, Err(_)) => Ok(None),
        (_, Ok(None) | Err(Error::Unauthorized)) => Err(sign_in(def, t)),
        (_, Err(e)) => Err(failed(e)),
        (FormAccess::Login, Ok(caller)) => Ok(caller),
        (FormAccess::Members, Ok(Some(caller))) => {
            // Those who may start the workflow's runs, as `POST .../start` asks.
            caller.check(&def.project, Role::Operator).map_err(failed)?;
            Ok(Some(caller))
        }
    }
}

/// The user a request presents: a bearer token, or a token as the HTTP Basic password
/// (the user name is not checked: the token names its user). None: no credential; with
/// auth off, everyone is the anonymous admin.
async fn user(ctx: &Ctx, headers: &HeaderMap) -> Result<Option<Caller>> {
    if !ctx.auth.is_on() {
        return token_caller(ctx, "").await.map(Some);
    }
    let token = match presented(headers) {
        Presented::None => return Ok(None),
        Presented::Bearer(token) => token,
        Presented::Basic { password, .. } => password,
        Presented::Unreadable => return Err(Error::Unauthorized),
    };
    token_caller(ctx, &token).await.map(Some)
}

/// 401 asking the browser for credentials: a user name and an API token.
fn sign_in(def: &StoredDefinition, t: &TriggerDef) -> Response {
    let text = "Sign in to use this form: your user name, and one of your API tokens \
                (shoal → Account → Tokens) as the password.";
    let mut response = html(StatusCode::UNAUTHORIZED, page::message("Sign in", text));
    let realm = format!(
        "Basic realm=\"shoal form {}/{}/{}\", charset=\"UTF-8\"",
        def.project, def.name, t.name
    );
    if let Ok(value) = HeaderValue::from_str(&realm) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// Validates the submitted fields and starts the run.
async fn start(
    ctx: &Ctx,
    def: &StoredDefinition,
    t: &TriggerDef,
    caller: Option<&Caller>,
    req: Request,
) -> Result<Response> {
    ctx.store.check_online(&def.project, &def.name).await?;
    let body = Body::from_request(req, ctx).await?;
    // A repeated name keeps its last value, as for a webhook's query parameters.
    let submitted: BTreeMap<String, String> =
        form_urlencoded::parse(&body.0).into_owned().collect();
    let counted = format!("{}/{}/{}", def.project, def.name, t.name);
    let params = match validate_submission(&t.fields, &submitted) {
        Ok(params) => params,
        Err(errors) => {
            metrics::trigger_message(&counted, TriggerOutcome::Ignored);
            let page = FormPage {
                title: &title(def, t),
                fields: &t.fields,
                values: &submitted,
                errors: &errors,
                user: caller.map(|c| c.name.as_str()),
            };
            return Ok(html(StatusCode::BAD_REQUEST, page::form(&page)));
        }
    };
    refuse_undefined(def, &params)?;
    let cmd = start_command(def, params);
    let run = ctx.store.start_triggered(&cmd, None).await?;
    metrics::trigger_message(&counted, TriggerOutcome::Started);
    metrics::API_COMMANDS_WRITTEN.inc();
    tracing::info!(command_id = run.command_id, project = %def.project, workflow = %def.name, trigger = %t.name, "form submitted");
    let follow = Follow {
        ctx,
        cmd: &cmd,
        key: None,
    };
    let instance = follow.claimed(&run).await?;
    let started = page::Started {
        title: &title(def, t),
        command_id: run.command_id,
        instance,
        // Someone who may see the run in the web UI.
        link: caller.is_some_and(|c| c.role_in(&def.project).is_some()),
    };
    Ok(html(StatusCode::OK, page::started(&started)))
}

fn title(def: &StoredDefinition, t: &TriggerDef) -> String {
    format!("{} · {}", def.name, t.name)
}

fn html(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let value = HeaderValue::from_static("text/html; charset=utf-8");
    response.headers_mut().insert(CONTENT_TYPE, value);
    response
}

/// An error as a page, with its status (and `Retry-After` for a rate's 429).
fn failed(e: Error) -> Response {
    let status = e.status();
    let retry_after = match &e {
        Error::TooManyRequests { retry_after, .. } => Some(*retry_after),
        _ => None,
    };
    let title = status.canonical_reason().unwrap_or("Error");
    let mut response = html(status, page::message(title, &e.client_message()));
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(RETRY_AFTER, seconds.into());
    }
    response
}
