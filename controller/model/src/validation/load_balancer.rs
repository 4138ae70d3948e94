//! The rules the L4 load-balancer objects satisfy on their own: names and
//! addresses that the `sluice-lb` process can use, no duplicates, and a
//! `HealthCheck`'s overrides checked with `sluice-subsetting`'s own rules
//! (so an override the loop could not apply is refused at admission).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_subsetting::health_check::{
    health_check, HealthCheckError, HealthCheckOverrides, NODE_HEALTH_PORT,
};
use sluice_subsetting::TrafficPolicy;

use super::{ErrorKind, Errors, FieldErrors, Path};
use crate::load_balancer::{
    Backends, HealthCheck, HealthCheckSpec, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup,
};

/// N3: an internal LB uses at most 250 nodes, so no zone's NEG holds more.
pub const MAX_NEG_ENDPOINTS: usize = 250;
/// A request path longer than this is no health check path.
pub const MAX_REQUEST_PATH: usize = 1024;

/// The overrides of `spec` as the health-check decision takes them.
pub fn health_check_overrides(spec: &HealthCheckSpec) -> HealthCheckOverrides {
    HealthCheckOverrides {
        port: spec.port,
        path: spec.request_path.clone(),
        interval_seconds: spec.check_interval_sec,
        timeout_seconds: spec.timeout_sec,
        healthy_threshold: spec.healthy_threshold,
        unhealthy_threshold: spec.unhealthy_threshold,
    }
}

/// The spec field a `sluice-subsetting` field name stands for.
fn spec_field(field: &str) -> &'static str {
    match field {
        "intervalSeconds" => "checkIntervalSec",
        "timeoutSeconds" => "timeoutSec",
        "healthyThreshold" => "healthyThreshold",
        "unhealthyThreshold" => "unhealthyThreshold",
        _ => "port",
    }
}

pub fn validate_health_check(hc: &HealthCheck) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec = Path::root("spec");
    if let Some(path) = &hc.spec.request_path {
        if path.len() > MAX_REQUEST_PATH {
            errors.push(
                &spec.field("requestPath"),
                ErrorKind::TooMany,
                format!("{} characters; at most {MAX_REQUEST_PATH}", path.len()),
            );
        } else if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            errors.invalid(
                &spec.field("requestPath"),
                format!("{path:?}: no spaces or control characters"),
            );
        }
    }
    // The same overrides serve a Service under either policy (its policy
    // may change later), so they must make a check under both; Local's
    // port stands in for the Service's healthCheckNodePort.
    let overrides = health_check_overrides(&hc.spec);
    let checked = health_check(TrafficPolicy::Cluster, None, &overrides).and_then(|_| {
        health_check(
            TrafficPolicy::Local,
            Some(i64::from(NODE_HEALTH_PORT)),
            &overrides,
        )
    });
    if let Err(e) = checked {
        let (field, message) = match e {
            HealthCheckError::Port { value } => ("port", format!("must be 1-65535, got {value}")),
            HealthCheckError::NodePort { value } => {
                ("port", format!("must be 1-65535, got {value:?}"))
            }
            HealthCheckError::Path { value } => {
                ("requestPath", format!("must start with '/', got {value:?}"))
            }
            HealthCheckError::AtLeastOne { field, value } => {
                (spec_field(field), format!("must be 1 or more, got {value}"))
            }
            HealthCheckError::TooLarge { field, value, max } => (
                spec_field(field),
                format!("must be at most {max}, got {value}"),
            ),
            HealthCheckError::TimeoutOverInterval { timeout, interval } => (
                "timeoutSec",
                match hc.spec.check_interval_sec {
                    Some(_) => format!("{timeout} must not exceed checkIntervalSec ({interval})"),
                    None => format!(
                        "{timeout} must not exceed checkIntervalSec, which defaults to \
                         {interval} for externalTrafficPolicy Local; set checkIntervalSec too"
                    ),
                },
            ),
        };
        errors.invalid(&spec.field(field), message);
    }
    errors.into_result()
}

fn required(errors: &mut Errors, path: &Path, value: &str, what: &str) {
    if value.is_empty() {
        errors.push(path, ErrorKind::Required, format!("names {what}"));
    }
}

fn ipv4(errors: &mut Errors, path: &Path, value: &str) {
    if value.parse::<Ipv4Addr>().is_err() {
        errors.invalid(path, format!("{value:?} is not an IPv4 address"));
    }
}

