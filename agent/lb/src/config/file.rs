//! The configuration as a YAML file (`--config FILE`), for standalone use
//! and tests. Strict: an unknown field or a wrong value refuses the whole
//! file with an error naming the field (`services[0].frontends[1].port:
//! …`). The field names are the API objects' own.
//!
//! ```yaml
//! services:
//! - name: default/web
//!   frontends:
//!   - {ipAddress: 198.19.0.10, port: 80, protocol: TCP}
//!   healthCheck: {port: 10256, requestPath: /healthz, checkIntervalSec: 8,
//!                 timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 3}
//!   backends:
//!   - {node: node-a1, ipAddress: 198.18.1.2, ipv6Address: "fd00::1:2"}
//! ```
//!
//! Every `healthCheck` field is optional, defaulting to GKE's check for
//! `externalTrafficPolicy: Cluster`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use serde::Deserialize;

use super::{
    check_frontend, check_health, normalise, BackendConfig, FieldError, HealthCheck, LbConfig,
    RawCheck, ServiceConfig,
};
use crate::desired::{Frontend, Protocol};

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {error}")]
    Invalid { path: String, error: FieldError },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    services: Vec<FileService>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileService {
    name: String,
    frontends: Vec<FileFrontend>,
    #[serde(default)]
    health_check: FileCheck,
    #[serde(default)]
    backends: Vec<FileBackend>,
}

/// `TCP` or `UDP`, as in a Service's ports.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum WireProtocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
}

impl From<WireProtocol> for Protocol {
    fn from(p: WireProtocol) -> Protocol {
        match p {
            WireProtocol::Tcp => Protocol::Tcp,
            WireProtocol::Udp => Protocol::Udp,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileFrontend {
    ip_address: IpAddr,
    port: u16,
    protocol: WireProtocol,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileCheck {
    port: Option<u16>,
    request_path: Option<String>,
    check_interval_sec: Option<u64>,
    timeout_sec: Option<u64>,
    healthy_threshold: Option<u32>,
    unhealthy_threshold: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileBackend {
    node: String,
    ip_address: Ipv4Addr,
    ipv6_address: Option<Ipv6Addr>,
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<LbConfig, FileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: name.clone(),
        source,
    })?;
    parse(&text).map_err(|error| FileError::Invalid { path: name, error })
}

/// Parses and checks a configuration document.
pub fn parse(text: &str) -> Result<LbConfig, FieldError> {
    let de = serde_yaml::Deserializer::from_str(text);
    let doc: FileDoc = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        FieldError::new(
            if field == "." { "(document)" } else { &field }.to_string(),
            e.into_inner().to_string(),
        )
    })?;
    let mut services = Vec::with_capacity(doc.services.len());
    // Which Service took each name and each frontend first.
    let mut names = BTreeMap::new();
    let mut taken: BTreeMap<Frontend, String> = BTreeMap::new();
    for (i, s) in doc.services.into_iter().enumerate() {
        let at = format!("services[{i}]");
        if s.name.is_empty() {
            return Err(FieldError::new(format!("{at}.name"), "must not be empty"));
        }
        if let Some(first) = names.insert(s.name.clone(), i) {
            return Err(FieldError::new(
                format!("{at}.name"),
                format!("{:?} is already the name of services[{first}]", s.name),
            ));
        }
        let mut frontends = Vec::with_capacity(s.frontends.len());
        for (j, f) in s.frontends.iter().enumerate() {
            let fat = format!("{at}.frontends[{j}]");
            let fe = Frontend {
                address: f.ip_address,
                port: f.port,
                protocol: f.protocol.into(),
            };
            check_frontend(&fat, &fe)?;
            if let Some(other) = taken.get(&fe).filter(|o| **o != s.name) {
                return Err(FieldError::new(
                    fat,
                    format!("already a frontend of Service {other}"),
                ));
            }
            taken.insert(fe, s.name.clone());
            frontends.push(fe);
        }
        let health_check = file_check(&format!("{at}.healthCheck"), &s.health_check)?;
        if let Some(j) = s.backends.iter().position(|b| b.node.is_empty()) {
            return Err(FieldError::new(
                format!("{at}.backends[{j}].node"),
                "must not be empty",
            ));
        }
        let backends = s
            .backends
            .into_iter()
            .map(|b| BackendConfig {
                node: b.node,
                address: b.ip_address,
                ipv6: b.ipv6_address,
            })
            .collect();
        services.push(normalise(
            ServiceConfig {
                name: s.name,
                frontends,
                health_check,
                backends,
            },
            &at,
        )?);
    }
    services.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(LbConfig { services })
}

fn file_check(at: &str, c: &FileCheck) -> Result<HealthCheck, FieldError> {
    let d = HealthCheck::gke_cluster_default();
    check_health(
        at,
        &RawCheck {
            port: c.port.unwrap_or(d.port),
            path: c.request_path.as_deref().unwrap_or(&d.path),
            interval_s: c.check_interval_sec.unwrap_or(d.interval.as_secs()),
            timeout_s: c.timeout_sec.unwrap_or(d.timeout.as_secs()),
            healthy: c.healthy_threshold.unwrap_or(d.healthy_threshold),
            unhealthy: c.unhealthy_threshold.unwrap_or(d.unhealthy_threshold),
        },
    )
}
