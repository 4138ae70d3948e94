//! M7 at admission: every write of a `Cluster` that changes its
//! maintenance policy (or what the policy is judged against: the release
//! channel, the control plane's version) is checked by
//! `sluice_maintenance::admission` and refused whole with a 422 naming
//! each broken field. M2: the policy's times are stored in UTC whatever
//! offset they were written with.
//!
//! Writes that leave those alone pass unchecked, so a Cluster admitted
//! once is not refused an unrelated edit only because time has moved on;
//! status writes (the controller's) are never checked.

use serde_json::Value;
use sluice_maintenance::window::DAILY_WINDOW_SECONDS;
use sluice_maintenance::Versions;
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::Timestamp;

use super::fields::field_errors;
use super::path::Target;
use super::status::ApiError;

/// GKE reports the daily window's length (output only) in this form.
fn daily_duration() -> String {
    format!("PT{}H0M0S", DAILY_WINDOW_SECONDS / 3600)
}

fn is_cluster(t: &Target) -> bool {
    (t.resource.group, t.resource.kind) == ("sluice.dev", "Cluster")
}

/// What the M7 checks read, to see whether a write changed it.
fn judged(obj: &Value) -> [Option<&Value>; 3] {
    [
        obj.pointer("/spec/maintenancePolicy"),
        obj.pointer("/spec/releaseChannel"),
        obj.pointer("/status/currentMasterVersion"),
    ]
}

/// `startTime` and `endTime` of `w` rewritten in UTC.
fn to_utc(w: Option<&mut Value>) {
    let Some(Value::Object(w)) = w else { return };
    for key in ["startTime", "endTime"] {
        if let Some(Value::String(s)) = w.get_mut(key) {
            if let Ok(t) = s.parse::<Timestamp>() {
                *s = t.to_string();
            }
        }
    }
}

/// M2: every time of the policy in UTC; the daily window's length filled
/// in, as GKE reports it.
fn normalise(obj: &mut Value) {
    let Some(window) = obj.pointer_mut("/spec/maintenancePolicy/window") else {
        return;
    };
    to_utc(window.pointer_mut("/recurringWindow/window"));
    if let Some(Value::Object(exclusions)) = window.get_mut("maintenanceExclusions") {
        for e in exclusions.values_mut() {
            to_utc(Some(e));
        }
    }
    if let Some(Value::Object(daily)) = window.get_mut("dailyMaintenanceWindow") {
        daily.insert("duration".into(), Value::String(daily_duration()));
    }
}

/// Checks and normalises a write of a `Cluster` (`old`: the stored
/// object, none on create); other kinds pass untouched.
pub fn admit(
    t: &Target,
    old: Option<&Value>,
    new: &mut Value,
    status_only: bool,
    versions: &Versions,
    now: Timestamp,
) -> Result<(), ApiError> {
    if !is_cluster(t) || status_only {
        return Ok(());
    }
    normalise(new);
    if old.is_some_and(|o| judged(o) == judged(new)) {
        return Ok(());
    }
    // The object was decoded and validated already (fields::check); one
    // that does not decode here has nothing more to check.
    let Ok(cluster) = serde_json::from_value::<Cluster>(new.clone()) else {
        return Ok(());
    };
    sluice_maintenance::admission::admit(&cluster, versions, now).map_err(|errs| {
        let name = cluster.metadata.name.as_deref().unwrap_or_default();
        field_errors(t, name, &errs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;
    use serde_json::json;

    const NOW: &str = "2026-09-01T00:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().expect("now")
    }

    fn versions() -> Versions {
        Versions::example().expect("example")
    }

    fn cluster(exclusions: Value) -> Value {
        json!({"apiVersion": "sluice.dev/v1", "kind": "Cluster",
            "metadata": {"name": "default"},
            "spec": {"releaseChannel": {"channel": "REGULAR"},
                "maintenancePolicy": {"window": {
                    "dailyMaintenanceWindow": {"startTime": "03:00"},
                    "maintenanceExclusions": exclusions}}}})
    }

    fn no_upgrades(n: usize) -> Value {
        let mut m = serde_json::Map::new();
        for i in 0..n {
            let day = 1 + 7 * i;
            m.insert(
                format!("x{i}"),
                json!({"startTime": format!("2026-10-{day:02}T02:00:00+02:00"),
                       "endTime": format!("2026-10-{day:02}T08:00:00+02:00")}),
            );
        }
        Value::Object(m)
    }

    // spec: M7, M2
    #[test]
    fn refused_whole_naming_the_field_and_stored_in_utc() {
        let t = resolve("/apis/sluice.dev/v1/clusters/default").expect("path");
        let mut ok = cluster(no_upgrades(3));
        admit(&t, None, &mut ok, false, &versions(), now()).expect("admitted");
        assert_eq!(
            ok.pointer("/spec/maintenancePolicy/window/maintenanceExclusions/x0/startTime"),
            Some(&json!("2026-10-01T00:00:00Z"))
        );
        assert_eq!(
            ok.pointer("/spec/maintenancePolicy/window/dailyMaintenanceWindow/duration"),
            Some(&json!("PT4H0M0S"))
        );
        let mut four = cluster(no_upgrades(4));
        let e = admit(&t, Some(&ok), &mut four, false, &versions(), now()).expect_err("four");
        assert_eq!(e.code.as_u16(), 422);
        assert!(
            e.message
                .contains("spec.maintenancePolicy.window.maintenanceExclusions: 4 NO_UPGRADES"),
            "{}",
            e.message
        );
        // Unchanged policy: not judged again, however late it is.
        let mut same = ok.clone();
        same["metadata"]["labels"] = json!({"a": "b"});
        let late: Timestamp = "2030-01-01T00:00:00Z".parse().expect("late");
        admit(&t, Some(&ok), &mut same, false, &versions(), late).expect("unchanged policy");
        // Status writes and other kinds pass.
        let mut status = cluster(no_upgrades(4));
        admit(&t, Some(&ok), &mut status, true, &versions(), now()).expect("status only");
        let np = resolve("/apis/sluice.dev/v1/nodepools/p").expect("path");
        admit(
            &np,
            None,
            &mut cluster(no_upgrades(4)),
            false,
            &versions(),
            now(),
        )
        .expect("not a Cluster");
    }
}
