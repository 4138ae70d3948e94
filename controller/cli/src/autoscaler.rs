//! `sluice autoscaler explain pod|node` and `simulate`: the cluster
//! autoscaler's next decision on the live cluster, read from the API and
//! made by the loop's own pure `decide`, over the same objects
//! (`sluice_autoscaler::live`), the loop's remembered state (each pool's
//! `status.autoscaler.memory`) and its flags (on the status ConfigMap).
//! Nothing is written.

use std::path::Path;

use clap::Subcommand;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::Client;
use serde::de::DeserializeOwned;
use sluice_autoscaler::live::Objects;
use sluice_autoscaler::options::{Flags, FLAGS_ANNOTATION};
use sluice_autoscaler::{explain, memory, status, Decision, Options};
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Pod, PodDisruptionBudget};
use sluice_model::node_pool::NodePool;

use crate::api::ApiError;
use crate::output::{either, Format};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Why a pod did or did not trigger a scale-up, or why a node is or
    /// is not being removed.
    #[command(subcommand)]
    Explain(Explain),
    /// A dry run of the autoscaler's next loop on the live cluster: what
    /// would be added, what removed, and why. Writes nothing.
    Simulate,
}

#[derive(Debug, Subcommand)]
pub enum Explain {
    /// A pending pod, `NAMESPACE/NAME`: pool by pool.
    Pod { pod: String },
    /// A node: utilisation, unneeded time left, the blocking pod and its
    /// reason, the budget.
    Node { name: String },
}

pub fn run(cmd: Command, kubeconfig: Option<&Path>, format: Format) -> u8 {
    crate::api::run(kubeconfig, |client| async move {
        let decision = decide(&client).await?;
        let text = answer(&cmd, &decision, format)?;
        print!("{text}");
        Ok(crate::exit::OK)
    })
}

/// The answer to `cmd` from `decision`. Pure.
fn answer(cmd: &Command, decision: &Decision, format: Format) -> Result<String, ApiError> {
    Ok(match cmd {
        Command::Explain(Explain::Pod { pod }) => {
            let key = if pod.contains('/') {
                pod.clone()
            } else {
                format!("default/{pod}")
            };
            let (Some(text), Some(v)) = (
                explain::pod(decision, &key),
                explain::pod_json(decision, &key),
            ) else {
                return Err(ApiError::Input(format!(
                    "pod {key:?} is not pending unschedulable: the autoscaler has nothing to say about it"
                )));
            };
            either(format, || text, &v)
        }
        Command::Explain(Explain::Node { name }) => {
            let (Some(text), Some(v)) = (
                explain::node(decision, name),
                explain::node_json(decision, name),
            ) else {
                return Err(ApiError::Input(format!(
                    "node {name:?} is not one the autoscaler judges (no such node, or not in a pool)"
                )));
            };
            either(format, || text, &v)
        }
        Command::Simulate => either(
            format,
            || explain::simulation(decision),
            &explain::simulation_json(decision),
        ),
    })
}

/// Every `K` the API holds, in every namespace for a namespaced kind.
async fn list<K>(client: &Client, what: &str) -> Result<Vec<K>, ApiError>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| ApiError::of(format!("listing {what}"), e))
}

/// The loop's options as it published them; the defaults before it has.
async fn options(client: &Client) -> Result<Options, ApiError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), status::NAMESPACE);
    let cm = api.get_opt(status::NAME).await.map_err(|e| {
        ApiError::of(
            format!("ConfigMap {}/{}", status::NAMESPACE, status::NAME),
            e,
        )
    })?;
    let published = cm
        .as_ref()
        .and_then(|c| c.metadata.annotations.as_ref()?.get(FLAGS_ANNOTATION))
        .and_then(|v| Flags::options_from(v));
    Ok(published.unwrap_or_default())
}

/// The next decision, as the loop would make it now.
async fn decide(client: &Client) -> Result<Decision, ApiError> {
    let nodes: Vec<Node> = list(client, "nodes").await?;
    let pods: Vec<Pod> = list(client, "pods").await?;
    let pools: Vec<NodePool> = list(client, "node pools").await?;
    let pdbs: Vec<PodDisruptionBudget> = list(client, "pod disruption budgets").await?;
    let clusters: Vec<Cluster> = list(client, "clusters").await?;
    let options = options(client).await?;
    let objects = Objects::new(nodes, pods, pools, pdbs, &clusters);
    let (state, unreadable) = memory::read(&objects.pools);
    for pool in unreadable {
        eprintln!("warning: the autoscaler's memory of node pool {pool:?} is unreadable; deciding as the loop would, afresh");
    }
    Ok(sluice_autoscaler::decide(
        &objects.snapshot(&options),
        &state,
        Timestamp::now(),
    ))
}
