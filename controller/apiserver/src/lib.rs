//! The Sluice API server: kube-apiserver's HTTP side as the real
//! `kubectl` and kube-rs use it, one `Router` per concern with its state
//! given once, over the store (`sluice-store`), the model's kinds and
//! validation (`sluice-model`, `sluice-apimachinery`) and the admission
//! rules of the pure decision crates. Its own crate so that what only
//! serves requests (and its fuzz targets) builds without the decision
//! loops, the node providers and the kube-rs client.

pub mod allocate;
pub mod apply;
pub mod auth;
pub mod authz;
pub mod binding;
pub mod clock;
pub mod collection;
pub mod defaults;
pub mod deletion;
pub mod discovery;
pub mod dry_run;
pub mod duplicates;
pub mod eviction;
pub mod fields;
/// Pure entry points over the request pipeline for the fuzz targets.
#[doc(hidden)]
pub mod fuzzing;
pub mod identity;
pub mod list;
pub mod maintenance;
pub mod meta;
pub mod namespaces;
pub mod objects;
pub mod openapi;
pub mod operations;
pub mod patch;
pub mod path;
pub mod resources;
pub mod scale;
pub mod selector;
pub mod semantics;
pub mod services;
pub mod status;
pub mod stored;
pub mod strategic;
pub mod subsetting;
pub mod table;
pub mod validate;
pub mod watch;
pub mod write;

use axum::http::Uri;
use axum::routing::{any, get};
use axum::{middleware, Router};

use auth::Authenticator;
use objects::Objects;
use status::ApiError;

async fn ok() -> &'static str {
    "ok"
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(uri.path())
}

/// Everything the server answers, behind bearer-token authentication.
pub fn router(auth: Authenticator, objects: Objects) -> Router {
    routes(objects).layer(middleware::from_fn_with_state(auth, auth::require_token))
}

/// The routes for a caller inside the process, who is `identity` without
/// a token (the decision loops).
pub fn in_process(objects: Objects, identity: crate::identity::Identity) -> Router {
    routes(objects).layer(axum::Extension(identity))
}

fn routes(objects: Objects) -> Router {
    let objects = Router::new()
        .route("/api/v1/{*rest}", any(objects::handle))
        .route("/apis/{group}/{version}/{*rest}", any(objects::handle))
        .with_state(objects);
    Router::new()
        .merge(discovery::router())
        .merge(openapi::router())
        .merge(objects)
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(ok))
        .fallback(not_found)
}
