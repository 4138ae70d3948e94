//! What a node provider makes and reports: instances, and the request to
//! create one. These are also the JSON the exec provider's scripts read
//! and print (camelCase, times in RFC 3339).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use sluice_model::duration::Duration;
use sluice_model::node_pool::{NodePool, NodeTaint};
use sluice_model::quantity;

use crate::PlanError;

/// One machine (VM, namespace, simulated node) of a pool, as its provider
/// reports it. Its name is the name of the Node it registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    try_from = "InstanceWire",
    into = "InstanceWire"
)]
pub struct Instance {
    pub name: String,
    pub pool: String,
    pub zone: String,
    /// The Kubernetes version its kubelet runs (empty: unknown).
    pub version: String,
    pub state: InstanceState,
    /// When the provider started creating it; the node startup timeout
    /// counts from here.
    pub created_at: Timestamp,
}

/// An instance's state at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceState {
    /// Being made; not yet booted.
    Creating,
    /// Booted; its agent registers (or registered) its Node.
    Running,
    /// Going away; it no longer counts towards the pool's size.
    Deleting,
    /// Broken for good, with the provider's reason; it is replaced.
    Failed(String),
}

/// The JSON shape: the state is a string, a failure's reason a field of
/// its own (`"state": "FAILED", "message": "disk full"`), which script
/// writers find easier than a tagged enum.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InstanceWire {
    name: String,
    pool: String,
    zone: String,
    #[serde(default)]
    version: String,
    state: WireState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    created_at: Time,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum WireState {
    Creating,
    Running,
    Deleting,
    Failed,
}

impl From<Instance> for InstanceWire {
    fn from(i: Instance) -> Self {
        let (state, message) = match i.state {
            InstanceState::Creating => (WireState::Creating, None),
            InstanceState::Running => (WireState::Running, None),
            InstanceState::Deleting => (WireState::Deleting, None),
            InstanceState::Failed(why) => (WireState::Failed, Some(why)),
        };
        InstanceWire {
            name: i.name,
            pool: i.pool,
            zone: i.zone,
            version: i.version,
            state,
            message,
            created_at: Time(i.created_at),
        }
    }
}

impl TryFrom<InstanceWire> for Instance {
    type Error = String;

    fn try_from(w: InstanceWire) -> Result<Self, String> {
        if w.name.is_empty() {
            return Err("name: may not be empty".into());
        }
        let state = match w.state {
            WireState::Creating => InstanceState::Creating,
            WireState::Running => InstanceState::Running,
            WireState::Deleting => InstanceState::Deleting,
            WireState::Failed => {
                InstanceState::Failed(w.message.unwrap_or_else(|| "no reason given".into()))
            }
        };
        Ok(Instance {
            name: w.name,
            pool: w.pool,
            zone: w.zone,
            version: w.version,
            state,
            created_at: w.created_at.0,
        })
    }
}

/// What every node of a pool is made from: the pool's `config` with its
/// quantities read as integers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// GKE's spelling of effects (`NO_SCHEDULE`).
    #[serde(default)]
    pub taints: Vec<NodeTaint>,
    #[serde(default)]
    pub spot: bool,
}

/// Node label holding the [`NodeSpec::fingerprint`] of the config a node
/// was made from, so an upgrade tells old nodes from new when the config
/// changes but the version does not. A Node without it predates the label
/// and is taken to be of its pool's current config.
pub const CONFIG_LABEL: &str = "sluice.dev/node-config";

/// Node label holding how long the node runs before its provider ends it
/// (GKE's `maxRunDuration`, `"3600s"`), counted from the instance's
/// `createdAt`. Carried as a label of the spec so that whoever makes a
/// node (the pool loop, an upgrade) hands it to the provider unchanged,
/// the exec provider's scripts read it with the rest of the config, and
/// the Node shows its limit. Absent: the node runs until deleted.
pub const MAX_RUN_DURATION_LABEL: &str = "sluice.dev/max-run-duration";

impl NodeSpec {
    /// What a node needs a new machine to change (capacity, spot; labels
    /// and taints change in place), as a label value:
    /// `cpu4000m-mem17179869184-standard`.
    pub fn fingerprint(&self) -> String {
        let kind = if self.spot { "spot" } else { "standard" };
        format!("cpu{}m-mem{}-{kind}", self.cpu_milli, self.memory_bytes)
    }

    /// This spec with [`CONFIG_LABEL`] set, for a creation.
    pub fn labelled(&self) -> NodeSpec {
        let mut spec = self.clone();
        spec.labels
            .insert(CONFIG_LABEL.to_owned(), self.fingerprint());
        spec
    }

    /// How long a node of this spec runs ([`MAX_RUN_DURATION_LABEL`]);
    /// `None` without the label, or with one that is not a positive GKE
    /// duration (nothing a pool writes: the limit is then not enforced
    /// rather than the node ended at once).
    pub fn max_run_duration(&self) -> Option<Duration> {
        self.labels
            .get(MAX_RUN_DURATION_LABEL)?
            .parse::<Duration>()
            .ok()
            .filter(|d| *d > Duration::ZERO)
    }

    /// When a node of this spec made at `created_at` is ended by its
    /// provider, if ever.
    pub fn run_ends_at(&self, created_at: Timestamp) -> Option<Timestamp> {
        let d = self.max_run_duration()?;
        Some(crate::later(
            created_at,
            SignedDuration::from_nanos(d.as_nanos()),
        ))
    }

