//! Pod create: `ValidatePodCreate` (metadata, the pod's annotations, its
//! spec, and the rules only a Pod has, not a template).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::field::{Error, ErrorList, Path};
use super::{meta, names, pod_spec};

pub const MIRROR: &str = "kubernetes.io/config.mirror";
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// `ValidatePodSpecificAnnotations`.
fn annotations(p: &Pod, spec: &PodSpec) -> ErrorList {
    let mut errs = ErrorList::new();
    let path = Path::new("metadata").child("annotations");
    let Some(a) = &p.metadata.annotations else {
        return errs;
    };
    if let Some(v) = a.get(MIRROR) {
        if spec.node_name.as_deref().unwrap_or_default().is_empty() {
            errs.push(Error::invalid(
                &path.key(MIRROR),
                v,
                "must set spec.nodeName if mirror pod annotation is set",
            ));
        }
    }
    if let Some(v) = a.get(DELETION_COST) {
        if v.parse::<i32>().is_err() {
            errs.push(Error::invalid(
                &path.key(DELETION_COST),
                v,
                "must be a 32bit integer",
            ));
        }
    }
    errs
}

fn images_trimmed(errs: &mut ErrorList, list: &[Container], path: &Path) {
    for (i, c) in list.iter().enumerate() {
        let image = c.image.as_deref().unwrap_or_default();
        if image.trim() != image {
            errs.push(Error::invalid(
                &path.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
}

/// `validatePodMetadataAndSpec`: what a create and an update share.
pub fn metadata_and_spec(p: &Pod) -> ErrorList {
    let empty = PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty);
    let path = Path::new("spec");
    let mut errs = meta::object_meta(&p.metadata, true, names::dns1123_subdomain);
    errs.extend(annotations(p, spec));
    errs.extend(pod_spec::validate(spec, &path, true));
    images_trimmed(&mut errs, &spec.containers, &path.child("containers"));
    images_trimmed(
        &mut errs,
        spec.init_containers.as_deref().unwrap_or_default(),
        &path.child("initContainers"),
    );
    errs
}

pub fn validate_create(p: &Pod) -> ErrorList {
    let mut errs = metadata_and_spec(p);
    let empty = PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty);
    let path = Path::new("spec");
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(Error::forbidden(
            &path.child("ephemeralContainers"),
            "cannot be set on create",
        ));
    }
    let gated = spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty());
    if gated && !spec.node_name.as_deref().unwrap_or_default().is_empty() {
        errs.push(Error::forbidden(
            &path.child("nodeName"),
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs
}
