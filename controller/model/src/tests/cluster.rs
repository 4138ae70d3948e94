use super::{assert_unknown_field, breaks, edited, round_trip, strict};
use crate::cluster::*;
use crate::k8s::Time;
use crate::validation::ErrorKind;

const FULL: &str = r#"
apiVersion: sluice.dev/v1
kind: Cluster
metadata:
  name: default
spec:
  maintenancePolicy:
    window:
      recurringWindow:
        window:
          startTime: 2026-01-03T02:00:00Z
          endTime: 2026-01-03T08:00:00Z
        recurrence: FREQ=WEEKLY;BYDAY=SA,SU
      maintenanceExclusions:
        holiday-minor:
          startTime: 2026-09-30T00:00:00Z
          endTime: 2027-01-15T00:00:00Z
          maintenanceExclusionOptions:
            scope: NO_MINOR_UPGRADES
        black-friday:
          startTime: 2026-11-19T00:00:00Z
          endTime: 2026-12-04T00:00:00Z
  releaseChannel:
    channel: REGULAR
  networkConfig:
    enableL4ilbSubsetting: true
  autoscaling:
    autoscalingProfile: OPTIMIZE_UTILIZATION
status:
  currentMasterVersion: 1.33.2
  statusMessage: running
"#;

fn exclusions(c: &mut Cluster) -> &mut std::collections::BTreeMap<String, TimeWindow> {
    let policy = c
        .spec
        .maintenance_policy
        .get_or_insert_with(Default::default);
    &mut policy
        .window
        .get_or_insert_with(Default::default)
        .maintenance_exclusions
}

fn at(s: &str) -> Time {
    super::time(s)
}

fn exclusion(start: &str, end: &str, scope: Option<ExclusionScope>) -> TimeWindow {
    TimeWindow {
        start_time: at(start),
        end_time: at(end),
        maintenance_exclusion_options: scope
            .map(|s| MaintenanceExclusionOptions { scope: Some(s) }),
    }
}

/// An edit that adds one exclusion.
fn with_exclusion(
    name: &str,
    start: &str,
    end: &str,
    scope: Option<ExclusionScope>,
) -> impl FnOnce(&mut Cluster) {
    let (name, window) = (name.to_string(), exclusion(start, end, scope));
    move |c: &mut Cluster| {
        exclusions(c).insert(name, window);
    }
}

const EXCLUSIONS: &str = "spec.maintenancePolicy.window.maintenanceExclusions";

#[test]
fn full_example_round_trips() {
    let c: Cluster = round_trip(FULL);
    assert!(c.spec.on_release_channel());
    let excl = &c
        .spec
        .maintenance_policy
        .and_then(|p| p.window)
        .expect("window")
        .maintenance_exclusions;
    // spec: M4 — no scope means NO_UPGRADES.
    assert_eq!(excl["black-friday"].scope(), ExclusionScope::NoUpgrades);
    assert_eq!(
        excl["holiday-minor"].scope(),
        ExclusionScope::NoMinorUpgrades
    );
}

#[test]
fn times_with_an_offset_are_kept_in_utc() {
    // spec: M2
    let c: Cluster =
        strict(&FULL.replace("2026-01-03T02:00:00Z", "2026-01-03T03:00:00+01:00")).expect("offset");
    let encoded = serde_yaml::to_string(&c).expect("encode");
    assert!(
        encoded.contains("startTime: 2026-01-03T02:00:00Z"),
        "{encoded}"
    );
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    assert_unknown_field::<Cluster>(
        &FULL.replace("enableL4ilbSubsetting", "enableL4IlbSubsetting"),
        "spec.networkConfig.enableL4IlbSubsetting",
    );
    assert_unknown_field::<Cluster>(
        &FULL.replace(
            "scope: NO_MINOR_UPGRADES",
            "scope: NO_MINOR_UPGRADES\n            reason: sales",
        ),
        &format!("{EXCLUSIONS}.holiday-minor.maintenanceExclusionOptions.reason"),
    );
}

#[test]
fn exclusions_end_after_they_start() {
    // spec: M7 — refused with a clear error.
    breaks(
        FULL,
        with_exclusion(
            "backwards",
            "2026-12-10T00:00:00Z",
            "2026-12-09T00:00:00Z",
            None,
        ),
        &format!("{EXCLUSIONS}[backwards].endTime"),
        ErrorKind::Invalid,
        "after startTime",
    );
}

#[test]
fn at_most_three_no_upgrades_exclusions() {
    // spec: M7
    breaks(
        FULL,
        |c: &mut Cluster| {
            for (i, day) in ["01", "05", "09"].iter().enumerate() {
                let start = format!("2026-03-{day}T00:00:00Z");
                let end = format!("2026-03-{day}T12:00:00Z");
                exclusions(c).insert(
                    format!("x{i}"),
                    exclusion(&start, &end, Some(ExclusionScope::NoUpgrades)),
                );
            }
        },
        EXCLUSIONS,
        ErrorKind::TooMany,
        "4 NO_UPGRADES exclusions; at most 3",
    );
}

#[test]
fn at_most_twenty_exclusions() {
    // spec: M7
    breaks(
        FULL,
        |c: &mut Cluster| {
            for i in 0..19 {
                let scope = Some(ExclusionScope::NoMinorOrNodeUpgrades);
                exclusions(c).insert(
                    format!("x{i:02}"),
                    exclusion("2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z", scope),
                );
            }
        },
        EXCLUSIONS,
        ErrorKind::TooMany,
        "21 exclusions; at most 20",
    );
}

