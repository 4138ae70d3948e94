//! A small cluster in memory: the API applies the plans of both
//! controllers, a kubelet makes pods Ready, and the clock moves only when
//! told. Shared by the rollout tests.

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_workloads::deployment::{self, ReplicaSetAction};
use sluice_workloads::replica_set::{self, PodAction};

pub fn start() -> Timestamp {
    "2026-03-01T00:00:00Z".parse().unwrap()
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `web` in `ns`, selecting `app=web`, image `web:<version>`.
pub fn deployment(replicas: i32, strategy: DeploymentStrategy, version: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("d-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&[("app", "web")])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some(format!("web:{version}")),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            strategy: Some(strategy),
            revision_history_limit: Some(10),
            progress_deadline_seconds: Some(600),
            ..Default::default()
        },
        status: None,
    }
}

pub fn rolling(surge: IntOrString, unavailable: IntOrString) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(surge),
            max_unavailable: Some(unavailable),
        }),
    }
}

pub fn recreate() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    }
}

pub struct Cluster {
    pub now: Timestamp,
    pub d: Deployment,
    pub rss: Vec<ReplicaSet>,
    pub pods: Vec<Pod>,
    serial: u32,
}

impl Cluster {
    pub fn new(d: Deployment) -> Self {
        Cluster {
            now: start(),
            d,
            rss: Vec::new(),
            pods: Vec::new(),
            serial: 0,
        }
    }

    fn next(&mut self) -> u32 {
        self.serial += 1;
        self.serial
    }

    /// One Deployment sync, its writes applied; the plan for inspection.
    pub fn sync_deployment(&mut self) -> deployment::Plan {
        let plan = deployment::reconcile(&self.d, &self.rss, &self.pods, self.now).unwrap();
        for a in &plan.actions {
            match a {
                ReplicaSetAction::Create(rs) => {
                    let mut rs = (**rs).clone();
                    let n = self.next();
                    rs.metadata.uid = Some(format!("rs-uid-{n}"));
                    rs.metadata.creation_timestamp = Some(Time(self.now));
                    rs.metadata.generation = Some(1);
                    assert!(self.rss.iter().all(|r| r.metadata.name != rs.metadata.name));
                    self.rss.push(rs);
                }
                ReplicaSetAction::Update(rs) => {
                    let slot = self
                        .rss
                        .iter_mut()
                        .find(|r| r.metadata.name == rs.metadata.name)
                        .expect("update of a ReplicaSet that exists");
                    let mut rs = (**rs).clone();
                    if rs.spec != slot.spec {
                        rs.metadata.generation = Some(slot.metadata.generation.unwrap_or(0) + 1);
                    }
                    *slot = rs;
                }
                ReplicaSetAction::Delete { name, .. } => {
                    self.rss.retain(|r| r.metadata.name.as_ref() != Some(name));
                }
            }
        }
        if let Some(rev) = &plan.revision {
            self.d
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(deployment::REVISION.into(), rev.clone());
        }
        self.d.status = Some(plan.status.clone());
        plan
    }

    /// One sync of every ReplicaSet, its writes applied, then the status
    /// it reports afterwards.
    pub fn sync_replica_sets(&mut self) {
        for k in 0..self.rss.len() {
            let plan = replica_set::reconcile(&self.rss[k], &self.pods, self.now).unwrap();
            for a in plan.actions {
                match a {
                    PodAction::Create(p) => {
                        let mut p = *p;
                        let n = self.next();
                        let name = format!("{}{n}", p.metadata.generate_name.clone().unwrap());
                        p.metadata.name = Some(name);
                        p.metadata.uid = Some(format!("pod-uid-{n}"));
                        p.metadata.creation_timestamp = Some(Time(self.now));
                        p.status = Some(PodStatus {
                            phase: Some("Pending".into()),
                            ..Default::default()
                        });
                        self.pods.push(p);
                    }
                    PodAction::Delete { name, .. } => {
                        self.pods
                            .retain(|p| p.metadata.name.as_ref() != Some(&name));
                    }
                    PodAction::Adopt {
                        name,
                        owner_references,
                        ..
                    }
                    | PodAction::Release {
                        name,
                        owner_references,
                        ..
                    } => {
                        let p = self
                            .pods
                            .iter_mut()
                            .find(|p| p.metadata.name.as_ref() == Some(&name))
                            .unwrap();
                        p.metadata.owner_references = Some(owner_references);
                    }
                }
            }
            let after = replica_set::reconcile(&self.rss[k], &self.pods, self.now).unwrap();
            assert!(after.actions.is_empty(), "{:?}", after.actions);
            self.rss[k].status = Some(after.status);
        }
    }

