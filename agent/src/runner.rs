//! The sync loop: poll the state source, compute what the node must hold
//! (pure, in `control`), then carry it out on the engine, the host and the
//! health servers.
//!
//! A state that fails validation or computation is rejected before anything
//! is touched, so the running datapath is never half-updated by bad input.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use tracing::{info, warn};

use crate::control::disruption::pod_health;
use crate::control::overlay::LiveConditions;
use crate::control::overlay::{with_overlay, Overlay};
use crate::control::pods::{desired_pod_links, PodLinkSpec};
use crate::control::routes::{desired_routes, diff, PodRoute};
use crate::control::snat::{frontend_names, name_exhaustion, ExhaustionLog};
use crate::control::{build_content, ControlError, MapContent, SnatPorts};
use crate::engine::Engine;
use crate::health::entries::lowered_entries;
use crate::health::{service_health_entries, HealthHandle, ServiceHealthEntry};
use crate::metrics::MetricsSnapshot;
use crate::netlink;
use crate::pods::{
    DrainProgress, EvictionOutcome, EvictionReason, PodEvent, PodManager, SharedBudgets,
};
use crate::state::advertised::Advertised;
use crate::state::api::drain::{self as api_drain, ApiDrains};
use crate::state::api::{DrainCalls, PodReport, PodStatusSink};
use crate::state::source::{StateSource, Update};
use crate::state::DesiredState;
use crate::status::{write_status, BudgetReport, DrainStatus, PendingPod, PodEviction, Status};

/// How long a failed apply waits before it is tried again: kube-proxy
/// retries on its next sync rather than in a tight loop.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Default of `--shutdown-grace`.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub struct Runner {
    node: String,
    /// The node's SNAT source ports (`--snat-port-range`).
    snat_ports: SnatPorts,
    /// When SNAT port exhaustion was last logged, per endpoint.
    exhaustion_log: ExhaustionLog,
    /// The desired state's frontend ids with their Service and port names,
    /// derived once per state when there is exhaustion to name.
    frontend_names: Option<HashMap<u32, (String, String)>>,
    source: Box<dyn StateSource>,
    engine: Box<dyn Engine>,
    health: HealthHandle,
    metrics: Arc<Mutex<MetricsSnapshot>>,
    pods_rt: PodManager,
    /// The PodDisruptionBudgets `pods_rt` asks before an eviction (E6).
    budgets: SharedBudgets,
    /// The drain in progress, as requested by the Node's annotation.
    drain: Option<EvictionReason>,
    /// The last valid desired state, and what the agent observes of its own
    /// pods on top of it.
    desired: Option<DesiredState>,
    /// Which of the pods the cluster's slices still advertise ready, and
    /// since when not (E6: an evicted pod's SIGTERM waits for them).
    advertised: Advertised,
    overlay: Overlay,
    /// `desired`/`overlay` changed since the last successful apply.
    dirty: bool,
    /// The map content computed when `desired` was accepted, and the
    /// overlay it was computed with: the first sync uses it rather than
    /// building the Maglev tables a second time.
    planned: Option<(Overlay, MapContent)>,
    /// `/healthz` was told of an update the source is still reading or
    /// validating (`StateSource::busy_since`).
    source_queued: bool,
    /// Large allocations were freed this tick: return pages at its end.
    trim_due: bool,
    retry_at: Option<Instant>,
    /// Health entries whose port could not be opened yet; offered again on
    /// every tick until they bind.
    health_retry: Option<Vec<ServiceHealthEntry>>,
    /// What the health servers were last given.
    health_offered: Vec<ServiceHealthEntry>,
    /// Cap on a pod's grace when the agent itself shuts down.
    shutdown_grace: Duration,
    routes: Vec<PodRoute>,
    pods: BTreeMap<String, PodLinkSpec>,
    /// Whether what a previous agent plugged for pods no longer wanted is
    /// gone (once, after the first sync that plugged every pod).
    released_unclaimed: bool,
    status: Status,
    status_path: Option<PathBuf>,
    /// Where this node's pods' status goes (the API server); none with a
    /// state file.
    status_sink: Option<Box<dyn PodStatusSink>>,
    /// Pods being deleted through the API, and the end of the grace the
    /// manager was last given for each.
    deletions: BTreeMap<String, Option<SystemTime>>,
    /// With the API as the source, drains and `sluice.dev/evict` go
    /// through it: cordon, the Eviction API, the deletion that follows.
    api_drain: Option<(ApiDrains, Box<dyn DrainCalls>)>,
}

