//! The rules an `Operation` satisfies on its own.

use super::{ErrorKind, Errors, FieldErrors, Path};
use crate::operation::{Operation, OperationProgress};

pub fn validate_operation(op: &Operation) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    if op.spec.target_link.is_empty() {
        errors.push(
            &Path::root("spec").field("targetLink"),
            ErrorKind::Required,
            "names the object the operation acts on",
        );
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
