//! Connection draining: a backend that leaves a Service's groups (its node
//! no longer has a serving pod, or left the subset) keeps its established
//! flows for a while instead of losing them at once.
//!
//! A GCE backend service drains a removed backend for its
//! `connectionDraining.drainingTimeoutSec` (GKE's L4 load balancers: 30 s),
//! sending it no new connections meanwhile. Here the backend stays in the
//! desired state for that long, marked unhealthy: the packet program then
//! keeps its TCP flows (they persist on an unhealthy backend) and chooses
//! other backends for new ones. A backend that comes back while draining
//! simply stops draining. Pure: times are passed in.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{BackendConfig, LbConfig};

/// GKE's connection draining timeout for L4 load balancers.
pub const CONNECTION_DRAINING: Duration = Duration::from_secs(30);

/// Backends draining, by (Service, node), with when they go.
#[derive(Debug, Default)]
pub struct Draining {
    held: BTreeMap<(String, String), (BackendConfig, Duration)>,
}

impl Draining {
    /// The configuration changes from `old` to `new` at `now`: a backend
    /// that left a Service still configured drains until `now` +
    /// [`CONNECTION_DRAINING`] (a Service removed whole has no VIP left to
    /// carry flows); one configured again stops draining.
    pub fn update(&mut self, old: &LbConfig, new: &LbConfig, now: Duration) {
        for s in &new.services {
            for b in &s.backends {
                self.held.remove(&(s.name.clone(), b.node.clone()));
            }
        }
        self.held
            .retain(|(svc, _), _| new.services.iter().any(|s| s.name == *svc));
        for s in &old.services {
            let Some(next) = new.services.iter().find(|n| n.name == s.name) else {
                continue;
            };
            for b in &s.backends {
                if next.backends.iter().all(|n| n.node != b.node) {
                    self.held
                        .entry((s.name.clone(), b.node.clone()))
                        .or_insert_with(|| (b.clone(), now + CONNECTION_DRAINING));
                }
            }
        }
    }

    /// Forget the backends whose draining ended by `now`; whether any did.
    pub fn expire(&mut self, now: Duration) -> bool {
        let before = self.held.len();
        self.held.retain(|_, (_, until)| *until > now);
        self.held.len() != before
    }

    /// When the next draining ends.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.held.values().map(|(_, until)| *until).min()
    }

    pub fn is_draining(&self, service: &str, node: &str) -> bool {
        self.held
            .contains_key(&(service.to_string(), node.to_string()))
    }

    /// `config` with the draining backends back in their Services (sorted
    /// by node name, as the configuration keeps them).
    pub fn extend(&self, config: &LbConfig) -> LbConfig {
        let mut out = config.clone();
        for s in &mut out.services {
            let mut added = false;
            for ((svc, _), (b, _)) in &self.held {
                if *svc == s.name && s.backends.iter().all(|x| x.node != b.node) {
                    s.backends.push(b.clone());
                    added = true;
                }
            }
            if added {
                s.backends.sort_by(|a, b| a.node.cmp(&b.node));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::config::{HealthCheck, ServiceConfig};

    fn service(name: &str, nodes: &[&str]) -> ServiceConfig {
        ServiceConfig {
            name: name.to_string(),
            frontends: Vec::new(),
            health_check: HealthCheck::gke_cluster_default(),
            backends: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| BackendConfig {
                    node: n.to_string(),
                    address: Ipv4Addr::new(198, 18, 0, 11 + i as u8),
                    ipv6: None,
                })
                .collect(),
        }
    }

    fn config(services: Vec<ServiceConfig>) -> LbConfig {
        LbConfig { services }
    }

    fn nodes(cfg: &LbConfig, svc: &str) -> Vec<String> {
        cfg.services
            .iter()
            .find(|s| s.name == svc)
            .map(|s| s.backends.iter().map(|b| b.node.clone()).collect())
            .unwrap_or_default()
    }

    const T0: Duration = Duration::from_secs(100);

    // spec: H4 — a node that stops serving keeps its established flows
    // while new connections go elsewhere.
    #[test]
    fn a_removed_backend_drains_for_the_timeout_then_goes() {
        let old = config(vec![service("default/web", &["a", "b", "c"])]);
        let new = config(vec![service("default/web", &["a", "c"])]);
        let mut d = Draining::default();
        d.update(&old, &new, T0);
        assert!(d.is_draining("default/web", "b"));
        assert!(!d.is_draining("default/web", "a"));
        assert_eq!(nodes(&d.extend(&new), "default/web"), ["a", "b", "c"]);
        assert_eq!(d.next_deadline(), Some(T0 + CONNECTION_DRAINING));
        assert!(!d.expire(T0 + CONNECTION_DRAINING - Duration::from_millis(1)));
        assert!(d.is_draining("default/web", "b"));
        assert!(d.expire(T0 + CONNECTION_DRAINING));
        assert_eq!(nodes(&d.extend(&new), "default/web"), ["a", "c"]);
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn a_backend_back_while_draining_stops_draining() {
        let full = config(vec![service("default/web", &["a", "b"])]);
        let less = config(vec![service("default/web", &["a"])]);
        let mut d = Draining::default();
        d.update(&full, &less, T0);
        assert!(d.is_draining("default/web", "b"));
        d.update(&less, &full, T0 + Duration::from_secs(5));
        assert!(!d.is_draining("default/web", "b"));
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn a_second_update_does_not_restart_the_clock() {
        let full = config(vec![service("default/web", &["a", "b"])]);
        let less = config(vec![service("default/web", &["a"])]);
        let mut d = Draining::default();
        d.update(&full, &less, T0);
        // An unrelated change later: b's draining still ends on time.
        d.update(&less, &less, T0 + Duration::from_secs(10));
        assert_eq!(d.next_deadline(), Some(T0 + CONNECTION_DRAINING));
    }

    #[test]
    fn a_removed_service_drains_nothing() {
        let old = config(vec![
            service("default/web", &["a"]),
            service("default/solo", &["b"]),
        ]);
        let new = config(vec![service("default/web", &["a"])]);
        let mut d = Draining::default();
        d.update(&old, &new, T0);
        assert!(!d.is_draining("default/solo", "b"));
        assert_eq!(d.next_deadline(), None);
        // Draining backends of a Service that goes are dropped with it.
        let mut d = Draining::default();
        let web_ab = config(vec![service("default/web", &["a", "b"])]);
        d.update(&web_ab, &new, T0);
        assert!(d.is_draining("default/web", "b"));
        d.update(&new, &config(Vec::new()), T0 + Duration::from_secs(1));
        assert!(!d.is_draining("default/web", "b"));
    }
}
