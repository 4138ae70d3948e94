use super::*;
use crate::testing::at;
use sluice_model::cluster::TimeWindow;
use sluice_model::k8s::Time;

fn recurring(start: &str, end: &str, rule: &str) -> Result<Window, WindowError> {
    Window::compile(Some(&MaintenanceWindow {
        recurring_window: Some(RecurringTimeWindow {
            window: TimeWindow {
                start_time: Time(at(start)),
                end_time: Time(at(end)),
                maintenance_exclusion_options: None,
            },
            recurrence: rule.into(),
        }),
        ..Default::default()
    }))
}

fn open(w: &Window, t: &str) -> Option<Option<Timestamp>> {
    match w.state_at(at(t)).expect("evaluates") {
        WindowState::Open { until } => Some(until),
        WindowState::Closed { .. } => None,
    }
}

#[test]
fn no_window_is_always_open() {
    // spec: M1 — without a window GKE may maintain at any time.
    let w = Window::compile(None).expect("none");
    assert_eq!(open(&w, "2026-11-27T08:00:00Z"), Some(None));
    assert_eq!(w.next_opening(at("2026-11-27T08:00:00Z")), Ok(None));
}

#[test]
fn weekdays_are_utc_weekdays() {
    // spec: M2 — Saturday 23:00 UTC for two hours, written as Sunday
    // 01:00+02:00: the rule's SA is the UTC Saturday.
    let w = recurring(
        "2026-01-04T01:00:00+02:00",
        "2026-01-04T03:00:00+02:00",
        "FREQ=WEEKLY;BYDAY=SA",
    )
    .expect("compiles");
    assert_eq!(
        open(&w, "2026-11-28T23:30:00Z"),
        Some(Some(at("2026-11-29T01:00:00Z")))
    );
    assert_eq!(open(&w, "2026-11-29T01:00:00Z"), None);
    assert_eq!(open(&w, "2026-11-28T22:59:59Z"), None);
    assert_eq!(
        w.next_opening(at("2026-11-29T01:00:00Z")),
        Ok(Some(at("2026-12-05T23:00:00Z")))
    );
    // Before its first occurrence the window has not begun.
    assert_eq!(open(&w, "2026-01-01T00:00:00Z"), None);
}

#[test]
fn a_window_across_new_year() {
    // spec: M2 — a yearly window from Dec 31 22:00 to Jan 1 04:00 UTC.
    let w = recurring(
        "2026-12-31T22:00:00Z",
        "2027-01-01T04:00:00Z",
        "RRULE:FREQ=YEARLY",
    )
    .expect("compiles");
    assert_eq!(
        open(&w, "2027-12-31T23:00:00Z"),
        Some(Some(at("2028-01-01T04:00:00Z")))
    );
    assert_eq!(
        open(&w, "2028-01-01T03:59:59Z"),
        Some(Some(at("2028-01-01T04:00:00Z")))
    );
    assert_eq!(open(&w, "2028-01-01T04:00:00Z"), None);
    assert_eq!(
        w.next_opening(at("2028-01-01T04:00:00Z")),
        Ok(Some(at("2028-12-31T22:00:00Z")))
    );
}

#[test]
fn overlapping_occurrences_merge() {
    // A 30-hour window every day never closes once open.
    let w =
        recurring("2026-01-01T00:00:00Z", "2026-01-02T06:00:00Z", "FREQ=DAILY").expect("compiles");
    assert_eq!(open(&w, "2026-06-01T12:00:00Z"), Some(None));
}

#[test]
fn refused_rules_name_the_field_and_the_value() {
    // REFERENCE: FREQ=HOURLY, MINUTELY and SECONDLY are refused, as are
    // malformed rules, each naming the field and the value.
    let field = "spec.maintenancePolicy.window.recurringWindow.recurrence";
    for rule in [
        "FREQ=HOURLY",
        "FREQ=MINUTELY;INTERVAL=30",
        "FREQ=SECONDLY",
        "",
        "FREQ=FORTNIGHTLY",
        "BYDAY=SA",
        "FREQ=WEEKLY;BYDAY=XX",
        "FREQ=DAILY;BYHOUR=1,2",
        "FREQ=WEEKLY;;",
        "FREQ=DAILY\nEXDATE:20260101T000000Z",
        "DTSTART:20260101T000000Z",
        "FREQ=DAILY;UNTIL=2026",
        "FREQ=DAILY;INTERVAL=-1",
        &format!("FREQ=DAILY;{}", "BYDAY=MO;".repeat(5000)),
    ] {
        let e = recurring("2026-01-01T00:00:00Z", "2026-01-01T06:00:00Z", rule).expect_err(rule);
        let text = e.to_string();
        assert!(text.starts_with(field), "{rule:?}: {text}");
        assert!(text.contains(&format!("{rule:?}")), "{rule:?}: {text}");
    }
    let e = recurring(
        "2026-01-01T00:00:00Z",
        "2026-01-01T06:00:00Z",
        "FREQ=HOURLY",
    )
    .expect_err("hourly");
    assert!(e.to_string().contains("FREQ=HOURLY is not allowed"), "{e}");
}

#[test]
fn a_rule_that_never_yields_is_an_error_not_a_hang() {
    // February 30th never comes.
    let e = recurring(
        "2026-01-01T00:00:00Z",
        "2026-01-01T06:00:00Z",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    )
    .expect_err("never");
    assert!(matches!(e, WindowError::NeverOpens { .. }), "{e}");
    assert!(e.to_string().contains("never opens"), "{e}");
}

#[test]
fn far_future_questions_are_bounded() {
    // A daily rule from 2026 asked about 2500: too many occurrences to
    // expand, said as an error naming the field.
    let w =
        recurring("2026-01-01T00:00:00Z", "2026-01-01T06:00:00Z", "FREQ=DAILY").expect("compiles");
    let e = w.state_at(at("2600-01-01T00:00:00Z")).expect_err("too far");
    assert!(matches!(e, WindowError::TooManyOccurrences { .. }), "{e}");
    // Years ahead is fine.
    assert!(w.state_at(at("2031-06-01T03:00:00Z")).is_ok());
    // A rule with an end: closed for good afterwards, no next opening.
    let w = recurring(
        "2026-01-01T00:00:00Z",
        "2026-01-01T06:00:00Z",
        "FREQ=DAILY;COUNT=3",
    )
    .expect("compiles");
    assert_eq!(
        w.state_at(at("2026-01-05T00:00:00Z")),
        Ok(WindowState::Closed { opens: None })
    );
}

#[test]
fn daily_windows_last_four_hours() {
    let w = Window::compile(Some(&MaintenanceWindow {
        daily_maintenance_window: Some(DailyMaintenanceWindow {
            start_time: "23:30".into(),
            duration: None,
        }),
        ..Default::default()
    }))
    .expect("compiles");
    assert_eq!(
        open(&w, "2026-11-27T01:00:00Z"),
        Some(Some(at("2026-11-27T03:30:00Z")))
    );
    assert_eq!(open(&w, "2026-11-27T03:30:00Z"), None);
    assert_eq!(
        w.next_opening(at("2026-11-27T03:30:00Z")),
        Ok(Some(at("2026-11-27T23:30:00Z")))
    );
}
