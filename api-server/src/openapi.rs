//! The REST API's OpenAPI 3.1 document, built with utoipa from the handlers'
//! `#[utoipa::path]` attributes and the `ToSchema` types they answer with (see
//! [`crate::api_routes`]). Served at `GET /api/v1/openapi.json`, browsable at `/api/docs`
//! (Swagger UI, bundled in the binary), printed by `shoal openapi`.

use crate::Ctx;
use crate::access::policy::{self, Need};
use crate::error::ErrorBody;
use axum::Router;
use axum::extract::State;
use axum::http::Method;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use std::collections::HashMap;
use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa_swagger_ui::{Config, SwaggerUi};

/// Where the interactive docs are served.
pub const DOCS_PATH: &str = "/api/docs";
/// Where the document is served.
pub const DOCUMENT_PATH: &str = "/api/v1/openapi.json";
/// The security scheme of requests when the server has a token (and of triggers that
/// take a token).
const BEARER: &str = "bearer";
/// The security scheme of triggers that take HTTP Basic credentials.
pub(crate) const BASIC: &str = "basic";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "shoal",
        description = "REST API of shoal, a workflow scheduler. Errors are JSON `ErrorBody` \
            objects. With auth on, every request needs `Authorization: Bearer <token>` (a user's \
            API token), reads included, but health, this document and the session check; \
            each operation needs a role: viewer, operator, editor or admin of its project, or \
            global admin."
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "projects", description = "Projects and their members"),
        (name = "access", description = "Users, API tokens, the session and the audit log"),
        (name = "workflows", description = "Workflow definitions, versions and starts"),
        (name = "schedules", description = "Cron schedules of a workflow"),
        (name = "backfills", description = "Runs of a workflow for past dates"),
        (name = "instances", description = "Workflow runs, their task attempts and logs"),
        (name = "task-groups", description = "Slots shared by tasks across workflows"),
        (name = "alerts", description = "Alert channels and the alert outbox"),
        (name = "cluster", description = "Masters and workers"),
        (name = "meta", description = "Health, session, metrics and this document"),
    )
)]
struct ApiDoc;

/// The document's info, tags and shared schemas, before the paths are added.
pub(crate) fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Adds what every operation shares: a 500 answer, and (but for the open operations) the
/// bearer token and its 401 and 403 answers.
pub(crate) fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            BEARER,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            BASIC,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)),
        );
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations {
            let Some(op) = op else { continue };
            let id = op.operation_id.clone().unwrap_or_default();
            if policy::rule(&id) != Some(Need::Open) {
                op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
                add_error(op, 401, "Auth is on and the request carries no valid token");
                add_error(op, 403, "The caller lacks the role this needs");
            }
            if policy::needs_existing_project(&id) {
                add_error(op, 404, "No project of this name");
            }
            add_error(
                op,
                500,
                "Internal error (the detail is in the server's log)",
            );
        }
    }
    doc
}

/// Adds an `ErrorBody` answer with `status` to `op` unless it describes one already.
fn add_error(op: &mut Operation, status: u16, description: &str) {
    let response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build();
    op.responses
        .responses
        .entry(status.to_string())
        .or_insert(RefOr::T(response));
}

/// The operation id of every (method, path) of `doc`, for the access guard.
pub(crate) fn operations(doc: &utoipa::openapi::OpenApi) -> HashMap<(Method, String), String> {
    let mut map = HashMap::new();
    for (path, item) in &doc.paths.paths {
        let operations = [
            (Method::GET, &item.get),
            (Method::POST, &item.post),
            (Method::PUT, &item.put),
            (Method::DELETE, &item.delete),
            (Method::PATCH, &item.patch),
        ];
        for (method, op) in operations {
            if let Some(id) = op.as_ref().and_then(|op| op.operation_id.clone()) {
                map.insert((method, path.clone()), id);
            }
        }
    }
    map
}

/// The OpenAPI document, built from the same routes as the router.
pub fn document() -> utoipa::openapi::OpenApi {
    crate::parts().2
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object))
)]
pub(crate) async fn document_json(State(ctx): State<Ctx>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "application/json")],
        ctx.openapi.to_string(),
    )
}

/// Swagger UI at [`DOCS_PATH`], reading [`DOCUMENT_PATH`]; its files are in the binary.
pub(crate) fn docs_router() -> Router {
    SwaggerUi::new(DOCS_PATH)
        .config(Config::from(DOCUMENT_PATH))
        .into()
}