impl Runner {
    pub fn new(
        node: String,
        source: Box<dyn StateSource>,
        engine: Box<dyn Engine>,
        health: HealthHandle,
        metrics: Arc<Mutex<MetricsSnapshot>>,
        mut pods_rt: PodManager,
        status_path: Option<PathBuf>,
    ) -> Self {
        let budgets = SharedBudgets::default();
        pods_rt.set_pdb_gate(Box::new(budgets.clone()));
        // spec: E6, H3 — SIGTERM waits until the tick has published the
        // pod's terminating endpoints (see `tick`).
        pods_rt.hold_sigterm(true);
        let status = Status {
            datapath: engine.kind().to_string(),
            ..Status::default()
        };
        Runner {
            node,
            snat_ports: SnatPorts::default(),
            exhaustion_log: ExhaustionLog::default(),
            frontend_names: None,
            source,
            engine,
            health,
            metrics,
            pods_rt,
            budgets,
            drain: None,
            desired: None,
            advertised: Advertised::default(),
            overlay: Overlay::new(),
            dirty: false,
            planned: None,
            source_queued: false,
            trim_due: false,
            retry_at: None,
            health_retry: None,
            health_offered: Vec::new(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            routes: Vec::new(),
            pods: BTreeMap::new(),
            released_unclaimed: false,
            status,
            status_path,
            status_sink: None,
            deletions: BTreeMap::new(),
            api_drain: None,
        }
    }

    /// Drain through the API server (`calls`) rather than stopping the
    /// node's pods locally: the Node is cordoned, each pod evicted through
    /// the Eviction API (budgets decided there), and stopped when its
    /// deletion arrives, as with `kubectl drain`.
    pub fn set_drain_calls(&mut self, calls: Box<dyn DrainCalls>) {
        self.pods_rt.set_annotated_evictions(false);
        self.api_drain = Some((ApiDrains::default(), calls));
    }

    /// Write what the agent observes of its pods back through `sink`.
    pub fn set_status_sink(&mut self, sink: Box<dyn PodStatusSink>) {
        self.status_sink = Some(sink);
    }

    /// The map content of `state` on this node, with its SNAT ports.
    fn content_of(&self, state: &DesiredState) -> Result<MapContent, ControlError> {
        Ok(build_content(state, &self.node)?.with_snat_ports(self.snat_ports))
    }

    /// The node's SNAT source ports (`--snat-port-range`), from the next
    /// sync on.
    pub fn set_snat_ports(&mut self, ports: SnatPorts) {
        self.snat_ports = ports;
    }

    /// Cap on each pod's grace when the agent shuts down (`--shutdown-grace`).
    pub fn set_shutdown_grace(&mut self, grace: Duration) {
        self.shutdown_grace = grace;
    }

    /// Replace what the agent observes of its own pods; applied on the next
    /// tick if it changed anything. Counts that fall reach the `Local`
    /// health servers at once, whatever becomes of the map update (H3).
    pub fn set_overlay(&mut self, overlay: Overlay) {
        if overlay != self.overlay {
            self.overlay = overlay;
            self.mark_dirty();
            self.lower_health();
        }
    }

    /// spec: H3, E6 — endpoints that turned terminating or unready stop
    /// counting for the `Local` check before the maps are touched, so a
    /// failing or delayed map update cannot keep a draining node healthy.
    fn lower_health(&mut self) {
        let Some(desired) = &self.desired else {
            return;
        };
        let live = with_overlay(desired, &self.node, &self.overlay);
        let lowered = lowered_entries(
            &self.health_offered,
            &service_health_entries(&live, &self.node),
        );
        if lowered != self.health_offered {
            self.health.set_services(&lowered);
            self.health_offered = lowered;
        }
    }

    fn mark_dirty(&mut self) {
        if !self.dirty {
            self.health.record_queued();
        }
        self.dirty = true;
        self.retry_at = None;
    }

    /// One poll of the source; applies a new state if there is one.
    /// Notified when the source has an update ready (see
    /// [`StateSource::waker`]).
    pub fn source_waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        self.source.waker()
    }

