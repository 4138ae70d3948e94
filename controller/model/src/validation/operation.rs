//! The rules an `Operation` satisfies on its own.

use super::{node_pool, ErrorKind, Errors, FieldErrors, Path};
use crate::operation::{
    Operation, OperationAction, OperationProgress, OperationSpec, OperationState, OperationType,
};

pub fn validate_operation(op: &Operation) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec_path = Path::root("spec");
    if op.spec.target_link.is_empty() {
        errors.push(
            &spec_path.field("targetLink"),
            ErrorKind::Required,
            "names the object the operation acts on",
        );
    }
    let state = op.status.as_ref().and_then(|s| s.status);
    match op.spec.operation_type {
        OperationType::UpgradeNodes | OperationType::AutoUpgradeNodes => {
            node_upgrade(&mut errors, &spec_path, &op.spec, state);
        }
        _ => upgrade_fields_forbidden(&mut errors, &spec_path, &op.spec),
    }
    if let Some(status) = &op.status {
        let path = Path::root("status");
        if let (Some(start), Some(end)) = (&status.start_time, &status.end_time) {
            if end < start {
                errors.invalid(&path.field("endTime"), "must not be before startTime");
            }
        }
        if let Some(progress) = &status.progress {
            self::progress(&mut errors, &path.field("progress"), progress);
        }
    }
    errors.into_result()
}

/// A node upgrade names its pool and what changes; its settings obey the
/// pool's rules; a completed upgrade is not rolled back (U6).
fn node_upgrade(
    errors: &mut Errors,
    path: &Path,
    spec: &OperationSpec,
    state: Option<OperationState>,
) {
    if !spec.target_link.is_empty() && spec.node_pool().is_none() {
        errors.invalid(
            &path.field("targetLink"),
            format!(
                "a node upgrade acts on a node pool: {:?} is not {}<name>",
                spec.target_link,
                OperationSpec::NODE_POOL_LINK
            ),
        );
    }
    if let Some(v) = &spec.node_version {
        if v.trim().is_empty() {
            errors.invalid(
                &path.field("nodeVersion"),
                "may not be empty (leave it out to keep the pool's version)",
            );
        } else if let Some(e) = super::version_error(v) {
            errors.invalid(&path.field("nodeVersion"), e);
        }
    }
    if spec.node_version.is_none() && spec.config.is_none() {
        errors.push(
            &path.field("nodeVersion"),
            ErrorKind::Required,
            "a node upgrade changes nodeVersion, config or both",
        );
    }
    if let Some(config) = &spec.config {
        node_pool::config(errors, &path.field("config"), config);
    }
    if let Some(u) = &spec.upgrade_settings {
        node_pool::upgrade_settings(errors, &path.field("upgradeSettings"), u, false);
    }
    if spec.action == Some(OperationAction::Rollback) && state == Some(OperationState::Done) {
        errors.push(
            &path.field("action"),
            ErrorKind::Forbidden,
            "the upgrade completed; a completed upgrade cannot be rolled back: downgrade the \
             node pool instead (a new upgrade to the earlier version)",
        );
    }
}

fn upgrade_fields_forbidden(errors: &mut Errors, path: &Path, spec: &OperationSpec) {
    let set = [
        ("nodeVersion", spec.node_version.is_some()),
        ("config", spec.config.is_some()),
        ("upgradeSettings", spec.upgrade_settings.is_some()),
        ("action", spec.action.is_some()),
    ];
    for (name, _) in set.iter().filter(|(_, is_set)| *is_set) {
        errors.push(
            &path.field(name),
            ErrorKind::Forbidden,
            "only for UPGRADE_NODES and AUTO_UPGRADE_NODES operations",
        );
    }
}

fn progress(errors: &mut Errors, path: &Path, p: &OperationProgress) {
    for (i, metric) in p.metrics.iter().enumerate() {
        let at = path.field("metrics").index(i);
        if metric.name.is_empty() {
            errors.push(
                &at.field("name"),
                ErrorKind::Required,
                "a metric needs a name",
            );
        }
        let values = [
            metric.int_value.is_some(),
            metric.double_value.is_some(),
            metric.string_value.is_some(),
        ];
        if values.iter().filter(|v| **v).count() != 1 {
            errors.invalid(
                &at,
                "set exactly one of intValue, doubleValue and stringValue",
            );
        }
    }
    for (i, stage) in p.stages.iter().enumerate() {
        progress(errors, &path.field("stages").index(i), stage);
    }
}
