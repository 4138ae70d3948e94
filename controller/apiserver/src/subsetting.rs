//! N5 at admission: a `Cluster`'s `spec.networkConfig.enableL4ilbSubsetting`
//! can be turned on, never off, and the time it was turned on is kept in
//! `status.l4ilbSubsettingEnabledSince` by the API server itself, in the
//! same write that turns it on. The load-balancer loop needs that time
//! (only internal LBs created after it use NEGs); had the loop recorded
//! it, an LB made between the user's write and the loop's noticing would
//! be decided against the wrong side of it.
//!
//! Pure: the caller passes the stored object, the one about to be stored
//! and the time; the rule itself is `sluice_subsetting::lb_kind::Subsetting`.

use serde_json::{Map, Value};
use sluice_model::k8s::jiff::Timestamp;
use sluice_subsetting::lb_kind::Subsetting;

use super::meta::invalid;
use super::path::Target;
use super::status::ApiError;

const FIELD: &str = "spec.networkConfig.enableL4ilbSubsetting";
const SINCE: &str = "l4ilbSubsettingEnabledSince";

fn enabled(obj: &Value) -> bool {
    obj.pointer("/spec/networkConfig/enableL4ilbSubsetting")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn since(obj: &Value) -> Option<Timestamp> {
    obj.pointer("/status")?.get(SINCE)?.as_str()?.parse().ok()
}

/// Checks and completes a write of a `Cluster` (`old`: the stored object,
/// none on create); other kinds pass untouched. Turning subsetting off is
/// a 422 naming the field; turning it on stamps `now`; once stamped, the
/// time stays whatever a write sends (also through `/status`).
pub fn admit(t: &Target, old: Option<&Value>, new: &mut Value, now: &str) -> Result<(), ApiError> {
    if (t.resource.group, t.resource.kind) != ("sluice.dev", "Cluster") {
        return Ok(());
    }
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let now: Timestamp = now.parse().unwrap_or_else(|_| crate::clock::now());
    // A stored object that was on but carries no time (written before the
    // time was kept) counts as on since now: still never off again.
    let before = Subsetting {
        enabled_since: old.and_then(|o| {
            since(o)
                .or_else(|| enabled(o).then_some(now))
                .map(Into::into)
        }),
    };
    let after = before.set(enabled(new), now.into()).map_err(|e| {
        invalid(
            t,
            &name,
            FIELD,
            &format!("{e}: subsetting can be turned on, never off (N5)"),
        )
    })?;
    let Some(at) = after
        .enabled_since
        .and_then(|s| Timestamp::try_from(s).ok())
    else {
        return Ok(());
    };
    let Some(obj) = new.as_object_mut() else {
        return Ok(());
    };
    let status = obj
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    if let Some(s) = status.as_object_mut() {
        s.insert(SINCE.into(), Value::String(at.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;
    use serde_json::json;

    fn cluster(on: Option<bool>, since: Option<&str>) -> Value {
        let mut c = json!({"apiVersion": "sluice.dev/v1", "kind": "Cluster",
            "metadata": {"name": "default"}, "spec": {}});
        if let Some(on) = on {
            c["spec"]["networkConfig"] = json!({"enableL4ilbSubsetting": on});
        }
        if let Some(s) = since {
            c["status"] = json!({SINCE: s});
        }
        c
    }

    const T0: &str = "2026-11-27T05:00:00Z";
    const T1: &str = "2026-11-27T06:00:00Z";

    // spec: N5
    #[test]
    fn on_is_stamped_once_and_off_is_refused_naming_the_field() {
        let t = resolve("/apis/sluice.dev/v1/clusters/default").expect("path");
        // Created on: stamped at creation.
        let mut created = cluster(Some(true), None);
        admit(&t, None, &mut created, T0).expect("on at creation");
        assert_eq!(created["status"][SINCE], T0);
        // Off, then on later: stamped when turned on.
        let off = cluster(Some(false), None);
        let mut on = cluster(Some(true), None);
        admit(&t, Some(&off), &mut on, T1).expect("turned on");
        assert_eq!(on["status"][SINCE], T1);
        // On again later, the status sent without the time: the first
        // time stays.
        let mut again = cluster(Some(true), None);
        admit(&t, Some(&on), &mut again, "2026-11-27T07:00:00Z").expect("still on");
        assert_eq!(again["status"][SINCE], T1);
        // Off, by false or by removing the field: refused, naming it.
        for mut new in [cluster(Some(false), None), cluster(None, None)] {
            let e = admit(&t, Some(&on), &mut new, T1).expect_err("off");
            assert_eq!(e.code.as_u16(), 422);
            assert!(e.message.contains(FIELD), "{}", e.message);
            assert!(e.message.contains("never off"), "{}", e.message);
        }
        // Never on: nothing stamped.
        let mut plain = cluster(None, None);
        admit(&t, Some(&off), &mut plain, T1).expect("off stays off");
        assert!(plain.get("status").is_none());
        // Other kinds pass untouched.
        let np = resolve("/apis/sluice.dev/v1/nodepools/p").expect("path");
        let mut other = cluster(Some(false), None);
        admit(&np, Some(&on), &mut other, T1).expect("not a Cluster");
    }
}
