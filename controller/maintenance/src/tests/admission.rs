use super::*;
use crate::testing::{at, daily, recurring, tw};
use sluice_model::cluster::{
    Channel, ClusterSpec, ClusterStatus, MaintenancePolicy, MaintenanceWindow, ReleaseChannel,
};

fn cluster(channel: Option<Channel>, w: MaintenanceWindow) -> Cluster {
    Cluster::new(
        "default",
        ClusterSpec {
            maintenance_policy: Some(MaintenancePolicy { window: Some(w) }),
            release_channel: channel.map(|channel| ReleaseChannel { channel }),
            ..Default::default()
        },
    )
}

fn holidays(mut w: MaintenanceWindow, offset: &str) -> MaintenanceWindow {
    let t = |d: &str| format!("{d}T00:00:00{offset}");
    w.maintenance_exclusions.insert(
        "holiday-minor".into(),
        tw(
            &t("2026-09-30"),
            &t("2027-01-15"),
            Some(ExclusionScope::NoMinorUpgrades),
        ),
    );
    w.maintenance_exclusions.insert(
        "black-friday".into(),
        tw(&t("2026-11-19"), &t("2026-12-04"), None),
    );
    w.maintenance_exclusions.insert(
        "year-end".into(),
        tw(
            &t("2026-12-15"),
            &t("2027-01-05"),
            Some(ExclusionScope::NoUpgrades),
        ),
    );
    w
}

fn versions() -> Versions {
    Versions::example().expect("example")
}

const NOW: &str = "2026-09-01T00:00:00Z";

fn errors(c: &Cluster) -> FieldErrors {
    admit(c, &versions(), at(NOW)).expect_err("refused")
}

fn only(c: &Cluster, field: &str, words: &str) {
    let e = errors(c);
    assert_eq!(e.0.len(), 1, "{e}");
    assert_eq!(e.0[0].field, field, "{e}");
    assert!(e.0[0].message.contains(words), "{e}");
}

#[test]
fn the_holiday_policy_is_admitted_in_any_offset() {
    // spec: M7, M2 — the seed's season on the REGULAR channel (1.35, end
    // of life 2027-04-22), written in UTC or with offsets.
    for offset in ["Z", "+05:30", "-08:00"] {
        for w in [daily("03:00"), MaintenanceWindow::default()] {
            let c = cluster(Some(Channel::Regular), holidays(w, offset));
            assert_eq!(admit(&c, &versions(), at(NOW)), Ok(()), "{offset}");
        }
    }
}

#[test]
fn count_and_scope_limits() {
    // spec: M7 — narrower scopes only on a channel; at most 3 NO_UPGRADES.
    only(
        &cluster(None, holidays(daily("03:00"), "Z")),
        &format!("{EXCLUSIONS}[holiday-minor].maintenanceExclusionOptions.scope"),
        "release channel",
    );
    let mut w = daily("03:00");
    for i in 0..4 {
        let d = 1 + 7 * i;
        w.maintenance_exclusions.insert(
            format!("x{i}"),
            tw(
                &format!("2026-10-{d:02}T00:00:00Z"),
                &format!("2026-10-{d:02}T06:00:00Z"),
                None,
            ),
        );
    }
    only(&cluster(Some(Channel::Regular), w), EXCLUSIONS, "at most 3");
}

#[test]
fn the_window_must_give_48_hours_in_32_days() {
    // spec: M7 (REFERENCE) — one 4 h window a week gives 16–20 h.
    only(
        &cluster(
            None,
            recurring(
                "2026-01-03T02:00:00Z",
                "2026-01-03T06:00:00Z",
                "FREQ=WEEKLY;BYDAY=SA",
            ),
        ),
        RECURRING,
        "at least 48.0 h",
    );
    // Only stretches of at least 4 h count: 3 h a day is 96 h, none counted.
    let e = errors(&cluster(
        None,
        recurring("2026-01-03T02:00:00Z", "2026-01-03T05:00:00Z", "FREQ=DAILY"),
    ));
    assert!(e.0[0].message.contains("leave 0.0 h"), "{e}");
    // A window giving under 48 h is refused even with exclusions that
    // leave plenty: both rules hold apart.
    let mut weekly = recurring(
        "2026-01-03T02:00:00Z",
        "2026-01-03T06:00:00Z",
        "FREQ=WEEKLY;BYDAY=SA",
    );
    weekly.maintenance_exclusions.insert(
        "short".into(),
        tw("2026-10-01T00:00:00Z", "2026-10-02T00:00:00Z", None),
    );
    only(
        &cluster(None, weekly),
        RECURRING,
        "window's occurrences leave",
    );
    // Two 6 h days a week: 54 h or more in any 32 days.
    let ok = cluster(
        None,
        recurring(
            "2026-01-03T02:00:00Z",
            "2026-01-03T08:00:00Z",
            "FREQ=WEEKLY;BYDAY=SA,SU",
        ),
    );
    assert_eq!(admit(&ok, &versions(), at(NOW)), Ok(()));
    // A window that first opens in the future is judged from then on.
    let later = cluster(
        None,
        recurring("2026-12-01T00:00:00Z", "2026-12-01T06:00:00Z", "FREQ=DAILY"),
    );
    assert_eq!(admit(&later, &versions(), at(NOW)), Ok(()));
}