    pub fn tick(&mut self) {
        match self.source.poll() {
            Update::Unchanged => {}
            Update::Rejected(e) => self.reject(e),
            // The file went back to what runs (after a rejected version):
            // nothing to change, only the error to clear.
            Update::State(s) if self.desired.as_ref() == Some(&s) => {
                if !self.dirty {
                    self.status.synced = true;
                    self.status.error = None;
                }
            }
            Update::State(s) => match self.plan(&s) {
                // spec: H1, H3, P2 — nothing changes (no pod stopped, no map
                // touched) until the new state is validated and planned
                // whole; a state this node cannot run is rejected like a
                // file that does not parse.
                Err(e) => self.reject(format!("{e:#}")),
                Ok(plan) => {
                    self.sync_pods(&s);
                    self.advertised.observe(&s, Instant::now());
                    self.desired = Some(s);
                    self.frontend_names = None;
                    self.planned = Some(plan);
                    self.mark_dirty();
                    self.trim_due = true;
                }
            },
        }
        self.watch_source();
        if let Some(d) = &self.desired {
            self.refresh_budgets(d);
        }
        self.drive_api_drain();
        let events = self.pods_rt.tick(Instant::now());
        self.handle_pod_events(events);
        self.refresh_overlay();
        if let Some(entries) = self.health_retry.take() {
            self.offer_health(entries);
        }
        let due = self.retry_at.is_none_or(|t| Instant::now() >= t);
        if self.dirty && due {
            self.sync();
        }
        // spec: E6, H3, P5 — only now, with the terminating endpoints in the
        // health servers (and in the maps unless their update failed and
        // waits for a retry), do evicted pods get SIGTERM.
        let events = match (&self.desired, self.status_sink.is_some()) {
            // spec: E6 — with the API as the source, the other nodes
            // route by the cluster's EndpointSlices: SIGTERM also waits
            // until those no longer call the pod ready and the other nodes
            // had time to apply that (bounded), or a client entering
            // elsewhere is sent to a closing pod.
            (Some(_), true) => {
                let now = Instant::now();
                let advertised = &self.advertised;
                self.pods_rt
                    .endpoints_published_unless(now, |key| advertised.holds(key, now))
            }
            _ => self.pods_rt.endpoints_published(Instant::now()),
        };
        self.handle_pod_events(events);
        self.report_pods();
        self.publish();
        if std::mem::take(&mut self.trim_due) {
            // A state was replaced, refused or applied: the old state, the
            // parse's garbage and the sync's working copies (overlaid state,
            // map content, the engine's copy) are gone by now. Give their
            // pages back rather than keep the high-water mark.
            crate::mem::trim();
        }
    }

    /// Everything that can refuse `state` on this node, computed before
    /// anything changes: the map content (this node's Node, its address),
    /// and whether the engine can hold it.
    fn plan(&self, state: &DesiredState) -> Result<(Overlay, MapContent)> {
        let live = with_overlay(state, &self.node, &self.overlay);
        let content = self.content_of(&live)?;
        self.engine.check_capacity(&content)?;
        Ok((self.overlay.clone(), content))
    }

    /// A new version that cannot be run: say so, keep everything running.
    fn reject(&mut self, e: String) {
        warn!(error = %e, "desired state rejected; keeping the running state");
        self.status.synced = false;
        self.status.error = Some(e);
        self.lock_metrics().sync_rejected += 1;
        self.trim_due = true;
    }

