//! Node: `ValidateNode` and `ValidateNodeUpdate` (the strategy runs both
//! on an update, so a bad taint is reported twice in the causes, once in
//! the message).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use super::container::quantity_value;
use super::field::{BadValue, Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::{ip, names, pod_spec};

/// Upstream's internal taint, marshalled with Go's field names.
fn taint_value(t: &Taint) -> BadValue {
    BadValue::Json(format!(
        "{{\"Key\":{},\"Value\":{},\"Effect\":{},\"TimeAdded\":{}}}",
        json!(t.key),
        json!(t.value.clone().unwrap_or_default()),
        json!(t.effect),
        json!(t.time_added)
    ))
}

/// `validateNodeTaints`: under `metadata.taints`, as upstream's path has
/// it.
fn taints(list: &[Taint]) -> ErrorList {
    let path = Path::new("metadata").child("taints");
    let mut errs = ErrorList::new();
    let mut seen = BTreeSet::new();
    for (i, t) in list.iter().enumerate() {
        let at = path.index(i);
        invalid_each(
            &mut errs,
            &at.child("key"),
            &t.key,
            names::qualified_name(&t.key),
        );
        let value = t.value.as_deref().unwrap_or_default();
        let msgs = names::label_value(value);
        if !msgs.is_empty() {
            errs.push(Error::invalid(&at.child("value"), value, msgs.join(";")));
        }
        pod_spec::taint_effect(&mut errs, &at.child("effect"), &t.effect);
        if !seen.insert((t.effect.as_str(), t.key.as_str())) {
            let mut e = Error::duplicate(&at, taint_value(t));
            e.detail = "taints must be unique by key and effect pair".into();
            errs.push(e);
        }
    }
    errs
}

fn resources(errs: &mut ErrorList, m: Option<&BTreeMap<String, Quantity>>, field: &str) {
    for (k, v) in m.into_iter().flatten() {
        let at = Path::new("status").child(field).child(k);
        if quantity_value(v).is_some_and(|q| q < 0.0) {
            errs.push(Error::invalid(&at, v.0.as_str(), names::NEGATIVE));
        }
    }
}

fn status_resources(errs: &mut ErrorList, n: &Node) {
    let status = n.status.as_ref();
    resources(errs, status.and_then(|s| s.capacity.as_ref()), "capacity");
    resources(
        errs,
        status.and_then(|s| s.allocatable.as_ref()),
        "allocatable",
    );
}

pub fn validate_create(n: &Node) -> ErrorList {
    let mut errs = meta::object_meta(&n.metadata, false, names::dns1123_subdomain);
    let empty = NodeSpec::default();
    let s = n.spec.as_ref().unwrap_or(&empty);
    errs.extend(taints(s.taints.as_deref().unwrap_or_default()));
    status_resources(&mut errs, n);
    let cidrs = s.pod_cidrs.as_deref().unwrap_or_default();
    let path = Path::new("spec").child("podCIDRs");
    for (i, c) in cidrs.iter().enumerate() {
        errs.extend(ip::valid_cidr(&path.index(i), c));
    }
    if cidrs.len() > 1 {
        let v6 = cidrs.iter().filter(|c| c.contains(':')).count();
        if cidrs.len() > 2 || v6 == 0 || v6 == cidrs.len() {
            errs.push(Error::invalid(
                &path,
                BadValue::json(&cidrs),
                "may specify no more than one CIDR for each IP family",
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, c) in cidrs.iter().enumerate() {
        if !seen.insert(c) {
            errs.push(Error::duplicate(&path.index(i), c));
        }
    }
    errs
}

pub fn validate_update(n: &Node, o: &Node) -> ErrorList {
    let mut errs = validate_create(n);
    errs.extend(meta::object_meta_update(&n.metadata, &o.metadata));
    status_resources(&mut errs, n);
    let mut addresses = BTreeSet::new();
    let list = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default();
    for (i, a) in list.iter().enumerate() {
        if !addresses.insert((a.type_.as_str(), a.address.as_str())) {
            errs.push(Error::duplicate(
                &Path::new("status").child("addresses").index(i),
                BadValue::Json(format!(
                    "{{\"Type\":{},\"Address\":{}}}",
                    json!(a.type_),
                    json!(a.address)
                )),
            ));
        }
    }
    let empty = NodeSpec::default();
    let (ns, os) = (
        n.spec.as_ref().unwrap_or(&empty),
        o.spec.as_ref().unwrap_or(&empty),
    );
    let (nc, oc) = (
        ns.pod_cidrs.as_deref().unwrap_or_default(),
        os.pod_cidrs.as_deref().unwrap_or_default(),
    );
    const CIDR: &str = "node updates may not change podCIDR except from \"\" to valid";
    let cidr_path = Path::new("spec").child("podCIDRs");
    if !oc.is_empty() {
        if oc.len() != nc.len() {
            errs.push(Error::forbidden(&cidr_path, CIDR));
        } else {
            for (a, b) in oc.iter().zip(nc) {
                if a != b {
                    errs.push(Error::forbidden(&cidr_path, CIDR));
                }
            }
        }
    }
    let old_id = os.provider_id.as_deref().unwrap_or_default();
    if !old_id.is_empty() && Some(old_id) != ns.provider_id.as_deref() {
        errs.push(Error::forbidden(
            &Path::new("spec").child("providerID"),
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if ns.external_id != os.external_id {
        errs.push(Error::forbidden(
            &Path::new("spec").child("externalID"),
            "may not be updated",
        ));
    }
    errs.extend(taints(ns.taints.as_deref().unwrap_or_default()));
    errs
}
