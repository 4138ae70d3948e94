//! The sync loop: poll the state source, compute what the node must hold
//! (pure, in `control`), then carry it out on the engine and the host.
//!
//! A state that fails validation or computation is rejected before anything
//! is touched, so the running datapath is never half-updated by bad input.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use tracing::{info, warn};

use crate::control::build_content;
use crate::control::pods::{desired_pod_links, PodLinkSpec};
use crate::control::routes::{desired_routes, diff, PodRoute};
use crate::engine::Engine;
use crate::netlink;
use crate::state::source::{StateSource, Update};
use crate::state::DesiredState;
use crate::status::{write_status, Status};

pub struct Runner {
    node: String,
    source: Box<dyn StateSource>,
    engine: Box<dyn Engine>,
    routes: Vec<PodRoute>,
    pods: BTreeMap<String, PodLinkSpec>,
    status: Status,
    status_path: Option<PathBuf>,
}

impl Runner {
    pub fn new(
        node: String,
        source: Box<dyn StateSource>,
        engine: Box<dyn Engine>,
        status_path: Option<PathBuf>,
    ) -> Self {
        let status = Status {
            datapath: engine.kind().to_string(),
            ..Status::default()
        };
        Runner {
            node,
            source,
            engine,
            routes: Vec::new(),
            pods: BTreeMap::new(),
            status,
            status_path,
        }
    }

    /// One poll of the source; applies a new state if there is one.
    pub fn tick(&mut self) {
        match self.source.poll() {
            Update::Unchanged => {
                self.publish();
                return;
            }
            Update::Rejected(e) => {
                warn!(error = %e, "desired state rejected; keeping the running state");
                self.status.synced = false;
                self.status.error = Some(e);
            }
            Update::State(s) => match self.apply(&s) {
                Ok(()) => {
                    self.status.generation += 1;
                    self.status.synced = true;
                    self.status.error = None;
                    info!(generation = self.status.generation, "desired state applied");
                }
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "applying desired state failed");
                    self.status.synced = false;
                    self.status.error = Some(format!("{e:#}"));
                }
            },
        }
        self.publish();
    }

    fn apply(&mut self, state: &DesiredState) -> Result<()> {
        // Everything that can reject the state is computed before any change.
        let content = build_content(state, &self.node)?;
        let want_pods: BTreeMap<String, PodLinkSpec> = desired_pod_links(state, &self.node)
            .into_iter()
            .map(|p| (p.key.clone(), p))
            .collect();
        let want_routes = desired_routes(state, &self.node);

        // Pods first, so endpoints the maps point at are reachable.
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|k| want_pods.get(*k) != self.pods.get(*k))
            .cloned()
            .collect();
        for key in gone {
            self.engine.unplug_pod(&key)?;
            self.pods.remove(&key);
        }
        for (key, spec) in &want_pods {
            if !self.pods.contains_key(key) {
                self.engine.plug_pod(spec)?;
                self.pods.insert(key.clone(), spec.clone());
            }
        }

        self.engine.apply(&content)?;

        let (add, del) = diff(&self.routes, &want_routes);
        for r in &del {
            netlink::del_route(&r.dst.to_string(), Some(r.via), None)?;
            self.routes.retain(|x| x != r);
        }
        for r in &add {
            netlink::add_route(&r.dst.to_string(), Some(r.via), None)?;
            self.routes.push(*r);
        }

        // Per-VIP marker entries (port 0) are not frontends.
        self.status.services = content
            .tables
            .services
            .keys()
            .filter(|k| k.port != 0)
            .count();
        self.status.endpoints = content.tables.endpoints.len();
        self.status.pods = self.pods.len();
        Ok(())
    }

    fn publish(&mut self) {
        self.status.counters = self
            .engine
            .counters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        if let Some(path) = &self.status_path {
            if let Err(e) = write_status(path, &self.status) {
                warn!(path = %path.display(), error = %e, "writing status file");
            }
        }
    }

    /// Remove what this agent added to the host, then stop the engine.
    pub fn shutdown(mut self) -> Result<()> {
        for r in std::mem::take(&mut self.routes) {
            if let Err(e) = netlink::del_route(&r.dst.to_string(), Some(r.via), None) {
                warn!(error = %e, "removing route on shutdown");
            }
        }
        for key in std::mem::take(&mut self.pods).into_keys() {
            if let Err(e) = self.engine.unplug_pod(&key) {
                warn!(pod = %key, error = %e, "unplugging pod on shutdown");
            }
        }
        self.engine.shutdown()
    }
}