fn ipv6(errors: &mut Errors, path: &Path, value: Option<&str>) {
    if let Some(v) = value {
        if v.parse::<Ipv6Addr>().is_err() {
            errors.invalid(path, format!("{v:?} is not an IPv6 address"));
        }
    }
}

/// A list of nodes (a NEG's endpoints, a group's instances): each named
/// (`name_field`) once, with an IPv4 InternalIP and maybe an IPv6 one.
fn nodes<'a>(
    errors: &mut Errors,
    list: &Path,
    name_field: &str,
    items: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>)>,
) {
    let mut seen = BTreeSet::new();
    for (i, (name, v4, v6)) in items.enumerate() {
        let at = list.index(i);
        required(errors, &at.field(name_field), name, "a node");
        ipv4(errors, &at.field("ipAddress"), v4);
        ipv6(errors, &at.field("ipv6Address"), v6);
        if !seen.insert(name) {
            errors.push(
                &at.field(name_field),
                ErrorKind::Duplicate,
                format!("{name:?} is listed twice"),
            );
        }
    }
}

pub fn validate_l4_load_balancer(lb: &L4LoadBalancer) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec = Path::root("spec");
    let s = &lb.spec;
    required(
        &mut errors,
        &spec.field("service"),
        &s.service,
        "the Service",
    );
    required(
        &mut errors,
        &spec.field("healthCheck"),
        &s.health_check,
        "a HealthCheck",
    );
    let frontends = spec.field("frontends");
    let mut seen = BTreeSet::new();
    for (i, f) in s.frontends.iter().enumerate() {
        let at = frontends.index(i);
        if !(1..=65535).contains(&f.port) {
            errors.invalid(
                &at.field("port"),
                format!("must be 1-65535, got {}", f.port),
            );
        }
        if f.ip_address.parse::<std::net::IpAddr>().is_err() {
            errors.invalid(
                &at.field("ipAddress"),
                format!("{:?} is not an IP address", f.ip_address),
            );
        }
        if !seen.insert(f) {
            errors.push(&at, ErrorKind::Duplicate, "listed twice");
        }
    }
    let (wrong, field) = match s.backends {
        Backends::NetworkEndpointGroups => (&s.instance_groups, "instanceGroups"),
        Backends::InstanceGroups => (&s.network_endpoint_groups, "networkEndpointGroups"),
    };
    if !wrong.is_empty() {
        errors.push(
            &spec.field(field),
            ErrorKind::Forbidden,
            format!("not with backends {:?}", s.backends),
        );
    }
    for (list, names) in [
        ("networkEndpointGroups", &s.network_endpoint_groups),
        ("instanceGroups", &s.instance_groups),
    ] {
        let path = spec.field(list);
        for (i, n) in names.iter().enumerate() {
            required(&mut errors, &path.index(i), n, "an object");
        }
        let mut seen = BTreeSet::new();
        for (i, n) in names.iter().enumerate() {
            if !seen.insert(n) {
                errors.push(
                    &path.index(i),
                    ErrorKind::Duplicate,
                    format!("{n:?} is listed twice"),
                );
            }
        }
    }
    errors.into_result()
}

pub fn validate_network_endpoint_group(neg: &NetworkEndpointGroup) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec = Path::root("spec");
    let s = &neg.spec;
    required(
        &mut errors,
        &spec.field("service"),
        &s.service,
        "the Service",
    );
    required(&mut errors, &spec.field("zone"), &s.zone, "the zone");
    let list = spec.field("endpoints");
    if s.endpoints.len() > MAX_NEG_ENDPOINTS {
        errors.push(
            &list,
            ErrorKind::TooMany,
            format!(
                "{} endpoints; at most {MAX_NEG_ENDPOINTS}",
                s.endpoints.len()
            ),
        );
    }
    nodes(
        &mut errors,
        &list,
        "instance",
        s.endpoints.iter().map(|e| {
            (
                e.instance.as_str(),
                e.ip_address.as_str(),
                e.ipv6_address.as_deref(),
            )
        }),
    );
    errors.into_result()
}

pub fn validate_instance_group(ig: &InstanceGroup) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec = Path::root("spec");
    required(&mut errors, &spec.field("zone"), &ig.spec.zone, "the zone");
    let list = spec.field("instances");
    nodes(
        &mut errors,
        &list,
        "name",
        ig.spec.instances.iter().map(|e| {
            (
                e.name.as_str(),
                e.ip_address.as_str(),
                e.ipv6_address.as_deref(),
            )
        }),
    );
    errors.into_result()
}
