//! The autoscaler loop's writes, all through the controller's own API as
//! the other loops': node taints and annotations, evictions, the pools'
//! `status.autoscaler`, the status ConfigMap and Events.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use sluice_autoscaler::options::FLAGS_ANNOTATION;
use sluice_autoscaler::status::{self as cas, DATA_KEY, LAST_UPDATED_ANNOTATION};
use sluice_autoscaler::{Event, EventType, Involved, Status};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Pod};
use sluice_model::node_pool::{AutoscalerStatus, NodePool};
use tracing::warn;

use crate::loops::LoopError;

/// Upstream's component name, in Events and as the field manager.
pub const COMPONENT: &str = "cluster-autoscaler";

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(COMPONENT.into()),
        ..Default::default()
    }
}

/// A merge patch of a Node (taints and cordon).
pub async fn node(client: &Client, name: &str, patch: &Value) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    match api.patch(name, &params(), &Patch::Merge(patch)).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(drop),
    }
}

/// Evicts `pod` (`namespace/name`) through the Eviction API with `grace`
/// seconds; a pod already gone counts as evicted. A refusal (429, a
/// budget) is returned for the caller to retry.
pub async fn evict(client: &Client, pod: &str, grace: i64) -> Result<(), kube::Error> {
    let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ep = EvictParams {
        delete_options: Some(DeleteParams {
            grace_period_seconds: u32::try_from(grace).ok(),
            ..Default::default()
        }),
        post_options: PostParams {
            field_manager: Some(COMPONENT.into()),
            ..Default::default()
        },
    };
    match api.evict(name, &ep).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(drop),
    }
}

/// Writes the pool's `status.autoscaler` as `after`, removing what it
/// leaves out (a merge patch of the difference: fields of the pool's other
/// writers are not touched).
pub async fn pool(
    client: &Client,
    pool: &NodePool,
    after: &AutoscalerStatus,
) -> Result<(), LoopError> {
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let before = pool
        .status
        .as_ref()
        .and_then(|s| s.autoscaler.as_ref())
        .and_then(|a| serde_json::to_value(a).ok())
        .unwrap_or(Value::Null);
    let after = serde_json::to_value(after).unwrap_or(Value::Null);
    let diff = crate::loops::upgrades::merge_diff(&before, &after);
    let api: Api<NodePool> = Api::all(client.clone());
    let patch = json!({ "status": { "autoscaler": diff } });
    match api
        .patch_status(name, &params(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(drop).map_err(Into::into),
    }
}

/// `kube-system/cluster-autoscaler-status` as `status` says, with the
/// loop's `flags`: created when missing, patched when it says something
/// new beyond the probe times (or the flags changed), else left alone. A
/// failure is logged: the next loop tries again.
pub async fn status(client: &Client, status: &Status, flags: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), cas::NAMESPACE);
    let (data, mut annotations) = status.config_map();
    annotations.insert(FLAGS_ANNOTATION.to_owned(), flags.to_owned());
    let current = match api.get_opt(cas::NAME).await {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "autoscaler: reading the status ConfigMap");
            return;
        }
    };
    let result = match current {
        None => {
            let cm: Result<ConfigMap, _> = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": cas::NAME, "namespace": cas::NAMESPACE,
                    "annotations": annotations},
                "data": data,
            }));
            match cm {
                Ok(cm) => api
                    .create(
                        &PostParams {
                            field_manager: Some(COMPONENT.into()),
                            ..Default::default()
                        },
                        &cm,
                    )
                    .await
                    .map(drop),
                Err(e) => {
                    warn!(error = %e, "autoscaler: the status ConfigMap");
                    return;
                }
            }
        }
        Some(cm) => {
            let before = cm.data.as_ref().and_then(|d| d.get(DATA_KEY));
            let flags_before = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(FLAGS_ANNOTATION));
            let stale = flags_before.map(String::as_str) != Some(flags)
                || cm
                    .metadata
                    .annotations
                    .as_ref()
                    .is_none_or(|a| !a.contains_key(LAST_UPDATED_ANNOTATION));
            if !stale && !cas::changed(before.map(String::as_str), status) {
                return;
            }
            let patch = json!({"metadata": {"annotations": annotations}, "data": data});
            api.patch(cas::NAME, &params(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    };
    if let Err(e) = result {
        warn!(error = %e, "autoscaler: writing the status ConfigMap");
    }
}

/// An Event about a Node.
pub async fn node_event(client: &Client, node: &Node, reason: &'static str, message: &str) {
    let e = Event {
        involved: Involved::Node {
            name: node.metadata.name.clone().unwrap_or_default(),
        },
        type_: EventType::Warning,
        reason,
        message: message.to_owned(),
    };
    event(client, &e, &HashMap::new()).await;
}

/// Writes `e` as a core/v1 Event (pods' with their uid from `uids`).
/// Events of cluster-scoped objects go to `default`, as kubectl looks for
/// them; the status ConfigMap's to `kube-system`.
pub async fn event(client: &Client, e: &Event, uids: &HashMap<(&str, &str), &str>) {
    let (ns, involved) = match &e.involved {
        Involved::Pod { namespace, name } => (
            namespace.clone(),
            json!({"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name,
                "uid": uids.get(&(namespace.as_str(), name.as_str()))}),
        ),
        Involved::Node { name } => (
            "default".to_owned(),
            json!({"apiVersion": "v1", "kind": "Node", "name": name}),
        ),
        Involved::NodePool { name } => (
            "default".to_owned(),
            json!({"apiVersion": "sluice.dev/v1", "kind": "NodePool", "name": name}),
        ),
        Involved::StatusConfigMap => (
            "kube-system".to_owned(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "kube-system",
                "name": "cluster-autoscaler-status"}),
        ),
    };
    let name = involved["name"].as_str().unwrap_or("object").to_owned();
    let now = Timestamp::now().to_string();
    let type_ = match e.type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    };
    let body = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": ns},
        "involvedObject": involved,
        "reason": e.reason, "message": e.message, "type": type_,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1});
    let api: Api<sluice_model::k8s::Event> = Api::namespaced(client.clone(), &ns);
    match serde_json::from_value(body) {
        Ok(ev) => {
            if let Err(err) = api.create(&PostParams::default(), &ev).await {
                warn!(reason = e.reason, error = %err, "autoscaler event");
            }
        }
        Err(err) => warn!(reason = e.reason, error = %err, "autoscaler event"),
    }
}