#[test]
fn no_upgrades_exclusions_must_leave_48_hours_in_32_days() {
    // spec: M7 (seed) — two long NO_UPGRADES exclusions a day apart leave
    // 24 h in some 32 days; two days apart, 48 h in every 32 days.
    let with_gap = |gap_end: &str| {
        let mut w = MaintenanceWindow::default();
        w.maintenance_exclusions.insert(
            "first".into(),
            tw("2026-10-01T00:00:00Z", "2026-10-31T00:00:00Z", None),
        );
        w.maintenance_exclusions
            .insert("second".into(), tw(gap_end, "2026-11-29T00:00:00Z", None));
        cluster(Some(Channel::Regular), w)
    };
    only(
        &with_gap("2026-11-01T00:00:00Z"),
        EXCLUSIONS,
        "leave 24.0 h",
    );
    assert_eq!(
        admit(&with_gap("2026-11-02T00:00:00Z"), &versions(), at(NOW)),
        Ok(())
    );
    // Other scopes do not count against availability.
    let mut w = MaintenanceWindow::default();
    w.maintenance_exclusions.insert(
        "long".into(),
        tw(
            "2026-10-01T00:00:00Z",
            "2027-01-01T00:00:00Z",
            Some(ExclusionScope::NoMinorOrNodeUpgrades),
        ),
    );
    assert_eq!(
        admit(&cluster(Some(Channel::Regular), w), &versions(), at(NOW)),
        Ok(())
    );
    // Exclusions over with already (M6) do not count either.
    let late = admit(
        &with_gap("2026-11-01T00:00:00Z"),
        &versions(),
        at("2026-12-01T00:00:00Z"),
    );
    assert_eq!(late, Ok(()));
}

#[test]
fn no_exclusion_past_the_minors_end_of_life() {
    // spec: M7 — STABLE's default is 1.34, whose end of life is
    // 2026-12-10: a no-minor exclusion to Jan 15 reaches past it.
    let c = cluster(Some(Channel::Stable), holidays(daily("03:00"), "Z"));
    let e = errors(&c);
    let fields: Vec<&str> = e.0.iter().map(|x| x.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            format!("{EXCLUSIONS}[holiday-minor].endTime"),
            format!("{EXCLUSIONS}[year-end].endTime")
        ],
        "{e}"
    );
    assert!(
        e.0[0]
            .message
            .contains("end of life of minor 1.34 (2026-12-10T00:00:00Z)"),
        "{e}"
    );
    // The control plane's own version wins over the channel's default.
    let mut on_135 = c.clone();
    on_135.status = Some(ClusterStatus {
        current_master_version: Some("1.35.1-gke.1396000".into()),
        ..Default::default()
    });
    assert_eq!(admit(&on_135, &versions(), at(NOW)), Ok(()));
    // A minor the table does not know cannot be checked.
    let mut unknown = c;
    unknown.status = Some(ClusterStatus {
        current_master_version: Some("1.40.0".into()),
        ..Default::default()
    });
    assert_eq!(admit(&unknown, &versions(), at(NOW)), Ok(()));
}

#[test]
fn rules_the_model_accepts_but_rrule_refuses_name_their_field() {
    let rule = "spec.maintenancePolicy.window.recurringWindow.recurrence";
    for bad in [
        "FREQ=DAILY;BYHOUR=3",
        "FREQ=WEEKLY;BYDAY=XX",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    ] {
        let c = cluster(
            None,
            recurring("2026-01-03T02:00:00Z", "2026-01-03T08:00:00Z", bad),
        );
        only(&c, rule, &format!("{bad:?}"));
    }
    // One the model refuses is named once.
    let c = cluster(
        None,
        recurring(
            "2026-01-03T02:00:00Z",
            "2026-01-03T08:00:00Z",
            "FREQ=HOURLY",
        ),
    );
    only(&c, rule, "not allowed");
}
