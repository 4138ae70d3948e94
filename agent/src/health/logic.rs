//! What the health endpoints answer, decided without I/O: the clock is passed
//! in, bodies are written into a caller's buffer so the servers can reuse it.

use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::time::write_rfc3339_nano;

/// The node server's port when nothing else is configured (H2: not
/// configurable on the load balancer's side).
pub const DEFAULT_NODE_HEALTH_PORT: u16 = 10256;

/// The taint the cluster autoscaler puts on a node it is about to delete;
/// such a node fails `/healthz` so load balancers drain it first.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Wall-clock source. Injected so tests can move time by hand.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> SystemTime;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to (tests, simulations).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Mutex::new(start),
        }
    }
    pub fn set(&self, t: SystemTime) {
        // A poisoned lock only means a panicking test thread held it; the
        // value inside is still a valid time.
        let mut g = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *g = t;
    }
    pub fn advance(&self, d: Duration) {
        let mut g = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *g += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// IP family, for the per-family `status` object of the node answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpFamily {
    IPv4,
    IPv6,
}

impl IpFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::IPv4 => "IPv4",
            IpFamily::IPv6 => "IPv6",
        }
    }
}

/// Whether the datapath keeps up with the desired state.
///
/// `record_queued` when a new desired state is seen and not applied yet,
/// `record_synced` when it has been applied. Healthy iff nothing is pending,
/// or the oldest pending update is younger than the timeout: a sync that is
/// merely running is not a failure, one stuck for longer than the timeout is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxierHealth {
    timeout: Duration,
    last_updated: Option<SystemTime>,
    oldest_pending: Option<SystemTime>,
}

impl ProxierHealth {
    pub fn new(timeout: Duration) -> Self {
        ProxierHealth {
            timeout,
            last_updated: None,
            oldest_pending: None,
        }
    }

    /// kube-proxy's default: twice the sync period, so one slow sync is
    /// tolerated and a missed one is not.
    pub fn default_timeout(sync_period: Duration) -> Duration {
        sync_period.saturating_mul(2)
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Only the first of several queued updates counts: the age that matters
    /// is how long the oldest unapplied change has waited.
    pub fn record_queued(&mut self, now: SystemTime) {
        if self.oldest_pending.is_none() {
            self.oldest_pending = Some(now);
        }
    }

    pub fn record_synced(&mut self, now: SystemTime) {
        self.oldest_pending = None;
        self.last_updated = Some(now);
    }

    pub fn is_healthy(&self, now: SystemTime) -> bool {
        match self.oldest_pending {
            None => true,
            // A clock that stepped backwards gives a negative age: treat it
            // as fresh rather than failing every node at once.
            Some(t) => now.duration_since(t).map_or(true, |age| age < self.timeout),
        }
    }

    pub fn last_updated(&self) -> Option<SystemTime> {
        self.last_updated
    }

    pub fn oldest_pending(&self) -> Option<SystemTime> {
        self.oldest_pending
    }
}

/// A node is eligible for load-balanced traffic unless it is being deleted or
/// the autoscaler has marked it for deletion.
pub fn node_eligible<'a>(
    being_deleted: bool,
    taint_keys: impl IntoIterator<Item = &'a str>,
) -> bool {
    !being_deleted && !taint_keys.into_iter().any(|k| k == TO_BE_DELETED_TAINT)
}

/// Which node endpoint is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Load-balancer check: proxier health and node eligibility.
    Healthz,
    /// Liveness: proxier health only.
    Livez,
}

/// Everything a node answer depends on, read at one instant.
#[derive(Debug, Clone, Copy)]
pub struct NodeSnapshot {
    pub proxier_healthy: bool,
    pub node_eligible: bool,
    pub last_updated: Option<SystemTime>,
    pub now: SystemTime,
}