    /// A change the source is still reading or validating counts as a
    /// queued update (kube-proxy marks one when an event arrives), so a
    /// parse that never ends turns `/healthz` unhealthy after the health
    /// timeout, as a stuck sync does.
    fn watch_source(&mut self) {
        if self.source.busy_since().is_some() {
            // Idempotent: the oldest unapplied change is what counts, and a
            // sync in between does not make a stuck parse any younger.
            self.health.record_queued();
            self.source_queued = true;
        } else if std::mem::take(&mut self.source_queued) && !self.dirty {
            // Read and rejected (or unchanged): the running state is what
            // the node should run, nothing is pending any more.
            self.health.record_synced();
        }
    }

    fn sync(&mut self) {
        let Some(desired) = &self.desired else {
            return;
        };
        let live = with_overlay(desired, &self.node, &self.overlay);
        let started = Instant::now();
        let planned = match self.planned.take() {
            Some((overlay, content)) if overlay == self.overlay => Some(content),
            _ => None,
        };
        let result = self.apply(&live, planned);
        let took = started.elapsed();
        self.trim_due = true;
        match result {
            Ok(()) => {
                self.dirty = false;
                self.retry_at = None;
                self.health.record_synced();
                self.offer_health(service_health_entries(&live, &self.node));
                if let Some(n) = live.nodes.get(&self.node) {
                    self.health
                        .set_node_state(n.deleting, n.taints.iter().map(String::as_str));
                }
                self.status.generation += 1;
                self.status.synced = true;
                self.status.error = None;
                let mut m = self.lock_metrics();
                m.sync_ok += 1;
                m.sync_duration_sum += took;
                m.sync_duration_last = took;
                drop(m);
                self.count_endpoints(&live);
                info!(
                    generation = self.status.generation,
                    ms = took.as_millis() as u64,
                    "desired state applied"
                );
            }
            Err(e) => {
                warn!(error = %format!("{e:#}"), "applying desired state failed; retrying");
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                self.status.synced = false;
                self.status.error = Some(format!("{e:#}"));
                let mut m = self.lock_metrics();
                m.sync_failed += 1;
                m.sync_duration_sum += took;
                m.sync_duration_last = took;
            }
        }
    }