#[test]
fn narrower_scopes_need_a_release_channel() {
    // spec: M7
    for channel in [
        None,
        Some(ReleaseChannel {
            channel: Channel::Unspecified,
        }),
    ] {
        breaks(
            FULL,
            |c: &mut Cluster| c.spec.release_channel = channel,
            &format!("{EXCLUSIONS}[holiday-minor].maintenanceExclusionOptions.scope"),
            ErrorKind::Forbidden,
            "needs a release channel",
        );
    }
    // NO_UPGRADES alone is fine without one.
    let c = edited(FULL, |c: &mut Cluster| {
        c.spec.release_channel = None;
        exclusions(c).remove("holiday-minor");
    });
    assert_eq!(crate::kind::SluiceKind::validate(&c), Ok(()));
}

#[test]
fn no_upgrades_lasts_at_most_thirty_days() {
    // spec: M7 (REFERENCE: NO_UPGRADES at most 30 days each)
    breaks(
        FULL,
        with_exclusion("long", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", None),
        &format!("{EXCLUSIONS}[long].endTime"),
        ErrorKind::Invalid,
        "30 days",
    );
}

fn recurring(c: &mut Cluster) -> &mut RecurringTimeWindow {
    let policy = c
        .spec
        .maintenance_policy
        .get_or_insert_with(Default::default);
    let window = policy.window.get_or_insert_with(Default::default);
    window
        .recurring_window
        .get_or_insert_with(|| RecurringTimeWindow {
            window: exclusion("2026-01-03T02:00:00Z", "2026-01-03T08:00:00Z", None),
            recurrence: "FREQ=DAILY".into(),
        })
}

#[test]
fn recurring_window_rules() {
    let at_window = "spec.maintenancePolicy.window.recurringWindow";
    // REFERENCE (RRULE): FREQ=HOURLY, MINUTELY and SECONDLY are refused.
    for freq in ["HOURLY", "MINUTELY", "SECONDLY"] {
        breaks(
            FULL,
            |c: &mut Cluster| recurring(c).recurrence = format!("FREQ={freq};INTERVAL=4"),
            &format!("{at_window}.recurrence"),
            ErrorKind::Invalid,
            "not allowed",
        );
    }
    // spec: M1 — one window, which ends after it starts.
    breaks(
        FULL,
        |c: &mut Cluster| recurring(c).window.end_time = at("2026-01-03T01:00:00Z"),
        &format!("{at_window}.window.endTime"),
        ErrorKind::Invalid,
        "after startTime",
    );
    breaks(
        FULL,
        |c: &mut Cluster| {
            recurring(c).window.maintenance_exclusion_options =
                Some(MaintenanceExclusionOptions::default());
        },
        &format!("{at_window}.window.maintenanceExclusionOptions"),
        ErrorKind::Forbidden,
        "only",
    );
}

fn daily(c: &mut Cluster, start: &str) {
    let policy = c
        .spec
        .maintenance_policy
        .get_or_insert_with(Default::default);
    policy
        .window
        .get_or_insert_with(Default::default)
        .daily_maintenance_window = Some(DailyMaintenanceWindow {
        start_time: start.into(),
        duration: None,
    });
}

fn without_recurring(c: &mut Cluster) {
    if let Some(w) = c
        .spec
        .maintenance_policy
        .as_mut()
        .and_then(|p| p.window.as_mut())
    {
        w.recurring_window = None;
    }
}

#[test]
fn daily_window_is_gke_shaped_and_alone() {
    // spec: M1 — GKE's dailyMaintenanceWindow decodes with its names.
    let yaml = FULL.replace(
        "      recurringWindow:\n        window:\n          startTime: 2026-01-03T02:00:00Z\n          endTime: 2026-01-03T08:00:00Z\n        recurrence: FREQ=WEEKLY;BYDAY=SA,SU\n",
        "      dailyMaintenanceWindow:\n        startTime: \"03:30\"\n        duration: PT4H0M0S\n",
    );
    let c: Cluster = round_trip(&yaml);
    let w = c
        .spec
        .maintenance_policy
        .and_then(|p| p.window)
        .expect("window");
    assert_eq!(
        w.daily_maintenance_window.map(|d| d.start_time).as_deref(),
        Some("03:30")
    );
    assert!(w.recurring_window.is_none());
    // spec: M1 — one window per cluster: both is refused, naming them.
    breaks(
        FULL,
        |c: &mut Cluster| daily(c, "03:00"),
        "spec.maintenancePolicy.window.dailyMaintenanceWindow",
        ErrorKind::Forbidden,
        "recurringWindow, not both",
    );
    for bad in [
        "", "3:00", "24:00", "12:60", "12:5x", "12:00:00", "ab:cd", "+1:00",
    ] {
        breaks(
            FULL,
            |c: &mut Cluster| {
                without_recurring(c);
                daily(c, bad);
            },
            "spec.maintenancePolicy.window.dailyMaintenanceWindow.startTime",
            ErrorKind::Invalid,
            "HH:MM",
        );
    }
    assert_unknown_field::<Cluster>(
        &yaml.replace("duration: PT4H0M0S", "durationHours: 4"),
        "spec.maintenancePolicy.window.dailyMaintenanceWindow.durationHours",
    );
}

#[test]
fn enum_values_are_gke_names() {
    let err = strict::<Cluster>(&FULL.replace("OPTIMIZE_UTILIZATION", "optimize-utilization"))
        .expect_err("cli spelling");
    assert_eq!(err.field, "spec.autoscaling.autoscalingProfile");
}
