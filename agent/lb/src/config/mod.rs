//! What the load balancer is told to serve, as one pure [`LbConfig`]: every
//! Service's frontends, its effective health check and its backend nodes.
//!
//! Two sources give it: the API's `sluice.dev/v1` load-balancer objects
//! (`objects.rs` reads them, `join.rs` joins them, pure; `watch.rs` watches
//! them) or a YAML file (`file.rs`). Both check values with the helpers
//! here, so a value means the same wherever it came from.

pub mod file;
pub mod join;
pub mod objects;
pub mod watch;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::desired::Frontend;

/// Every Service to serve, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbConfig {
    pub services: Vec<ServiceConfig>,
}

impl LbConfig {
    /// Backends of every Service, as (service, backend).
    pub fn backends(&self) -> impl Iterator<Item = (&ServiceConfig, &BackendConfig)> {
        self.services
            .iter()
            .flat_map(|s| s.backends.iter().map(move |b| (s, b)))
    }
}

/// One load-balanced Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceConfig {
    /// `namespace/name` from the API; any unique name from a file.
    pub name: String,
    /// Sorted, no duplicates.
    pub frontends: Vec<Frontend>,
    pub health_check: HealthCheck,
    /// Sorted by node name, one per node.
    pub backends: Vec<BackendConfig>,
}

/// The effective health check of a Service (GCE's fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HealthCheck {
    pub port: u16,
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub healthy_threshold: u32,
    pub unhealthy_threshold: u32,
}

impl HealthCheck {
    /// GKE's check for `externalTrafficPolicy: Cluster` (kube-proxy's
    /// 10256 `/healthz`, every 8 s, 1 s timeout, healthy after 1,
    /// unhealthy after 3): the file's defaults.
    pub fn gke_cluster_default() -> HealthCheck {
        HealthCheck {
            port: 10256,
            path: "/healthz".to_string(),
            interval: Duration::from_secs(8),
            timeout: Duration::from_secs(1),
            healthy_threshold: 1,
            unhealthy_threshold: 3,
        }
    }
}

/// One backend node of a Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendConfig {
    pub node: String,
    /// Probed, and the neighbour entry that gives its MAC.
    pub address: Ipv4Addr,
    /// Carried for dual-stack nodes; frames go by MAC, so it is not needed
    /// to deliver IPv6 VIP traffic.
    pub ipv6: Option<Ipv6Addr>,
}

/// A value that is not acceptable, and where it is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The path to the value, e.g. `services[0].frontends[1].port`.
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// GCE's limits on a check's thresholds.
pub const MAX_THRESHOLD: u32 = 10;
/// GCE's limit on a check's interval and timeout.
pub const MAX_CHECK_SECONDS: u64 = 300;

/// The raw numbers of a health check, as both sources carry them.
#[derive(Clone, Debug)]
pub struct RawCheck<'a> {
    pub port: u16,
    pub path: &'a str,
    pub interval_s: u64,
    pub timeout_s: u64,
    pub healthy: u32,
    pub unhealthy: u32,
}

/// Checks a health check's values (GCE's rules: port not 0, interval and
/// timeout 1–300 s with the timeout no longer than the interval,
/// thresholds 1–10, a path that fits a request line). `at` prefixes the
/// field names of errors; the names are the schema's.
pub fn check_health(at: &str, raw: &RawCheck<'_>) -> Result<HealthCheck, FieldError> {
    if raw.port == 0 {
        return Err(FieldError::new(format!("{at}.port"), "must be 1-65535"));
    }
    check_path(raw.path).map_err(|r| FieldError::new(format!("{at}.requestPath"), r))?;
    for (name, v) in [
        ("checkIntervalSec", raw.interval_s),
        ("timeoutSec", raw.timeout_s),
    ] {
        if !(1..=MAX_CHECK_SECONDS).contains(&v) {
            return Err(FieldError::new(
                format!("{at}.{name}"),
                format!("{v} is not within 1-{MAX_CHECK_SECONDS} seconds"),
            ));
        }
    }
    if raw.timeout_s > raw.interval_s {
        // A probe still running when the next is due would overlap it.
        return Err(FieldError::new(
            format!("{at}.timeoutSec"),
            format!(
                "{} s is longer than checkIntervalSec ({} s)",
                raw.timeout_s, raw.interval_s
            ),
        ));
    }
    for (name, v) in [
        ("healthyThreshold", raw.healthy),
        ("unhealthyThreshold", raw.unhealthy),
    ] {
        if !(1..=MAX_THRESHOLD).contains(&v) {
            return Err(FieldError::new(
                format!("{at}.{name}"),
                format!("{v} is not within 1-{MAX_THRESHOLD}"),
            ));
        }
    }
    Ok(HealthCheck {
        port: raw.port,
        path: raw.path.to_string(),
        interval: Duration::from_secs(raw.interval_s),
        timeout: Duration::from_secs(raw.timeout_s),
        healthy_threshold: raw.healthy,
        unhealthy_threshold: raw.unhealthy,
    })
}

