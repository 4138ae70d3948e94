//! Writes of an `Operation` after its creation: its spec says what it
//! does and is fixed once made, but for `spec.action`, the one field a
//! user writes to steer it (cancel, resume, roll back), as GKE's
//! operations are steered by their own calls and never edited. Without
//! this, an edit of `nodeVersion` or `targetLink` mid-upgrade would turn a
//! running upgrade into another one on the nodes already marked.

use serde_json::Value;
use sluice_model::operation::Operation;
use sluice_model::validation::{validate_operation_update, ErrorKind, FieldError, FieldErrors};

use super::fields::field_errors;
use super::path::Target;
use super::status::ApiError;

fn is_operation(t: &Target) -> bool {
    (t.resource.group, t.resource.kind) == ("sluice.dev", "Operation")
}

/// The first member of `spec` other than `action` that differs between
/// `old` and `new`, as a field path.
pub fn changed_field(old: &Value, new: &Value) -> Option<String> {
    let empty = serde_json::Map::new();
    let spec = |v: &Value| {
        v.get("spec")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let (o, n) = (spec(old), spec(new));
    let mut keys: Vec<&String> = o
        .keys()
        .chain(n.keys())
        .filter(|k| *k != "action" && *k != "respectPdb")
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .find(|k| o.get(*k) != n.get(*k))
        .map(|k| format!("spec.{k}"))
}

/// Refuses an update of an Operation's spec other than `spec.action`,
/// and an action the stored operation's phase does not allow
/// (`validate_operation_update`).
pub fn admit(t: &Target, old: &Value, new: &Value, status_only: bool) -> Result<(), ApiError> {
    if !is_operation(t) || status_only {
        return Ok(());
    }
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(field) = changed_field(old, new) else {
        // Objects that do not decode are refused by the kind's own
        // validation, with the field named.
        let decoded = (
            serde_json::from_value::<Operation>(old.clone()),
            serde_json::from_value::<Operation>(new.clone()),
        );
        if let (Ok(old), Ok(new)) = decoded {
            validate_operation_update(&new, &old).map_err(|e| field_errors(t, name, &e))?;
        }
        return Ok(());
    };
    let errs = FieldErrors(vec![FieldError {
        field: field.clone(),
        kind: ErrorKind::Forbidden,
        message: format!(
            "{field} is fixed once the operation is made; only spec.action (CANCEL, RESUME, ROLLBACK, COMPLETE) and spec.respectPdb may change"
        ),
    }]);
    Err(field_errors(t, name, &errs))
}

#[cfg(test)]
mod tests {
    use super::changed_field;
    use serde_json::json;

    // spec: U6 — an operation is steered by spec.action alone.
    #[test]
    fn only_the_action_may_change() {
        let old = json!({"spec": {"operationType": "UPGRADE_NODES", "nodeVersion": "1.33.5",
            "targetLink": "/apis/sluice.dev/v1/nodepools/a"}});
        let mut new = old.clone();
        new["spec"]["action"] = json!("CANCEL");
        assert_eq!(changed_field(&old, &new), None);
        new["spec"]["nodeVersion"] = json!("1.33.6");
        assert_eq!(
            changed_field(&old, &new).as_deref(),
            Some("spec.nodeVersion")
        );
        let mut dropped = old.clone();
        dropped["spec"]
            .as_object_mut()
            .map(|m| m.remove("targetLink"));
        assert_eq!(
            changed_field(&old, &dropped).as_deref(),
            Some("spec.targetLink")
        );
    }
}
