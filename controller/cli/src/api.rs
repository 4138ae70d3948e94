//! The requests the upgrade commands make: read a pool, list, read,
//! create and steer operations. Errors name the object and carry the API
//! server's own message (its 422s name the refused field).

use std::path::Path;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use sluice_model::node_pool::{NodePool, UpgradeSettings};
use sluice_model::operation::{Operation, OperationAction};

use crate::client::ClientError;
use crate::request::RequestError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{what} not found")]
    NotFound { what: String },
    #[error("{what}: the API server refused: {message}")]
    Refused { what: String, message: String },
    /// A 409: the object changed since it was read (its resourceVersion
    /// is stale); a read-modify-write may read it again and retry.
    #[error("{what}: the API server refused: {message}")]
    Conflict { what: String, message: String },
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
    #[error("{0}")]
    Input(String),
}

impl ApiError {
    /// `err` from a request about `what`: a 404 says the object is not
    /// there; other refusals show the server's message alone.
    pub fn of(what: impl Into<String>, err: kube::Error) -> ApiError {
        let what = what.into();
        match err {
            kube::Error::Api(s) if s.code == 404 => ApiError::NotFound { what },
            kube::Error::Api(s) if s.code == 409 => ApiError::Conflict {
                what,
                message: s.message.clone(),
            },
            kube::Error::Api(s) => ApiError::Refused {
                what,
                message: s.message.clone(),
            },
            source => ApiError::Kube { what, source },
        }
    }
}

pub fn operations(client: &Client) -> Api<Operation> {
    Api::all(client.clone())
}

pub async fn pool(client: &Client, name: &str) -> Result<NodePool, ApiError> {
    Api::<NodePool>::all(client.clone())
        .get(name)
        .await
        .map_err(|e| ApiError::of(format!("node pool {name:?}"), e))
}

pub async fn operation(client: &Client, name: &str) -> Result<Operation, ApiError> {
    operations(client)
        .get(name)
        .await
        .map_err(|e| ApiError::of(format!("operation {name:?}"), e))
}

pub async fn list(client: &Client) -> Result<Vec<Operation>, ApiError> {
    operations(client)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| ApiError::of("listing operations", e))
}

pub async fn create(client: &Client, op: &Operation) -> Result<Operation, ApiError> {
    let name = op.metadata.name.clone().unwrap_or_default();
    operations(client)
        .create(&PostParams::default(), op)
        .await
        .map_err(|e| ApiError::of(format!("creating operation {name:?}"), e))
}

/// Write `spec.action` (a merge patch: the one field a user steers an
/// upgrade with, U6), and with a rollback whether green's drain honours
/// budgets (`respectPdb`, B6).
pub async fn set_action(
    client: &Client,
    name: &str,
    action: OperationAction,
    respect_pdb: Option<bool>,
) -> Result<Operation, ApiError> {
    let body = match respect_pdb {
        Some(r) => json!({"spec": {"action": action, "respectPdb": r}}),
        None => json!({"spec": {"action": action}}),
    };
    operations(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(|e| ApiError::of(format!("operation {name:?}"), e))
}

/// Write the pool back with `settings` as its `spec.upgradeSettings`,
/// whole (a merge patch would keep the blue-green settings a switch to
/// surge drops); its resourceVersion makes a concurrent edit a 409, not a
/// lost write.
pub async fn set_upgrade_settings(
    client: &Client,
    pool: &NodePool,
    settings: UpgradeSettings,
) -> Result<NodePool, ApiError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let mut updated = pool.clone();
    updated.spec.upgrade_settings = Some(settings);
    let api: Api<NodePool> = Api::all(client.clone());
    api.replace(&name, &PostParams::default(), &updated)
        .await
        .map_err(|e| ApiError::of(format!("node pool {name:?}"), e))
}

/// Run one command's requests on a fresh client; its exit code, an error
/// printed on stderr as one line.
pub fn run<F, Fut>(kubeconfig: Option<&Path>, command: F) -> u8
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<u8, ApiError>>,
{
    let result = crate::client::runtime()
        .map_err(ApiError::from)
        .and_then(|rt| {
            rt.block_on(async {
                let client = crate::client::connect(kubeconfig).await?;
                command(client).await
            })
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            crate::exit::ERROR
        }
    }
}