/// A request path goes verbatim into the probe's request line: it must
/// start with `/`, and hold no space or control character that would
/// split the line.
fn check_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("{p:?} does not start with '/'"));
    }
    if p.len() > 1024 {
        return Err("longer than 1024 bytes".to_string());
    }
    if let Some(c) = p.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{p:?} holds {c:?}"));
    }
    Ok(())
}

/// Checks a frontend: a port, and a VIP clients can send to (unicast,
/// not unspecified or loopback). The protocol is typed.
pub fn check_frontend(at: &str, f: &Frontend) -> Result<(), FieldError> {
    if f.port == 0 {
        return Err(FieldError::new(format!("{at}.port"), "must be 1-65535"));
    }
    let a = f.address;
    let broadcast = matches!(a, std::net::IpAddr::V4(v4) if v4.is_broadcast());
    if a.is_unspecified() || a.is_loopback() || a.is_multicast() || broadcast {
        return Err(FieldError::new(
            format!("{at}.ipAddress"),
            format!("{a} is not a unicast address"),
        ));
    }
    Ok(())
}

/// Sorts a Service's parts and refuses a node listed twice with different
/// addresses (the same entry twice is harmless and kept once).
pub fn normalise(mut s: ServiceConfig, at: &str) -> Result<ServiceConfig, FieldError> {
    s.frontends.sort();
    s.frontends.dedup();
    s.backends.sort_by(|a, b| a.node.cmp(&b.node));
    for w in s.backends.windows(2) {
        if w[0].node == w[1].node && w[0] != w[1] {
            return Err(FieldError::new(
                format!("{at}.backends"),
                format!(
                    "node {} is listed twice with different addresses",
                    w[0].node
                ),
            ));
        }
    }
    s.backends.dedup();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(interval_s: u64, timeout_s: u64) -> RawCheck<'static> {
        RawCheck {
            port: 10256,
            path: "/healthz",
            interval_s,
            timeout_s,
            healthy: 1,
            unhealthy: 3,
        }
    }

    #[test]
    fn a_check_is_refused_naming_the_field() {
        let e = check_health("hc", &raw(1, 2)).expect_err("timeout past interval");
        assert_eq!(e.field, "hc.timeoutSec");
        let e = check_health("hc", &raw(0, 0)).expect_err("no interval");
        assert_eq!(e.field, "hc.checkIntervalSec");
        let mut r = raw(8, 1);
        r.path = "/a b";
        assert_eq!(
            check_health("hc", &r).expect_err("space").field,
            "hc.requestPath"
        );
        r.path = "healthz";
        assert_eq!(
            check_health("hc", &r).expect_err("relative").field,
            "hc.requestPath"
        );
        let mut r = raw(8, 1);
        r.unhealthy = 0;
        assert_eq!(
            check_health("hc", &r).expect_err("zero").field,
            "hc.unhealthyThreshold"
        );
        r.unhealthy = 11;
        assert!(check_health("hc", &r).is_err());
        let ok = check_health("hc", &raw(8, 1)).expect("GKE's Cluster check");
        assert_eq!(ok, HealthCheck::gke_cluster_default());
    }
}