    /// The kubelet starts up to `count` pods that are not Ready yet, in
    /// creation order.
    pub fn make_ready(&mut self, count: usize) -> usize {
        let now = self.now;
        let mut done = 0;
        for p in self.pods.iter_mut() {
            if done == count {
                break;
            }
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                continue;
            }
            p.spec.get_or_insert_with(Default::default).node_name = Some("n1".into());
            p.status = Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(now)),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            done += 1;
        }
        done
    }

    pub fn tick(&mut self, secs: i64) {
        self.now += SignedDuration::from_secs(secs);
    }

    /// Pods that exist (none is ever left terminating here).
    pub fn total_pods(&self) -> usize {
        self.pods.len()
    }

    /// Pods Ready for longer than the Deployment's `minReadySeconds`.
    pub fn available_pods(&self) -> usize {
        let min_ready =
            SignedDuration::from_secs(i64::from(self.d.spec.min_ready_seconds.unwrap_or(0)));
        self.pods
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.type_ == "Ready"
                                && c.status == "True"
                                && (min_ready.is_zero()
                                    || c.last_transition_time.as_ref().unwrap().0 + min_ready
                                        < self.now)
                        })
                    })
            })
            .count()
    }

    /// Pods of the image `web:<version>`.
    pub fn pods_of(&self, version: &str) -> usize {
        let image = format!("web:{version}");
        self.pods
            .iter()
            .filter(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image.as_str())
            })
            .count()
    }

    /// `spec.replicas` of each ReplicaSet, by image.
    pub fn sizes(&self) -> BTreeMap<String, i32> {
        self.rss
            .iter()
            .map(|r| {
                let t = r.spec.template.as_ref().unwrap();
                let image = t.spec.as_ref().unwrap().containers[0]
                    .image
                    .clone()
                    .unwrap();
                (image, r.spec.replicas.unwrap())
            })
            .collect()
    }

    /// Change the image, as `kubectl set image` does.
    pub fn set_version(&mut self, version: &str) {
        let spec = self.d.spec.template.spec.as_mut().unwrap();
        spec.containers[0].image = Some(format!("web:{version}"));
        self.bump_generation();
    }

    pub fn bump_generation(&mut self) {
        let g = self.d.metadata.generation.unwrap_or(0);
        self.d.metadata.generation = Some(g + 1);
    }

    pub fn condition(&self, type_: &str) -> Option<(String, String)> {
        self.d
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_.as_deref() == Some(type_))
            .map(|c| (c.status.clone().unwrap(), c.reason.clone().unwrap()))
    }

    /// Sync everything until nothing changes and every pod is Ready.
    pub fn settle(&mut self) {
        for _ in 0..100 {
            let before = (self.rss.clone(), self.pods.len(), self.d.status.clone());
            self.sync_deployment();
            self.sync_replica_sets();
            let readied = self.make_ready(usize::MAX);
            self.sync_replica_sets();
            self.tick(1);
            let after = (self.rss.clone(), self.pods.len(), self.d.status.clone());
            if readied == 0 && before == after && self.available_pods() == self.pods.len() {
                return;
            }
        }
        panic!("did not settle");
    }
}
