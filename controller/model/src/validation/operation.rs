//! The rules an `Operation` satisfies on its own.

use super::{node_pool, ErrorKind, Errors, FieldErrors, Path};
use crate::node_pool::UpgradeStrategy;
use crate::operation::{
    BlueGreenPhase, Operation, OperationAction, OperationProgress, OperationSpec, OperationState,
    OperationType,
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
    // The snapshot was checked against its pool when the pool was written
    // (A4: autoscaled blue-green needs the pool's autoscaler); the
    // operation does not carry the pool's autoscaling to check it again.
    if let Some(u) = &spec.upgrade_settings {
        node_pool::upgrade_settings(errors, &path.field("upgradeSettings"), u, true);
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

/// The rules a change of `spec.action` obeys, against the operation as
/// stored: `COMPLETE` only while a blue-green pool soaks (B4), no `CANCEL`
/// or `ROLLBACK` once the blue pool is being deleted (B5, B6), no
/// `ROLLBACK` of an autoscaled blue-green upgrade (A4) nor of a completed
/// one (U6). An action already stored is not judged again: the phase it
/// was given in may have passed since.
pub fn validate_operation_update(new: &Operation, old: &Operation) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let Some(action) = new.spec.action.filter(|a| Some(*a) != old.spec.action) else {
        return Ok(());
    };
    let at = Path::root("spec").field("action");
    let status = old.status.clone().unwrap_or_default();
    let phase = status.blue_green.as_ref().and_then(|b| b.phase);
    let settings = old.spec.upgrade_settings.clone().unwrap_or_default();
    let blue_green = settings.strategy() == UpgradeStrategy::BlueGreen;
    let autoscaled = blue_green
        && settings
            .blue_green_settings
            .as_ref()
            .is_some_and(|b| b.autoscaled_rollout_policy.is_some());
    let where_ = match (phase, status.status) {
        (Some(p), _) => format!("phase {}", p.as_str()),
        (None, Some(s)) => format!("state {}", state_name(s)),
        (None, None) => "no phase yet".to_owned(),
    };
    let mut forbid = |why: String| errors.push(&at, ErrorKind::Forbidden, why);
    match action {
        OperationAction::Complete if !blue_green => forbid(
            "COMPLETE ends a blue-green upgrade's soak; this upgrade's strategy is not BLUE_GREEN"
                .to_owned(),
        ),
        OperationAction::Complete if phase != Some(BlueGreenPhase::NodePoolSoaking) => {
            forbid(format!(
                "COMPLETE ends the soak of a blue-green upgrade: allowed only in phase \
                 NODE_POOL_SOAKING, and the upgrade is in {where_}"
            ))
        }
        OperationAction::Cancel if phase == Some(BlueGreenPhase::DeletingBluePool) => forbid(
            "the blue pool is being deleted (phase DELETING_BLUE_POOL): this phase cannot be \
             cancelled"
                .to_owned(),
        ),
        OperationAction::Rollback if autoscaled => forbid(
            "an autoscaled blue-green upgrade cannot be rolled back; cancel it, or let it finish \
             and downgrade"
                .to_owned(),
        ),
        OperationAction::Rollback if phase == Some(BlueGreenPhase::DeletingBluePool) => forbid(
            "the blue pool is being deleted (phase DELETING_BLUE_POOL): there is nothing left to \
             roll back to"
                .to_owned(),
        ),
        OperationAction::Rollback if status.status == Some(OperationState::Done) => forbid(
            "the upgrade completed; a completed upgrade cannot be rolled back: downgrade the \
             node pool instead (a new upgrade to the earlier version)"
                .to_owned(),
        ),
        _ => {}
    }
    errors.into_result()
}

fn state_name(s: OperationState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{s:?}"))
}

fn upgrade_fields_forbidden(errors: &mut Errors, path: &Path, spec: &OperationSpec) {
    let set = [
        ("nodeVersion", spec.node_version.is_some()),
        ("config", spec.config.is_some()),
        ("upgradeSettings", spec.upgrade_settings.is_some()),
        ("action", spec.action.is_some()),
        ("respectPdb", spec.respect_pdb.is_some()),
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
