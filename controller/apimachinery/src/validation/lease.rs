//! Lease (coordination.k8s.io): the duration positive, the transitions
//! not negative, a known or qualified strategy.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};

use super::field::{BadValue, Error, ErrorList, Path};
use super::{meta, names};

const STRATEGIES: [&str; 1] = ["OldestEmulationVersion"];

fn spec(s: Option<&LeaseSpec>) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(s) = s else {
        return errs;
    };
    let path = Path::new("spec");
    if let Some(d) = s.lease_duration_seconds.filter(|d| *d <= 0) {
        errs.push(Error::invalid(
            &path.child("leaseDurationSeconds"),
            d,
            "must be greater than 0",
        ));
    }
    if let Some(t) = s.lease_transitions.filter(|t| *t < 0) {
        errs.push(Error::invalid(
            &path.child("leaseTransitions"),
            t,
            names::NEGATIVE,
        ));
    }
    let strategy = s.strategy.as_deref().unwrap_or_default();
    if s.strategy.is_some() {
        // Upstream's path repeats the field's name.
        let at = path.child("strategy").child("strategy");
        if !strategy.contains('/') {
            if !STRATEGIES.contains(&strategy) {
                errs.push(Error::not_supported(
                    &at,
                    BadValue::json(&strategy),
                    &STRATEGIES,
                ));
            }
        } else {
            for m in names::qualified_name(strategy) {
                errs.push(Error::invalid(&at, BadValue::json(&strategy), m));
            }
        }
    }
    let preferred = s.preferred_holder.as_deref().unwrap_or_default();
    if !preferred.is_empty() && strategy.is_empty() {
        errs.push(Error::forbidden(
            &path.child("preferredHolder"),
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

pub fn validate_create(l: &Lease) -> ErrorList {
    let mut errs = meta::object_meta(&l.metadata, true, names::dns1123_subdomain);
    errs.extend(spec(l.spec.as_ref()));
    errs
}

pub fn validate_update(n: &Lease, o: &Lease) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(spec(n.spec.as_ref()));
    errs
}