/// Writes the JSON body of `/healthz` or `/livez` into `body` (cleared first)
/// and returns the status code.
///
/// Same fields, order and formats as kube-proxy: RFC 3339 timestamps with
/// nanoseconds (UTC), `lastUpdated` equal to `currentTime` while healthy (older
/// clients read a fresh `lastUpdated` as "synced recently"), the last sync
/// otherwise (the zero time if there never was one), `nodeEligible` on
/// `/healthz` only, `status` per IP family once a sync has happened.
pub fn node_answer(
    probe: Probe,
    s: &NodeSnapshot,
    families: &[IpFamily],
    body: &mut Vec<u8>,
) -> u16 {
    body.clear();
    let healthy = match probe {
        Probe::Healthz => s.proxier_healthy && s.node_eligible,
        Probe::Livez => s.proxier_healthy,
    };
    let last = if healthy { Some(s.now) } else { s.last_updated };
    body.extend_from_slice(b"{\"lastUpdated\":\"");
    write_rfc3339_nano(last, body);
    body.extend_from_slice(b"\",\"currentTime\":\"");
    write_rfc3339_nano(Some(s.now), body);
    body.push(b'"');
    if probe == Probe::Healthz {
        body.extend_from_slice(b",\"nodeEligible\":");
        body.extend_from_slice(bool_str(s.node_eligible));
    }
    body.extend_from_slice(b",\"healthy\":");
    // kube-proxy's `healthy` is the proxier's, without node eligibility.
    body.extend_from_slice(bool_str(s.proxier_healthy));
    if let (Some(lu), false) = (s.last_updated, families.is_empty()) {
        body.extend_from_slice(b",\"status\":{");
        for (i, f) in families.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.push(b'"');
            body.extend_from_slice(f.as_str().as_bytes());
            body.extend_from_slice(b"\":{\"lastUpdated\":\"");
            write_rfc3339_nano(Some(lu), body);
            body.extend_from_slice(b"\",\"healthy\":");
            body.extend_from_slice(bool_str(s.proxier_healthy));
            body.push(b'}');
        }
        body.push(b'}');
    }
    body.push(b'}');
    if healthy {
        200
    } else {
        503
    }
}

/// The part of a service body that never changes for a Service, computed once
/// per Service so the hot path only appends two values.
pub fn service_body_prefix(namespace: &str, name: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(96 + namespace.len() + name.len());
    p.extend_from_slice(b"{\n\t\"service\": {\n\t\t\"namespace\": ");
    push_json_string(namespace, &mut p);
    p.extend_from_slice(b",\n\t\t\"name\": ");
    push_json_string(name, &mut p);
    p.extend_from_slice(b"\n\t},\n\t\"localEndpoints\": ");
    p
}

/// Completes a service body after [`service_body_prefix`]; returns the status.
///
/// H3: 200 iff at least one local ready, non-terminating endpoint and the
/// proxier is healthy. Node eligibility is not part of it, as in kube-proxy:
/// a draining node stops passing `/healthz`, its pods decide the rest.
pub fn service_answer(
    prefix: &[u8],
    local_endpoints: u32,
    proxier_healthy: bool,
    body: &mut Vec<u8>,
) -> u16 {
    body.clear();
    body.extend_from_slice(prefix);
    // Writing an integer into a Vec cannot fail.
    let _ = write!(body, "{local_endpoints}");
    body.extend_from_slice(b",\n\t\"serviceProxyHealthy\": ");
    body.extend_from_slice(bool_str(proxier_healthy));
    body.extend_from_slice(b"\n}");
    if local_endpoints > 0 && proxier_healthy {
        200
    } else {
        503
    }
}

fn bool_str(b: bool) -> &'static [u8] {
    if b {
        b"true"
    } else {
        b"false"
    }
}

