//! What a new cluster holds before anyone writes to it: kube-apiserver's
//! system namespaces (`default`, `kube-system`, `kube-public`,
//! `kube-node-lease`), so `kubectl get namespaces` and clients that look
//! for them find them. Made once, when missing; an existing one is left
//! as it is (users may label it), and two controllers starting together
//! on one etcd both succeed.

use anyhow::{Context, Result};
use serde_json::json;
use sluice_store::{Store, StoreError};

use crate::api::{meta, objects, path};

pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

pub async fn ensure_namespaces(store: &dyn Store) -> Result<()> {
    let t = path::resolve("/api/v1/namespaces")
        .map_err(|_| anyhow::anyhow!("namespaces are not in the resource table"))?;
    for name in SYSTEM_NAMESPACES {
        let body = json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        let obj = meta::prepare_create(
            &t,
            body,
            "",
            &meta::uuid(objects::random::<16>()),
            &crate::clock::now_rfc3339(),
        )
        .map_err(|e| anyhow::anyhow!("namespace {name}: {}", e.message))?;
        let bytes = serde_json::to_vec(&obj).context("encoding a namespace")?;
        match store.create(&objects::key(&t, Some(name)), bytes).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e).with_context(|| format!("creating namespace {name}")),
        }
    }
    Ok(())
}
