//! The health check GKE makes for an L4 load balancer, from the Service's
//! traffic policy, with per-field overrides checked before use.
//!
//! `Cluster` probes kube-proxy's node health port, which answers for the
//! node as a whole, so it can afford to be slow to declare a node down;
//! `Local` probes the Service's own `healthCheckNodePort`, which turns
//! unhealthy as soon as the node has no serving pod, so it is probed more
//! often and dropped sooner.

use crate::service::TrafficPolicy;

/// kube-proxy's `healthzBindAddress` port.
pub const NODE_HEALTH_PORT: u16 = 10256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub port: u16,
    pub path: String,
    pub interval_seconds: u32,
    pub timeout_seconds: u32,
    pub healthy_threshold: u32,
    pub unhealthy_threshold: u32,
}

/// Each field replaces GKE's default when set. Wide integer types so that
/// an out-of-range value is reported, not wrapped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthCheckOverrides {
    pub port: Option<i64>,
    pub path: Option<String>,
    pub interval_seconds: Option<i64>,
    pub timeout_seconds: Option<i64>,
    pub healthy_threshold: Option<i64>,
    pub unhealthy_threshold: Option<i64>,
}

/// An override, or the Service, that cannot make a health check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthCheckError {
    #[error("healthCheck.port: must be 1-65535, got {value}")]
    Port { value: i64 },
    #[error(
        "spec.healthCheckNodePort: must be 1-65535 for externalTrafficPolicy Local, got {value:?}"
    )]
    NodePort { value: Option<i64> },
    #[error("healthCheck.path: must start with '/', got {value:?}")]
    Path { value: String },
    #[error("healthCheck.{field}: must be >= 1, got {value}")]
    AtLeastOne { field: &'static str, value: i64 },
    #[error("healthCheck.{field}: must be at most {max}, got {value}")]
    TooLarge {
        field: &'static str,
        value: i64,
        max: u32,
    },
    #[error("healthCheck.timeoutSeconds: {timeout} must not exceed intervalSeconds ({interval})")]
    TimeoutOverInterval { timeout: u32, interval: u32 },
}

/// The largest interval or timeout GCE accepts, and a generous bound on
/// the thresholds (GCE's own is 10).
const MAX_SECONDS: u32 = 300;
const MAX_THRESHOLD: u32 = 10;

fn port(value: i64) -> Option<u16> {
    u16::try_from(value).ok().filter(|&p| p >= 1)
}

fn bounded(
    field: &'static str,
    value: Option<i64>,
    default: u32,
    max: u32,
) -> Result<u32, HealthCheckError> {
    let Some(value) = value else {
        return Ok(default);
    };
    if value < 1 {
        return Err(HealthCheckError::AtLeastOne { field, value });
    }
    u32::try_from(value)
        .ok()
        .filter(|&v| v <= max)
        .ok_or(HealthCheckError::TooLarge { field, value, max })
}

/// The check for a Service with `policy` and, for `Local`, its
/// `health_check_node_port`, with `overrides` applied.
pub fn health_check(
    policy: TrafficPolicy,
    health_check_node_port: Option<i64>,
    overrides: &HealthCheckOverrides,
) -> Result<HealthCheck, HealthCheckError> {
    let (default_port, interval, unhealthy) = match policy {
        TrafficPolicy::Cluster => (Some(NODE_HEALTH_PORT), 8, 3),
        TrafficPolicy::Local => (health_check_node_port.and_then(port), 3, 2),
    };
    let port = match overrides.port {
        Some(value) => port(value).ok_or(HealthCheckError::Port { value })?,
        None => default_port.ok_or(HealthCheckError::NodePort {
            value: health_check_node_port,
        })?,
    };
    let path = overrides
        .path
        .clone()
        .unwrap_or_else(|| "/healthz".to_string());
    if !path.starts_with('/') {
        return Err(HealthCheckError::Path { value: path });
    }
    let interval_seconds = bounded(
        "intervalSeconds",
        overrides.interval_seconds,
        interval,
        MAX_SECONDS,
    )?;
    let timeout_seconds = bounded("timeoutSeconds", overrides.timeout_seconds, 1, MAX_SECONDS)?;
    let healthy_threshold = bounded(
        "healthyThreshold",
        overrides.healthy_threshold,
        1,
        MAX_THRESHOLD,
    )?;
    let unhealthy_threshold = bounded(
        "unhealthyThreshold",
        overrides.unhealthy_threshold,
        unhealthy,
        MAX_THRESHOLD,
    )?;
    if timeout_seconds > interval_seconds {
        return Err(HealthCheckError::TimeoutOverInterval {
            timeout: timeout_seconds,
            interval: interval_seconds,
        });
    }
    Ok(HealthCheck {
        port,
        path,
        interval_seconds,
        timeout_seconds,
        healthy_threshold,
        unhealthy_threshold,
    })
}
