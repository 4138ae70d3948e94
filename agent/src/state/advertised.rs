//! Which pods the cluster still sends new connections to, for the SIGTERM
//! of an evicted pod (E6). With the API as the source, the other nodes
//! route by the cluster's EndpointSlices, not by this node's maps: a pod
//! must keep serving until those no longer call it ready, and a little
//! longer, because every other node sees the same slice change about when
//! this one does but applies it after its own debounce and map update.
//!
//! Pure: the caller hands in each desired state it takes and the time.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::model::DesiredState;

/// How long an evicted pod's SIGTERM still waits once this node sees the
/// cluster stop advertising it ready. An agent builds a change at most
/// 50 ms after it arrives; the measured propagation p99 is about 20 ms
/// from a watcher seeing the write. A client entering at another node in
/// that window was sent to a pod that had already exited (one reset in a
/// rolling update, found by CI). The analogue of the `preStop` sleep
/// Kubernetes users add for the same race; well under the usual grace.
pub const ADVERTISED_SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Some Service's endpoints call the pod ready.
    Ready,
    /// They did, and stopped in the state taken at this time.
    StoppedAt(Instant),
}

/// Per pod key: whether the cluster advertises it, and since when not.
/// A pod never seen advertised has no entry: nothing routes to it.
#[derive(Debug, Default)]
pub struct Advertised {
    pods: BTreeMap<String, Seen>,
}

impl Advertised {
    /// Take a new desired state, seen at `now`.
    pub fn observe(&mut self, d: &DesiredState, now: Instant) {
        let ready: HashSet<IpAddr> = d
            .services
            .values()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.ready)
            .map(|e| e.addr)
            .collect();
        self.pods.retain(|k, _| d.pods.contains_key(k));
        for (key, pod) in &d.pods {
            let advertised = pod.ips.iter().any(|ip| ready.contains(ip));
            match (advertised, self.pods.get(key)) {
                (true, _) => {
                    self.pods.insert(key.clone(), Seen::Ready);
                }
                (false, Some(Seen::Ready)) => {
                    self.pods.insert(key.clone(), Seen::StoppedAt(now));
                }
                (false, _) => {}
            }
        }
    }

    /// Whether other nodes may still send new connections to pod `key` at
    /// `now`: advertised ready, or stopped less than [`ADVERTISED_SETTLE`]
    /// ago.
    pub fn holds(&self, key: &str, now: Instant) -> bool {
        match self.pods.get(key) {
            None => false,
            Some(Seen::Ready) => true,
            Some(Seen::StoppedAt(t)) => now.saturating_duration_since(*t) < ADVERTISED_SETTLE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::validate::parse_state;

    /// Pods `(key, ip)` on node-a, and one Service's slice listing
    /// `(ip, ready)`.
    fn state(pods: &[(&str, &str)], listed: &[(&str, bool)]) -> DesiredState {
        let mut y = String::from(
            "kind: Node\nmetadata: {name: node-a}\n\
             status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}\n",
        );
        for (key, ip) in pods {
            let name = key.trim_start_matches("default/");
            y.push_str(&format!(
                "---\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: web}}}}\n\
                 spec: {{nodeName: node-a}}\nstatus: {{podIPs: [{{ip: {ip}}}]}}\n"
            ));
        }
        y.push_str(
            "---\nkind: Service\nmetadata: {name: web}\n\
             spec: {type: LoadBalancer, ports: [{port: 80}]}\n\
             ---\nkind: EndpointSlice\n\
             metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}\n\
             addressType: IPv4\nendpoints:",
        );
        y.push_str(if listed.is_empty() { " []\n" } else { "\n" });
        for (ip, ready) in listed {
            y.push_str(&format!(
                "- {{addresses: [{ip}], nodeName: node-a, conditions: {{ready: {ready}}}}}\n"
            ));
        }
        parse_state(&y).expect("a valid state")
    }

    const A: (&str, &str) = ("default/a", "198.19.1.10");
    const B: (&str, &str) = ("default/b", "198.19.1.11");

    #[test]
    fn a_pod_stays_held_for_the_settle_after_the_cluster_stops_advertising_it() {
        // spec: E6 — the other nodes apply the slice change after their own
        // debounce: SIGTERM waits ADVERTISED_SETTLE past this node's view.
        let mut adv = Advertised::default();
        let t0 = Instant::now();
        adv.observe(&state(&[A, B], &[(A.1, true), (B.1, true)]), t0);
        assert!(adv.holds(A.0, t0) && adv.holds(B.0, t0));
        let t1 = t0 + Duration::from_millis(300);
        adv.observe(&state(&[A, B], &[(A.1, false), (B.1, true)]), t1);
        assert!(adv.holds(A.0, t1 + ADVERTISED_SETTLE - Duration::from_millis(1)));
        assert!(!adv.holds(A.0, t1 + ADVERTISED_SETTLE));
        assert!(adv.holds(B.0, t1 + ADVERTISED_SETTLE), "still advertised");
        // A later state that still does not advertise it keeps the first
        // time it stopped.
        adv.observe(&state(&[A, B], &[(B.1, true)]), t1 + ADVERTISED_SETTLE);
        assert!(!adv.holds(A.0, t1 + ADVERTISED_SETTLE));
    }

    #[test]
    fn advertised_again_the_settle_starts_over() {
        // spec: E6
        let mut adv = Advertised::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        adv.observe(&state(&[A], &[(A.1, true)]), t0);
        adv.observe(&state(&[A], &[(A.1, false)]), t0 + ms(100));
        adv.observe(&state(&[A], &[(A.1, true)]), t0 + ms(200));
        assert!(adv.holds(A.0, t0 + ms(100) + ADVERTISED_SETTLE));
        adv.observe(&state(&[A], &[]), t0 + ms(300));
        assert!(adv.holds(A.0, t0 + ms(300) + ADVERTISED_SETTLE - ms(1)));
        assert!(!adv.holds(A.0, t0 + ms(300) + ADVERTISED_SETTLE));
    }

    #[test]
    fn a_pod_no_service_ever_advertised_or_gone_from_the_state_is_not_held() {
        // spec: E6 — nothing routes to it: no wait (a pod without a Service
        // is signalled at once).
        let mut adv = Advertised::default();
        let t0 = Instant::now();
        adv.observe(&state(&[A, B], &[(B.1, true)]), t0);
        assert!(!adv.holds(A.0, t0));
        assert!(!adv.holds("default/unknown", t0));
        adv.observe(&state(&[A], &[]), t0);
        assert!(!adv.holds(B.0, t0), "left the state: forgotten");
    }
}