    fn apply(&mut self, state: &DesiredState, planned: Option<MapContent>) -> Result<()> {
        // Everything that can reject the state is computed before any change.
        // Planned content was checked when the state was accepted; content
        // rebuilt for a changed overlay is checked now.
        let content = match planned {
            Some(c) => c,
            None => {
                let c = self.content_of(state)?;
                self.engine.check_capacity(&c)?;
                c
            }
        };
        // A pod's link is plugged once its namespace exists.
        let sandboxes: BTreeMap<String, PathBuf> = self.pods_rt.sandboxes().into_iter().collect();
        let want_pods: BTreeMap<String, PodLinkSpec> = desired_pod_links(state, &self.node)
            .into_iter()
            .filter(|p| sandboxes.get(&p.key) == Some(&p.netns))
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
            self.pods_rt.set_network_ready(&key, false);
        }
        for (key, spec) in &want_pods {
            if !self.pods.contains_key(key) {
                self.engine.plug_pod(spec)?;
                self.pods.insert(key.clone(), spec.clone());
                // Processes start only now, so they can bind their pod IP.
                self.pods_rt.set_network_ready(key, true);
            }
        }
        // Every pod of the first state is plugged (the pod runtime made or
        // found their namespaces before this sync): what a previous agent
        // plugged beyond them belongs to pods deleted while none ran.
        if !self.released_unclaimed {
            self.engine.release_unclaimed()?;
            self.released_unclaimed = true;
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

    /// Hand this node's pods to the pod runtime and start or stop a drain
    /// the Node asks for.
    fn sync_pods(&mut self, state: &DesiredState) {
        let now = Instant::now();
        // A pod whose deletion began before the agent took it on is never
        // started (the kubelet does not start a deleted pod).
        let specs: Vec<_> = state
            .pods
            .values()
            .filter(|p| p.node == self.node)
            .filter(|p| !p.deleting || self.pods_rt.knows(&p.key))
            .map(|p| p.run.clone())
            .collect();
        if let Some(n) = state.nodes.get(&self.node) {
            self.pods_rt.set_pool(n.pool);
        }
        self.refresh_budgets(state);
        // Through the API the drain is cordon + evictions; what reaches
        // the pods here is their deletion.
        let want = state
            .nodes
            .get(&self.node)
            .and_then(|n| n.drain)
            .filter(|_| self.api_drain.is_none());
        // A drain starts before the pods are synced, so pods that arrive in
        // the same update as the cordon are held, not started and evicted.
        if let Some(reason) = want.filter(|_| want != self.drain) {
            let p = self.pods_rt.drain(reason, now);
            info!(
                reason = reason.as_str(),
                pending = p.pending.len(),
                "drain started"
            );
        }
        let events = self.pods_rt.sync(&specs, now);
        self.handle_pod_events(events);
        // Uncordon after: held pods no longer assigned are dropped first.
        if want.is_none() && self.drain.is_some() {
            let events = self.pods_rt.uncordon(now);
            self.handle_pod_events(events);
            info!("uncordoned");
        }
        self.drain = want;
        self.stop_deleted(state, now);
    }

    /// Pods whose API object is being deleted stop within what is left of
    /// their grace (`deletionTimestamp` − now): endpoints terminating,
    /// SIGTERM, SIGKILL at the end. Once nothing of them runs,
    /// [`Runner::report_pods`] has the sink delete the object.
    fn stop_deleted(&mut self, state: &DesiredState, now: Instant) {
        let deleting: BTreeMap<&str, Option<SystemTime>> = state
            .pods
            .values()
            .filter(|p| p.node == self.node && p.deleting)
            .map(|p| (p.key.as_str(), p.deletion_deadline))
            .collect();
        self.deletions
            .retain(|k, _| deleting.contains_key(k.as_str()));
        let wall = SystemTime::now();
        for (key, deadline) in deleting {
            if self.deletions.get(key) == Some(&deadline) {
                continue;
            }
            let grace = deadline
                .and_then(|d| d.duration_since(wall).ok())
                .unwrap_or(Duration::ZERO);
            info!(pod = %key, grace_s = grace.as_secs_f64(), "pod deleted through the API: stopping it");
            self.pods_rt.delete(key, grace, now);
            self.deletions.insert(key.to_string(), deadline);
        }
    }

    /// Hand the status sink every pod of this node as the agent sees it.
    fn report_pods(&mut self) {
        let (Some(sink), Some(desired)) = (self.status_sink.as_mut(), &self.desired) else {
            return;
        };
        let mut observed: BTreeMap<String, _> = self
            .pods_rt
            .observations()
            .into_iter()
            .map(|o| (o.key.clone(), o))
            .collect();
        let host_ips = desired
            .nodes
            .get(&self.node)
            .map(|n| n.addrs.clone())
            .unwrap_or_default();
        let reports: Vec<PodReport> = desired
            .pods
            .values()
            .filter(|p| p.node == self.node)
            .map(|p| PodReport {
                key: p.key.clone(),
                uid: p.uid.clone(),
                // A host-network pod's addresses are its node's.
                ips: if p.host_network {
                    host_ips.clone()
                } else {
                    p.ips.clone()
                },
                host_ips: host_ips.clone(),
                containers: p.run.containers.iter().map(|c| c.name.clone()).collect(),
                restart_policy: p.run.restart_policy,
                observed: observed.remove(&p.key),
                deletion_finished: p.deleting && self.pods_rt.has_ended(&p.key),
                reported: p.reported.clone(),
            })
            .collect();
        sink.report(&reports);
    }

    /// What the budgets see: the state's PDBs and pods, this node's pods as
    /// the agent observes them.
    fn refresh_budgets(&self, state: &DesiredState) {
        let mut b = self.budgets.lock();
        if state.pdbs.is_empty() {
            b.set_view(Vec::new(), Vec::new());
            return;
        }
        let local: BTreeMap<String, bool> = self
            .pods_rt
            .endpoint_states()
            .into_iter()
            .map(|e| (e.key, e.conditions.ready))
            .collect();
        b.set_view(
            state.pdbs.values().cloned().collect(),
            pod_health(state, &self.node, &local),
        );
    }

    /// Feed the drain the API's answers and the state, send what is due.
    fn drive_api_drain(&mut self) {
        let (Some((drains, calls)), Some(d)) = (self.api_drain.as_mut(), &self.desired) else {
            return;
        };
        let now = Instant::now();
        for (req, answer) in calls.answers() {
            drains.answer(&req, answer, now);
        }
        let wall = SystemTime::now();
        let Some(node) = api_drain::node_facts(d, &self.node, now, wall) else {
            return;
        };
        let pods = api_drain::pod_facts(d, &self.node, now, wall);
        for req in drains.plan(&node, &pods, now) {
            calls.send(req);
        }
    }

    fn handle_pod_events(&mut self, events: Vec<PodEvent>) {
        for e in events {
            if let (PodEvent::EvictionDone { key, outcome, .. }, Some((drains, _))) =
                (&e, self.api_drain.as_mut())
            {
                drains.stopped(key, *outcome);
            }
            match &e {
                PodEvent::EvictionDone { key, outcome, .. }
                    if !matches!(outcome, EvictionOutcome::Refused { .. }) =>
                {
                    self.unplug(key);
                }
                PodEvent::Removed { key } => self.unplug(key),
                PodEvent::SandboxReady { .. } => self.mark_dirty(),
                PodEvent::Error { key, message } => warn!(pod = %key, %message, "pod"),
                _ => {}
            }
            info!(event = ?e, "pod");
        }
    }

    fn unplug(&mut self, key: &str) {
        if self.pods.remove(key).is_some() {
            if let Err(e) = self.engine.unplug_pod(key) {
                warn!(pod = %key, error = %format!("{e:#}"), "unplugging pod");
            }
        }
        self.pods_rt.set_network_ready(key, false);
    }

    /// What the agent observes of its pods becomes their endpoints'
    /// conditions: for the pods it runs (not ready until their process runs
    /// and passes its probe), and for any pod it is evicting.
    fn refresh_overlay(&mut self) {
        let Some(desired) = &self.desired else {
            return;
        };
        const DOWN: LiveConditions = LiveConditions {
            ready: false,
            serving: false,
            terminating: false,
        };
        let mut overlay = Overlay::new();
        for p in desired.pods.values() {
            if p.node == self.node && p.run.runs_processes() {
                overlay.extend(p.ips.iter().map(|ip| (*ip, DOWN)));
            }
        }
        for ep in self.pods_rt.endpoint_states() {
            let runs = desired
                .pods
                .get(&ep.key)
                .is_some_and(|p| p.run.runs_processes());
            if !runs && !ep.conditions.terminating {
                continue;
            }
            let live = LiveConditions {
                ready: ep.conditions.ready,
                serving: ep.conditions.serving,
                terminating: ep.conditions.terminating,
            };
            overlay.extend(ep.ips.iter().map(|ip| (*ip, live)));
        }
        self.set_overlay(overlay);
    }

    /// Where the last drain stands (for the status file); kept after
    /// uncordon until the next drain begins.
    pub fn drain_progress(&self) -> Option<DrainProgress> {
        if let Some((drains, _)) = &self.api_drain {
            return drains.progress(Instant::now());
        }
        let p = self.pods_rt.drain_progress(Instant::now());
        p.reason.is_some().then_some(p)
    }

    fn offer_health(&mut self, entries: Vec<ServiceHealthEntry>) {
        let report = self.health.set_services(&entries);
        self.status.health_port_conflicts = report
            .conflicts
            .iter()
            .map(|(svc, port)| format!("{svc}:{port}"))
            .collect();
        self.lock_metrics().health_port_conflicts = report.conflicts.len() as u64;
        self.health_offered = entries.clone();
        if report.failed.is_empty() {
            return;
        }
        if self.health_retry.is_none() {
            warn!(ports = ?report.failed, "health-check ports could not be opened; retrying");
        }
        self.health_retry = Some(entries);
    }

    fn count_endpoints(&self, live: &DesiredState) {
        let (mut ready, mut term, mut not_ready) = (0, 0, 0);
        for ep in live.services.values().flat_map(|s| s.endpoints.iter()) {
            if ep.terminating {
                term += 1;
            } else if ep.ready {
                ready += 1;
            } else {
                not_ready += 1;
            }
        }
        let mut m = self.lock_metrics();
        m.endpoints_ready = ready;
        m.endpoints_terminating = term;
        m.endpoints_not_ready = not_ready;
    }

    fn lock_metrics(&self) -> std::sync::MutexGuard<'_, MetricsSnapshot> {
        self.metrics.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&mut self) {
        self.status.budgets = self
            .budgets
            .lock()
            .statuses()
            .into_iter()
            .map(|(pdb, st)| BudgetReport {
                pdb,
                expected_pods: st.expected,
                current_healthy: st.current_healthy,
                desired_healthy: st.desired_healthy,
                disruptions_allowed: st.disruptions_allowed,
            })
            .collect();
        let packets: Vec<(String, u64)> = self
            .engine
            .counters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let counts = self.engine.snat_exhaustion();
        let exhaustion = if counts.is_empty() {
            Vec::new()
        } else {
            let desired = self.desired.as_ref();
            let names = self
                .frontend_names
                .get_or_insert_with(|| desired.map(frontend_names).unwrap_or_default());
            name_exhaustion(&counts, names)
        };
        self.exhaustion_log.keep_only(&exhaustion);
        let now = Instant::now();
        for e in &exhaustion {
            if let Some(resets) = self.exhaustion_log.due(e, now) {
                warn!(
                    service = %e.service,
                    port = %e.port,
                    endpoint = %e.endpoint,
                    resets,
                    "SNAT ports to the endpoint ran out: new connections were reset"
                );
            }
        }
        {
            let mut m = self.lock_metrics();
            m.datapath = self.engine.kind().to_string();
            m.generation = self.status.generation;
            m.packets = packets.clone();
            m.health = self.health.counters();
            m.snat_exhaustion = exhaustion;
        }
        self.status.counters = packets;
        let (now, wall) = (Instant::now(), SystemTime::now());
        self.status.drain = self
            .drain_progress()
            .map(|p| DrainStatus::from_progress(&p, now, wall));
        let mut singles = self.pods_rt.single_evictions(now);
        if let Some((drains, _)) = &self.api_drain {
            // Evictions asked of the API (`sluice.dev/evict`) first; the
            // pod runtime's own are the deletions that followed.
            singles.splice(0..0, drains.single_evictions(now));
        }
        self.status.evictions = singles
            .iter()
            .map(|r| PodEviction::from_report(r, now, wall))
            .collect();
        self.status.pending_pods = self
            .pods_rt
            .held()
            .iter()
            .map(|(k, why)| PendingPod::new(k, why))
            .collect();
        if let Some(path) = &self.status_path {
            if let Err(e) = write_status(path, &self.status) {
                warn!(path = %path.display(), error = %e, "writing status file");
            }
        }
    }

    /// Remove what this agent added to the host, then stop the engine and
    /// the health servers.
    pub fn shutdown(mut self) -> Result<()> {
        // The agent's own pods end with it: SIGTERM, SIGKILL after
        // min(their grace, --shutdown-grace), so a shutdown never hangs on a
        // pod that ignores SIGTERM.
        let r = self.pods_rt.shutdown(self.shutdown_grace);
        info!(
            signalled = r.signalled,
            killed = r.killed,
            not_reaped = r.not_reaped,
            "pods stopped"
        );
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
        self.health.shutdown();
        self.engine.shutdown()
    }
}