    /// The pool's `spec.config`, its capacity parsed (`"4"` is 4000
    /// milli-CPU, `"16Gi"` 17 179 869 184 bytes).
    pub fn of_pool(pool: &NodePool) -> Result<NodeSpec, PlanError> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let config = &pool.spec.config;
        let read = |field: &'static str, value: Result<i128, quantity::QuantityError>| {
            let value = value.map_err(|source| PlanError::Capacity {
                pool: name.clone(),
                field,
                source,
            })?;
            i64::try_from(value).map_err(|_| PlanError::CapacityTooLarge {
                pool: name.clone(),
                field,
                value,
            })
        };
        let mut labels = config.labels.clone();
        if let Some(d) = pool.spec.max_run_duration() {
            labels.insert(MAX_RUN_DURATION_LABEL.to_owned(), d.to_string());
        }
        Ok(NodeSpec {
            cpu_milli: read(
                "spec.config.capacity.cpu",
                quantity::milli(&config.capacity.cpu),
            )?,
            memory_bytes: read(
                "spec.config.capacity.memory",
                quantity::units(&config.capacity.memory),
            )?,
            labels,
            taints: config.taints.clone(),
            spot: config.spot,
        })
    }
}

/// A request to create one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateNode {
    pub pool: String,
    pub zone: String,
    /// Chosen by the reconciler ([`crate::naming`]); the Node registers
    /// under it.
    pub name: String,
    /// The pool's `spec.version` (else the cluster's).
    pub version: String,
    pub config: NodeSpec,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn instances_read_and_write_the_script_shape() {
        let text = r#"{"name":"p-a-bcdf","pool":"p","zone":"zone-a","version":"1.33.2",
            "state":"FAILED","message":"disk full","createdAt":"2026-11-23T01:00:00Z"}"#;
        let i: Instance = serde_json::from_str(text).unwrap();
        assert_eq!(i.state, InstanceState::Failed("disk full".into()));
        assert_eq!(i.created_at, at("2026-11-23T01:00:00Z"));
        let back = serde_json::to_value(&i).unwrap();
        assert_eq!(back["state"], "FAILED");
        assert_eq!(back["message"], "disk full");
        assert_eq!(back["createdAt"], "2026-11-23T01:00:00Z");
        let again: Instance = serde_json::from_value(back).unwrap();
        assert_eq!(again, i);
    }

    #[test]
    fn bad_instances_name_what_is_wrong() {
        let cases = [
            (
                r#"{"name":"","pool":"p","zone":"z","state":"RUNNING","createdAt":"2026-11-23T01:00:00Z"}"#,
                "name",
            ),
            (
                r#"{"name":"n","pool":"p","zone":"z","state":"BOOTING","createdAt":"2026-11-23T01:00:00Z"}"#,
                "BOOTING",
            ),
            (
                r#"{"name":"n","pool":"p","zone":"z","state":"RUNNING"}"#,
                "createdAt",
            ),
            (
                r#"{"name":"n","pool":"p","zone":"z","state":"RUNNING","createdAt":"2026-11-23T01:00:00Z","colour":1}"#,
                "colour",
            ),
        ];
        for (text, names) in cases {
            let err = serde_json::from_str::<Instance>(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(names), "{text}: {err}");
        }
    }

    #[test]
    fn node_spec_reads_the_pool_capacity() {
        let mut pool = NodePool::new("p", Default::default());
        pool.spec.config.capacity.cpu = sluice_model::k8s::Quantity("1500m".into());
        pool.spec.config.capacity.memory = sluice_model::k8s::Quantity("2Gi".into());
        let spec = NodeSpec::of_pool(&pool).unwrap();
        assert_eq!((spec.cpu_milli, spec.memory_bytes), (1500, 2 << 30));
        // spec: U1 — a config change tells old nodes from new by this label.
        assert_eq!(spec.fingerprint(), "cpu1500m-mem2147483648-standard");
        assert_eq!(
            spec.labelled().labels[CONFIG_LABEL],
            "cpu1500m-mem2147483648-standard"
        );
        let spot = NodeSpec {
            spot: true,
            ..spec.clone()
        };
        assert_ne!(spot.fingerprint(), spec.fingerprint());

        // spec: A5 — the run limit rides with the spec, and a flex-start
        // pool's nodes run seven days when it names none.
        assert_eq!(spec.max_run_duration(), None);
        assert_eq!(spec.run_ends_at(at("2026-11-23T01:00:00Z")), None);
        pool.spec.config.max_run_duration = Some(Duration::from_secs(3600));
        let limited = NodeSpec::of_pool(&pool).unwrap();
        assert_eq!(limited.labels[MAX_RUN_DURATION_LABEL], "3600s");
        assert_eq!(
            limited.run_ends_at(at("2026-11-23T01:00:00Z")),
            Some(at("2026-11-23T02:00:00Z"))
        );
        assert_eq!(limited.fingerprint(), spec.fingerprint());
        pool.spec.config.max_run_duration = None;
        pool.spec.config.flex_start = true;
        let flex = NodeSpec::of_pool(&pool).unwrap();
        assert_eq!(flex.labels[MAX_RUN_DURATION_LABEL], "604800s");
        // A label written by hand that is no positive duration limits nothing.
        let mut odd = flex.clone();
        for bad in ["soon", "-5s", "0s"] {
            odd.labels.insert(MAX_RUN_DURATION_LABEL.into(), bad.into());
            assert_eq!(odd.max_run_duration(), None, "{bad}");
        }

        pool.spec.config.capacity.memory = sluice_model::k8s::Quantity("lots".into());
        let err = NodeSpec::of_pool(&pool).unwrap_err().to_string();
        assert!(err.contains("spec.config.capacity.memory"), "{err}");
    }
}
