//! EndpointSlice (discovery.k8s.io): the address type, each endpoint's
//! addresses by that type, ports named uniquely, and the address type
//! fixed once created.

use std::collections::BTreeSet;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};

use super::field::{Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::{ip, names};

const MAX_ENDPOINTS: usize = 1000;
const MAX_PORTS: usize = 20000;
const MAX_ADDRESSES: usize = 100;
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_ZONE_HINTS: usize = 8;
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// `IsFullyQualifiedDomainName`: one error at most.
fn fqdn(errs: &mut ErrorList, path: &Path, name: &str) {
    if name.is_empty() {
        errs.push(Error::required(path, ""));
        return;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let msgs = names::dns1123_subdomain(name);
    if !msgs.is_empty() {
        errs.push(Error::invalid(path, name, msgs.join(",")));
        return;
    }
    if name.split('.').count() < 2 {
        errs.push(Error::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        ));
        return;
    }
    for label in name.split('.') {
        let msgs = names::dns1123_label(label);
        if !msgs.is_empty() {
            errs.push(Error::invalid(path, label, msgs.join(",")));
            return;
        }
    }
}

fn address(errs: &mut ErrorList, path: &Path, kind: &str, a: &str) {
    match kind {
        "IPv4" | "IPv6" => {
            let ok = match ip::parse(a) {
                Some(std::net::IpAddr::V4(_)) => kind == "IPv4",
                Some(std::net::IpAddr::V6(_)) => kind == "IPv6",
                None => false,
            };
            if ok {
                errs.extend(ip::non_special(path, a));
            } else {
                errs.push(Error::invalid(
                    path,
                    a,
                    format!("must be a valid {kind} address"),
                ));
            }
        }
        "FQDN" => fqdn(errs, path, a),
        // Unknown types are refused at `addressType`; their addresses
        // are not checked.
        _ => {}
    }
}

fn endpoint(errs: &mut ErrorList, e: &Endpoint, kind: &str, path: &Path) {
    let ap = path.child("addresses");
    if e.addresses.is_empty() {
        errs.push(Error::required(&ap, "must contain at least 1 address"));
    } else if e.addresses.len() > MAX_ADDRESSES {
        errs.push(Error::too_many(&ap, e.addresses.len(), MAX_ADDRESSES));
    }
    for (i, a) in e.addresses.iter().enumerate() {
        address(errs, &ap.index(i), kind, a);
    }
    if let Some(n) = &e.node_name {
        invalid_each(
            errs,
            &path.child("nodeName"),
            n,
            names::dns1123_subdomain(n),
        );
    }
    let tp = path.child("deprecatedTopology");
    if let Some(t) = &e.deprecated_topology {
        if t.len() > MAX_TOPOLOGY_LABELS {
            errs.push(Error::too_many(&tp, t.len(), MAX_TOPOLOGY_LABELS));
        }
    }
    errs.extend(meta::labels(e.deprecated_topology.as_ref(), &tp));
    if let Some(h) = &e.hostname {
        invalid_each(errs, &path.child("hostname"), h, names::dns1123_label(h));
    }
    if let Some(zones) = e.hints.as_ref().and_then(|h| h.for_zones.as_ref()) {
        let fz = path.child("hints").child("forZones");
        if zones.len() > MAX_ZONE_HINTS {
            errs.push(Error::too_many(&fz, zones.len(), MAX_ZONE_HINTS));
            return;
        }
        let mut seen = BTreeSet::new();
        for (i, z) in zones.iter().enumerate() {
            let at = fz.index(i).child("name");
            if !seen.insert(z.name.as_str()) {
                errs.push(Error::duplicate(&at, z.name.as_str()));
            }
            invalid_each(errs, &at, &z.name, names::label_value(&z.name));
        }
    }
}

fn ports(errs: &mut ErrorList, list: &[EndpointPort]) {
    let path = Path::new("ports");
    if list.len() > MAX_PORTS {
        errs.push(Error::too_many(&path, list.len(), MAX_PORTS));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let at = path.index(i);
        let name = p.name.as_deref().unwrap_or_default();
        if !name.is_empty() {
            invalid_each(errs, &at.child("name"), name, names::dns1123_label(name));
        }
        if !seen.insert(name) {
            errs.push(Error::duplicate(&at.child("name"), name));
        }
        match p.protocol.as_deref() {
            None => errs.push(Error::required(&at.child("protocol"), "")),
            Some(pr) if !PROTOCOLS.contains(&pr) => {
                errs.push(Error::not_supported(&at.child("protocol"), pr, &PROTOCOLS));
            }
            Some(_) => {}
        }
        if let Some(a) = &p.app_protocol {
            invalid_each(errs, &at.child("appProtocol"), a, names::qualified_name(a));
        }
    }
}

pub fn validate_create(s: &EndpointSlice) -> ErrorList {
    let mut errs = meta::object_meta(&s.metadata, true, names::dns1123_subdomain);
    let at = Path::new("addressType");
    match s.address_type.as_str() {
        "" => errs.push(Error::required(&at, "")),
        t if !ADDRESS_TYPES.contains(&t) => errs.push(Error::not_supported(&at, t, &ADDRESS_TYPES)),
        _ => {}
    }
    let path = Path::new("endpoints");
    let endpoints = s.endpoints.as_deref().unwrap_or_default();
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(Error::too_many(&path, endpoints.len(), MAX_ENDPOINTS));
    } else {
        for (i, e) in endpoints.iter().enumerate() {
            endpoint(&mut errs, e, &s.address_type, &path.index(i));
        }
    }
    ports(&mut errs, s.ports.as_deref().unwrap_or_default());
    errs
}

pub fn validate_update(n: &EndpointSlice, o: &EndpointSlice) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(validate_create(n));
    if n.address_type != o.address_type {
        errs.push(Error::invalid(
            &Path::new("addressType"),
            n.address_type.as_str(),
            names::IMMUTABLE,
        ));
    }
    errs
}