fn push_json_string(s: &str, out: &mut Vec<u8>) {
    match serde_json::to_string(s) {
        Ok(q) => out.extend_from_slice(q.as_bytes()),
        // Serialising a &str cannot fail; keep the body valid JSON anyway.
        Err(_) => out.extend_from_slice(b"\"\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn snap(h: &ProxierHealth, eligible: bool, now: SystemTime) -> NodeSnapshot {
        NodeSnapshot {
            proxier_healthy: h.is_healthy(now),
            node_eligible: eligible,
            last_updated: h.last_updated(),
            now,
        }
    }

    fn json(b: &[u8]) -> serde_json::Value {
        serde_json::from_slice(b).expect("valid json")
    }

    // spec: H1 — the agent's answer stands for what it knows: healthy while
    // starting up (nothing pending yet).
    #[test]
    fn healthy_before_any_update() {
        let h = ProxierHealth::new(Duration::from_secs(2));
        assert!(h.is_healthy(t(0)));
        let mut b = Vec::new();
        assert_eq!(
            node_answer(
                Probe::Healthz,
                &snap(&h, true, t(0)),
                &[IpFamily::IPv4],
                &mut b
            ),
            200
        );
        let v = json(&b);
        assert_eq!(v["healthy"], true);
        assert_eq!(v["nodeEligible"], true);
        assert!(v.get("status").is_none(), "no status before the first sync");
    }

    // spec: H2 — the node check fails only when the sync is late.
    #[test]
    fn pending_younger_than_timeout_is_healthy_then_late() {
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_synced(t(0));
        h.record_queued(t(10));
        assert!(h.is_healthy(t(11)));
        // Exactly the timeout is late: the rule is "younger than".
        assert!(!h.is_healthy(t(12)));
        assert!(!h.is_healthy(t(30)));
        let mut b = Vec::new();
        for p in [Probe::Healthz, Probe::Livez] {
            assert_eq!(
                node_answer(p, &snap(&h, true, t(30)), &[IpFamily::IPv4], &mut b),
                503
            );
            let v = json(&b);
            assert_eq!(v["healthy"], false);
            assert_eq!(
                v["lastUpdated"], "2023-11-14T22:13:20Z",
                "last sync, not now"
            );
            assert_eq!(v["currentTime"], "2023-11-14T22:13:50Z");
            assert_eq!(v["status"]["IPv4"]["healthy"], false);
        }
        // spec: H2 — back in sync: healthy again at once.
        h.record_synced(t(31));
        assert!(h.is_healthy(t(31)));
        assert_eq!(
            node_answer(Probe::Healthz, &snap(&h, true, t(31)), &[], &mut b),
            200
        );
    }

    #[test]
    fn later_queued_updates_do_not_reset_the_age() {
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_queued(t(0));
        h.record_queued(t(1));
        h.record_queued(t(2));
        assert_eq!(h.oldest_pending(), Some(t(0)));
        assert!(!h.is_healthy(t(2)));
    }

    #[test]
    fn never_synced_and_stuck_is_unhealthy_with_zero_last_updated() {
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_queued(t(0));
        let mut b = Vec::new();
        assert_eq!(
            node_answer(
                Probe::Livez,
                &snap(&h, true, t(5)),
                &[IpFamily::IPv4],
                &mut b
            ),
            503
        );
        let v = json(&b);
        assert_eq!(v["lastUpdated"], "0001-01-01T00:00:00Z");
        assert!(v.get("nodeEligible").is_none(), "livez has no nodeEligible");
    }

    #[test]
    fn clock_stepping_back_is_not_late() {
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_queued(t(100));
        assert!(h.is_healthy(t(50)));
    }

    #[test]
    fn default_timeout_is_twice_the_period() {
        assert_eq!(
            ProxierHealth::default_timeout(Duration::from_secs(1)),
            Duration::from_secs(2)
        );
        assert_eq!(ProxierHealth::default_timeout(Duration::MAX), Duration::MAX);
    }

    // spec: H2 — a node marked for deletion fails /healthz, /livez ignores it.
    #[test]
    fn tainted_or_deleting_node_fails_healthz_only() {
        assert!(node_eligible(false, ["foo", "bar"]));
        assert!(!node_eligible(false, ["foo", TO_BE_DELETED_TAINT]));
        assert!(!node_eligible(true, []));
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_synced(t(0));
        let s = snap(&h, false, t(1));
        let mut b = Vec::new();
        assert_eq!(
            node_answer(Probe::Healthz, &s, &[IpFamily::IPv4], &mut b),
            503
        );
        let v = json(&b);
        assert_eq!(v["nodeEligible"], false);
        assert_eq!(v["healthy"], true, "the proxier itself is fine");
        assert_eq!(
            node_answer(Probe::Livez, &s, &[IpFamily::IPv4], &mut b),
            200
        );
        assert_eq!(json(&b)["lastUpdated"], json(&b)["currentTime"]);
    }

    #[test]
    fn status_lists_every_family() {
        let mut h = ProxierHealth::new(Duration::from_secs(2));
        h.record_synced(t(0));
        let mut b = Vec::new();
        node_answer(
            Probe::Healthz,
            &snap(&h, true, t(1)),
            &[IpFamily::IPv4, IpFamily::IPv6],
            &mut b,
        );
        let v = json(&b);
        assert_eq!(v["status"]["IPv4"]["lastUpdated"], "2023-11-14T22:13:20Z");
        assert_eq!(v["status"]["IPv6"]["healthy"], true);
        let keys: Vec<_> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys.len(), 5);
    }

    // spec: H3 — Local: pass only with ≥ 1 local ready endpoint and a healthy
    // proxier; the weight header carries the count.
    #[test]
    fn service_answers() {
        let p = service_body_prefix("default", "web");
        let mut b = Vec::new();
        assert_eq!(service_answer(&p, 0, true, &mut b), 503);
        let v = json(&b);
        assert_eq!(v["service"]["namespace"], "default");
        assert_eq!(v["service"]["name"], "web");
        assert_eq!(v["localEndpoints"], 0);
        assert_eq!(v["serviceProxyHealthy"], true);
        assert_eq!(service_answer(&p, 2, true, &mut b), 200);
        assert_eq!(json(&b)["localEndpoints"], 2);
        assert_eq!(service_answer(&p, 2, false, &mut b), 503);
        assert_eq!(json(&b)["serviceProxyHealthy"], false);
        assert_eq!(
            String::from_utf8_lossy(&b),
            "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": false\n}"
        );
    }

    #[test]
    fn service_names_are_json_escaped() {
        let p = service_body_prefix("a\"b", "c\\d");
        let mut b = Vec::new();
        service_answer(&p, 1, true, &mut b);
        assert_eq!(json(&b)["service"]["namespace"], "a\"b");
    }
}
