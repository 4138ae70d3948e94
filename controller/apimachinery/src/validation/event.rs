//! core/v1 Event: the legacy checks upstream keeps for it (the event's
//! namespace against its object's, and for a new-style event with an
//! `eventTime` the reporting fields and their lengths).

use k8s_openapi::api::core::v1::Event;

use super::field::{Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::names;

const REPORTING_INSTANCE_MAX: usize = 128;
const ACTION_MAX: usize = 128;
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

fn legacy(e: &Event) -> ErrorList {
    let mut errs = ErrorList::new();
    let ns = e.metadata.namespace.as_deref().unwrap_or_default();
    let involved = e.involved_object.namespace.as_deref().unwrap_or_default();
    let io = Path::new("involvedObject").child("namespace");
    const MISMATCH: &str = "does not match event.namespace";
    if e.event_time.is_none() {
        let ok = if involved.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved
        };
        if !ok {
            errs.push(Error::invalid(&io, involved, MISMATCH));
        }
    } else {
        if involved.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(Error::invalid(&io, involved, MISMATCH));
        }
        // Through core/v1 the field is called reportingComponent.
        let rc = Path::new("reportingComponent");
        let controller = e.reporting_component.as_deref().unwrap_or_default();
        if controller.is_empty() {
            errs.push(Error::required(&rc, ""));
        }
        invalid_each(
            &mut errs,
            &rc,
            controller,
            names::qualified_name(controller),
        );
        for (field, v, max, required) in [
            (
                "reportingInstance",
                &e.reporting_instance,
                REPORTING_INSTANCE_MAX,
                true,
            ),
            ("action", &e.action, ACTION_MAX, true),
            ("reason", &e.reason, REASON_MAX, true),
            ("message", &e.message, NOTE_MAX, false),
        ] {
            let v = v.as_deref().unwrap_or_default();
            if required && v.is_empty() {
                errs.push(Error::required(&Path::new(field), ""));
            }
            if v.len() > max {
                errs.push(Error::invalid(
                    &Path::new(field),
                    "",
                    format!("can have at most {max} characters"),
                ));
            }
        }
    }
    invalid_each(
        &mut errs,
        &Path::new("namespace"),
        ns,
        names::dns1123_subdomain(ns),
    );
    errs
}

/// The generic metadata rules run only when the kind's own found
/// nothing, as upstream's create does.
pub fn validate_create(e: &Event) -> ErrorList {
    let errs = legacy(e);
    if !errs.is_empty() {
        return errs;
    }
    meta::object_meta(&e.metadata, true, meta::path_segment_name)
}

pub fn validate_update(n: &Event, o: &Event) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(legacy(n));
    errs
}
