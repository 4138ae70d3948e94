//! Reaching the cluster: its `Cluster` object `default`, through the API
//! with a kubeconfig (as kubectl), or from a manifest file.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use sluice_model::cluster::Cluster;
use sluice_model::decode::{decode_object, FieldValidation};
use sluice_model::kind::SluiceKind;

/// By convention the cluster's one `Cluster` object.
pub const CLUSTER: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{path}: {why}")]
    File { path: PathBuf, why: String },
    #[error("kubeconfig{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig {
        path: Option<PathBuf>,
        source: kube::config::KubeconfigError,
    },
    #[error("making the API client: {0}")]
    Client(kube::Error),
    #[error("reading Cluster {CLUSTER:?} through the API: {0}")]
    Get(kube::Error),
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// A Cluster manifest (YAML or JSON), strictly (unknown fields are
/// errors naming their path) and validated as the API server would.
pub fn cluster_from_file(path: &Path) -> Result<Cluster, ClientError> {
    let file = |why: String| ClientError::File {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file(e.to_string()))?;
    if text.trim().is_empty() {
        return Err(file("empty: expected a Cluster manifest".into()));
    }
    let de = serde_yaml::Deserializer::from_str(&text);
    let cluster = decode_object::<Cluster, _>(de, FieldValidation::Strict)
        .map(|d| d.value)
        .map_err(|e| file(e.to_string()))?;
    cluster.validate().map_err(|e| file(e.to_string()))?;
    Ok(cluster)
}

/// A single-threaded runtime for one command's requests.
pub fn runtime() -> Result<tokio::runtime::Runtime, ClientError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClientError::Runtime)
}

/// A client for the API server `kubeconfig` (or the environment's)
/// points at, as kubectl would reach it.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(p) => {
            let fail = |source| ClientError::Kubeconfig {
                path: Some(p.to_path_buf()),
                source,
            };
            let kc = Kubeconfig::read_from(p).map_err(fail)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(fail)?
        }
        None => kube::Config::from_kubeconfig(&KubeConfigOptions::default())
            .await
            .map_err(|source| ClientError::Kubeconfig { path: None, source })?,
    };
    kube::Client::try_from(config).map_err(ClientError::Client)
}

/// The Cluster `default` through the API server `kubeconfig` (or the
/// environment's) points at.
pub fn cluster_from_api(kubeconfig: Option<&Path>) -> Result<Cluster, ClientError> {
    runtime()?.block_on(async {
        let client = connect(kubeconfig).await?;
        kube::Api::<Cluster>::all(client)
            .get(CLUSTER)
            .await
            .map_err(ClientError::Get)
    })
}
