//! shoal's REST API.
//!
//! The api-server validates input, stores definitions and writes commands; it never changes
//! the state of a run itself (the owning master does, also when asked to stop or pause).
//! Everything lives under `/api/v1` (and Prometheus' `GET /metrics`), leaving `/` free for
//! the web UI. Errors are JSON `{"error": "..."}` bodies ([`error::ErrorBody`]), produced in
//! one place ([`error::Error`]'s `IntoResponse`). The OpenAPI 3.1 document is built from the
//! same list of routes as the router ([`api_routes`]) and served at
//! `GET /api/v1/openapi.json`, with Swagger UI at `/api/docs`.

mod access;
mod actions;
mod alerts;
mod backfills;
mod channels;
mod client_address;
mod cluster;
mod commands;
mod completions;
mod drive_by;
mod environments;
pub mod error;
mod events;
mod external;
mod extract;
mod forms;
mod hooks;
mod https;
mod instances;
mod lifecycle;
mod logs;
mod metrics;
mod nfc_path;
mod openapi;
mod projects;
mod schedules;
mod schema;
mod secrets;
mod security_headers;
mod server;
mod task_actions;
mod task_groups;
mod times;
mod ui;
mod workflows;

pub use access::Auth;
pub use error::{Error, Result};
pub use https::Https;
pub use metrics::{metrics_router, serve_metrics};
pub use openapi::document as openapi_document;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use serde::Serialize;
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::registry::Registry;
use shoal_common::secret_key::SecretKey;
use shoal_common::trigger::cidr::Cidr;
use shoal_store::Store;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// What the api-server is started with.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    /// Whether requests need a user's token (all under `/api/v1` but health, the OpenAPI
    /// document and the session check, and `GET /metrics`).
    pub auth: Auth,
    /// Cluster membership, for `GET /cluster` (None: the api-server was started without
    /// a registry, and the listing says so).
    pub registry: Option<Registry>,
    /// Carried by its gRPC calls to masters (stop, pause) and workers (task logs).
    pub secret: ClusterSecret,
    pub limits: Limits,
    /// Seals the values of project secrets (None: secrets cannot be set).
    pub secret_key: Option<SecretKey>,
    /// Reverse proxies whose `X-Forwarded-For` names a webhook caller's address.
    pub trusted_proxies: Vec<Cidr>,
    /// With auth off, host names (besides IP addresses and `localhost`) requests may be
    /// addressed to ([`drive_by`]).
    pub allowed_hosts: Vec<String>,
}

/// What one request may ask of the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body (a workflow definition is the largest); 413 beyond.
    pub body_bytes: usize,
    /// Most tasks in one workflow definition; 400 beyond.
    pub tasks: usize,
    /// How long an event that completed no waiting task is kept for a wait that begins
    /// later (zero: not kept).
    pub event_retention: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            body_bytes: 8 * 1024 * 1024,
            tasks: 10_000,
            event_retention: std::time::Duration::from_secs(3600),
        }
    }
}

/// The state handlers see: the public [`ApiState`] plus what the server keeps for itself.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub store: Store,
    pub registry: Option<Registry>,
    /// gRPC channels to workers and masters.
    pub peers: Arc<channels::Channels>,
    pub auth: Arc<Auth>,
    pub limits: Limits,
    pub secret_key: Option<SecretKey>,
    pub trusted_proxies: Arc<[Cidr]>,
    /// Cancelled when the server shuts down: webhook calls waiting for their run stop
    /// waiting.
    pub shutdown: CancellationToken,
    /// The operation id of each (method, full path template), for the access policy.
    pub operations: Arc<HashMap<(Method, String), String>>,
    /// The OpenAPI document, serialized once.
    pub openapi: Arc<str>,
    /// Wakes external workers' polls when tasks are offered.
    pub offers: Arc<external::Offers>,
    /// Triggers' `rate` buckets.
    pub rates: Arc<hooks::Rates>,
}

/// Every operation of the REST API, relative to `/api/v1`. The router and the OpenAPI
/// document are both built from this list (`routes!` registers a handler at the method and
/// path of its `#[utoipa::path]`, which also describes it), so neither can have an
/// operation the other lacks. One `routes!` per path.
fn api_routes() -> OpenApiRouter<Ctx> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(access::session))
        .routes(routes!(access::users::create, access::users::list))
        .routes(routes!(access::users::disable))
        .routes(routes!(access::users::enable))
        .routes(routes!(access::tokens::create, access::tokens::list))
        .routes(routes!(access::tokens::revoke))
        .routes(routes!(access::audit::list))
        .routes(routes!(openapi::document_json))
        .routes(routes!(projects::create, projects::list))
        .routes(routes!(projects::get, projects::delete))
        .routes(routes!(projects::members))
        .routes(routes!(projects::set_member, projects::remove_member))
        .routes(routes!(secrets::list))
        .routes(routes!(secrets::set, secrets::delete))
        .routes(routes!(environments::list))
        .routes(routes!(
            environments::get,
            environments::set,
            environments::delete
        ))
        .routes(routes!(workflows::apply, workflows::list))
        .routes(routes!(workflows::validate))
        .routes(routes!(schema::workflow))
        .routes(routes!(workflows::get, lifecycle::delete_workflow))
        .routes(routes!(workflows::versions))
        .routes(routes!(lifecycle::online))
        .routes(routes!(lifecycle::offline))
        .routes(routes!(lifecycle::rollback))
        .routes(routes!(commands::start))
        .routes(routes!(hooks::call, hooks::call_get, hooks::call_put))
        .routes(routes!(hooks::listing::list))
        .routes(routes!(hooks::ignored::list))
        .routes(routes!(schedules::create, schedules::list))
        .routes(routes!(
            schedules::get,
            schedules::update,
            schedules::delete
        ))
        .routes(routes!(schedules::enable))
        .routes(routes!(schedules::disable))
        .routes(routes!(schedules::preview))
        .routes(routes!(schedules::preview_cron))
        .routes(routes!(backfills::create))
        .routes(routes!(backfills::list))
        .routes(routes!(backfills::get))
        .routes(routes!(backfills::cancel))
        .routes(routes!(commands::status, commands::cancel))
        .routes(routes!(commands::list))
        .routes(routes!(cluster::nodes))
        .routes(routes!(instances::list))
        .routes(routes!(instances::get, lifecycle::delete_instance))
        .routes(routes!(actions::act))
        .routes(routes!(instances::task))
        .routes(routes!(completions::complete))
        .routes(routes!(task_actions::act))
        .routes(routes!(completions::callback))
        .routes(routes!(events::send))
        .routes(routes!(logs::task_log))
        .routes(routes!(external::poll))
        .routes(routes!(external::queues))
        .routes(routes!(external::heartbeat))
        .routes(routes!(external::log))
        .routes(routes!(external::release))
        .routes(routes!(external::completion::complete))
        .routes(routes!(external::completion::complete_batch))
        .routes(routes!(task_groups::create, task_groups::list))
        .routes(routes!(task_groups::delete))
        .routes(routes!(alerts::create_channel, alerts::list_channels))
        .routes(routes!(alerts::delete_channel))
        .routes(routes!(alerts::list))
}

/// The API router (to nest under `/api/v1`), the router of the paths outside it
/// (`/metrics`) and the OpenAPI document describing both.
fn parts() -> (Router<Ctx>, Router<Ctx>, utoipa::openapi::OpenApi) {
    let (api, api_doc) = api_routes().split_for_parts();
    let (outside, doc) = OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(metrics::handler))
        .split_for_parts();
    (api, outside, openapi::finish(doc.nest("/api/v1", api_doc)))
}

/// The whole HTTP surface: `/api/v1/...`, `GET /metrics` (Prometheus), the API's
/// interactive docs at `/api/docs`, the web UI, and JSON 404/405 answers for anything else.
pub fn router(state: ApiState) -> Router {
    router_until(state, CancellationToken::new(), false)
}

/// [`router`], whose long waits end when `shutdown` is cancelled; `https`: served over
/// HTTPS (answers then tell browsers to keep to it).
fn router_until(state: ApiState, shutdown: CancellationToken, https: bool) -> Router {
    let (api, outside, doc) = parts();
    let allowed_hosts = drive_by::AllowedHosts::new(&state.allowed_hosts);
    let ctx = Ctx {
        store: state.store,
        registry: state.registry,
        peers: Arc::new(channels::Channels::new(state.secret)),
        auth: Arc::new(state.auth),
        limits: state.limits,
        secret_key: state.secret_key,
        trusted_proxies: state.trusted_proxies.into(),
        shutdown,
        operations: Arc::new(openapi::operations(&doc)),
        openapi: Arc::from(doc.to_json().expect("the OpenAPI document serializes")),
        offers: Arc::default(),
        rates: Arc::default(),
    };
    let body_limit = ctx.limits.body_bytes;
    let guard = axum::middleware::from_fn_with_state(ctx.clone(), access::guard);
    let api = api
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(guard.clone())
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(ctx.clone());

    let auth_on = ctx.auth.is_on();
    let forms = forms::routes().with_state(ctx.clone());
    let app = outside
        .route_layer(guard)
        .with_state(ctx)
        .nest("/api/v1", api)
        .merge(forms)
        .merge(openapi::docs_router())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit));
    let app = match auth_on {
        true => app,
        false => app.layer(axum::middleware::from_fn_with_state(
            allowed_hosts,
            drive_by::refuse,
        )),
    };
    app.layer(axum::middleware::from_fn_with_state(
        https,
        security_headers::add,
    ))
    .layer(TraceLayer::new_for_http())
}

/// Serves `router(state)` on `listener`, over HTTPS when `https` is given, until `shutdown`
/// is cancelled, then finishes the requests in flight and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    https: Option<Https>,
    shutdown: CancellationToken,
) -> Result<()> {
    let addr = listener.local_addr()?;
    let scheme = if https.is_some() { "https" } else { "http" };
    tracing::info!(%addr, scheme, auth = state.auth.is_on(), "api-server listening");
    let app = router_until(state, shutdown.clone(), https.is_some());
    // A layer of `app` runs after its routing; names are brought to NFC before it.
    let app =
        Router::new().fallback_service(tower::ServiceExt::map_request(app, nfc_path::rewrite));
    match https {
        None => server::run(listener, app, shutdown).await,
        Some(https) => server::run(https.listen(listener)?, app, shutdown).await,
    }
    tracing::info!(%addr, "api-server stopped");
    Ok(())
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Health {
    /// Always `ok`: the api-server answers.
    #[schema(example = "ok")]
    status: &'static str,
}

/// Whether the api-server answers (it does not check the store).
#[utoipa::path(get, path = "/health", operation_id = "health", tag = "meta", responses((status = 200, body = Health)))]
async fn health() -> axum::Json<Health> {
    axum::Json(Health { status: "ok" })
}

/// The web UI for page and asset paths, JSON 404 for anything else.
async fn not_found(
    method: Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    ui::serve(&method, &uri, &headers).unwrap_or_else(|| {
        Error::NotFound(format!("no such endpoint: {}", uri.path())).into_response()
    })
}

async fn method_not_allowed(method: Method) -> Error {
    Error::MethodNotAllowed(method.to_string())
}
