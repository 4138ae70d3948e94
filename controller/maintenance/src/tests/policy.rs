use super::*;
use crate::event::{Change, Plane, Trigger, Ungated};
use crate::testing::{at, daily, tw};
use crate::window::HORIZON_SECONDS;
use proptest::prelude::*;
use sluice_model::cluster::{MaintenanceWindow, RecurringTimeWindow};

const CP_MINOR: Event = Event::new(Plane::ControlPlane, Change::Minor);
const CP_PATCH: Event = Event::new(Plane::ControlPlane, Change::Patch);
const CP_VM: Event = Event::new(Plane::ControlPlane, Change::VmDisruption);
const NODE_MINOR: Event = Event::new(Plane::Node, Change::Minor);
const NODE_PATCH: Event = Event::new(Plane::Node, Change::Patch);
const NODE_VM: Event = Event::new(Plane::Node, Change::VmDisruption);

/// The seed's holiday season from `year` into the next, each time written
/// with `offset` (the same instants), over `w` as the window.
fn holidays(year: i32, offset: &str, w: MaintenanceWindow) -> Policy {
    let next = year + 1;
    let local = |date: String| -> String {
        // Midnight UTC, written in the offset's local time.
        let t = at(&format!("{date}T00:00:00Z"));
        let tz = sluice_model::k8s::jiff::tz::Offset::from_seconds(offset_seconds(offset))
            .expect("offset")
            .to_time_zone();
        t.to_zoned(tz).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    };
    let mut w = w;
    for (name, start, end, scope) in [
        (
            "holiday-minor",
            format!("{year}-09-30"),
            format!("{next}-01-15"),
            Some(ExclusionScope::NoMinorUpgrades),
        ),
        (
            "black-friday",
            format!("{year}-11-19"),
            format!("{year}-12-04"),
            None,
        ),
        (
            "year-end",
            format!("{year}-12-15"),
            format!("{next}-01-05"),
            Some(ExclusionScope::NoUpgrades),
        ),
    ] {
        w.maintenance_exclusions
            .insert(name.into(), tw(&local(start), &local(end), scope));
    }
    Policy::compile(&MaintenancePolicy { window: Some(w) }).expect("policy compiles")
}

fn offset_seconds(offset: &str) -> i32 {
    if offset == "Z" {
        return 0;
    }
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let (h, m) = offset[1..].split_once(':').expect("±HH:MM");
    sign * (h.parse::<i32>().expect("h") * 3600 + m.parse::<i32>().expect("m") * 60)
}

fn blocked_by(d: &Decision) -> Vec<String> {
    match d {
        Decision::Blocked { why, .. } => why
            .iter()
            .map(|b| match b {
                Blocker::WindowClosed => "window".to_string(),
                Blocker::Exclusion { name, .. } => name.clone(),
            })
            .collect(),
        Decision::Allowed { .. } => Vec::new(),
    }
}

fn next(d: &Decision) -> Option<Timestamp> {
    match d {
        Decision::Blocked { next, .. } => *next,
        Decision::Allowed { .. } => None,
    }
}

fn until(d: &Decision) -> Option<Timestamp> {
    match d {
        Decision::Allowed { until } => *until,
        Decision::Blocked { .. } => None,
    }
}

/// The seed's example, at `hh:mm` UTC on each named day.
fn check_holidays(p: &Policy, year: i32, time: &str) {
    let next_year = year + 1;
    let day = |d: String| at(&format!("{d}T{time}:00Z"));
    let ask = |e: Event, d: String| p.may_start(e, day(d)).expect("decides");
    // Blocked: a node patch on Nov 25 (no-upgrades), …
    let d = ask(NODE_PATCH, format!("{year}-11-25"));
    assert_eq!(blocked_by(&d), ["black-friday"], "{d:?}");
    // … a CP minor on Dec 20 (no-minor and no-upgrades), …
    let d = ask(CP_MINOR, format!("{year}-12-20"));
    assert_eq!(blocked_by(&d), ["holiday-minor", "year-end"], "{d:?}");
    // … a CP patch on Dec 25 (no-upgrades), …
    let d = ask(CP_PATCH, format!("{year}-12-25"));
    assert_eq!(blocked_by(&d), ["year-end"], "{d:?}");
    // … a node minor on Jan 1 (no-minor and no-upgrades).
    let d = ask(NODE_MINOR, format!("{next_year}-01-01"));
    assert_eq!(blocked_by(&d), ["holiday-minor", "year-end"], "{d:?}");
    // Allowed: a CP patch on Nov 10 and VM disruption on Dec 10.
    for (e, d) in [
        (CP_PATCH, format!("{year}-11-10")),
        (CP_VM, format!("{year}-12-10")),
        (NODE_VM, format!("{year}-12-10")),
    ] {
        assert!(ask(e, d.clone()).is_allowed(), "{e} on {d}");
    }
}

#[test]
fn the_seeds_holiday_example() {
    // spec: M5 — overlapping exclusions: blocked if any active one blocks.
    let p = holidays(2026, "Z", MaintenanceWindow::default());
    check_holidays(&p, 2026, "12:00");
    // With no window, when each may start again is where exclusions end.
    let when = |e: Event, t: &str| next(&p.may_start(e, at(t)).expect("decides"));
    assert_eq!(
        when(NODE_PATCH, "2026-11-25T12:00:00Z"),
        Some(at("2026-12-04T00:00:00Z"))
    );
    assert_eq!(
        when(CP_MINOR, "2026-12-20T12:00:00Z"),
        Some(at("2027-01-15T00:00:00Z"))
    );
    assert_eq!(
        when(CP_PATCH, "2026-12-25T12:00:00Z"),
        Some(at("2027-01-05T00:00:00Z"))
    );
    // M3's input: an allowance ends where the next blocking exclusion starts.
    let d = p
        .may_start(CP_PATCH, at("2026-11-10T12:00:00Z"))
        .expect("decides");
    assert_eq!(until(&d), Some(at("2026-11-19T00:00:00Z")));
    let d = p
        .may_start(NODE_VM, at("2026-12-10T12:00:00Z"))
        .expect("decides");
    assert_eq!(until(&d), Some(at("2026-12-15T00:00:00Z")));
    // spec: M6 — after every exclusion ends nothing blocks, with no end.
    let d = p
        .may_start(CP_MINOR, at("2027-01-15T00:00:00Z"))
        .expect("decides");
    assert_eq!(d, Decision::Allowed { until: None });
}

#[test]
fn the_holiday_example_across_years_and_offsets() {
    // spec: M5, M2 — the same answers in other years (2027 into the leap
    // year 2028, 2031 into 2032), inside a daily window, and with every
    // time written in other UTC offsets.
    for year in [2026, 2027, 2031] {
        for offset in ["Z", "+05:30", "-08:00", "+14:00"] {
            let p = holidays(year, offset, daily("03:00"));
            check_holidays(&p, year, "04:15");
            assert_eq!(
                p.exclusions().iter().map(|e| e.start).min(),
                Some(at(&format!("{year}-09-30T00:00:00Z"))),
                "{year} {offset}"
            );
            // Outside the daily window the window alone blocks.
            let d = p
                .may_start(CP_PATCH, at(&format!("{year}-11-10T08:00:00Z")))
                .expect("decides");
            assert_eq!(blocked_by(&d), ["window"]);
            assert_eq!(next(&d), Some(at(&format!("{year}-11-11T03:00:00Z"))));
            // The CP minor blocked on Dec 20 waits for the no-minor end and
            // then for the window's next opening.
            let d = p
                .may_start(CP_MINOR, at(&format!("{year}-12-20T04:00:00Z")))
                .expect("decides");
            assert_eq!(next(&d), Some(at(&format!("{}-01-15T03:00:00Z", year + 1))));
        }
    }
}

#[test]
fn the_holiday_example_in_a_window_across_new_year() {
    // spec: M5, M2 — a daily window from 23:00 to 05:00 UTC (written as
    // 18:00-05:00), open across the turn of the year.
    let w = crate::testing::recurring(
        "2026-01-01T18:00:00-05:00",
        "2026-01-02T00:00:00-05:00",
        "FREQ=DAILY",
    );
    for year in [2026, 2027] {
        let next_year = year + 1;
        let p = holidays(year, "-05:00", w.clone());
        check_holidays(&p, year, "04:15");
        // New Year's Eve at 23:30, inside the window: held by year-end until
        // Jan 5 00:00, when the window of Jan 4 is still open.
        let d = p
            .may_start(NODE_VM, at(&format!("{year}-12-31T23:30:00Z")))
            .expect("decides");
        assert_eq!(blocked_by(&d), ["year-end"]);
        assert_eq!(next(&d), Some(at(&format!("{next_year}-01-05T00:00:00Z"))));
        // After it, allowed until the window closes at 05:00.
        let d = p
            .may_start(CP_PATCH, at(&format!("{next_year}-01-06T00:30:00Z")))
            .expect("decides");
        assert_eq!(until(&d), Some(at(&format!("{next_year}-01-06T05:00:00Z"))));
        // A CP minor waits for holiday-minor's end, inside the window.
        let d = p
            .may_start(CP_MINOR, at(&format!("{next_year}-01-10T04:00:00Z")))
            .expect("decides");
        assert_eq!(next(&d), Some(at(&format!("{next_year}-01-15T00:00:00Z"))));
    }
}

#[test]
fn a_leap_day_inside_an_exclusion() {
    // spec: M5 — 2028-02-29 exists and is excluded.
    let mut w = daily("22:00");
    w.maintenance_exclusions.insert(
        "leap".into(),
        tw("2028-02-28T23:00:00Z", "2028-03-01T00:00:00Z", None),
    );
    let p = Policy::compile(&MaintenancePolicy { window: Some(w) }).expect("compiles");
    let d = p
        .may_start(NODE_PATCH, at("2028-02-29T22:30:00Z"))
        .expect("decides");
    assert_eq!(blocked_by(&d), ["leap"]);
    // The window of the 29th runs past midnight: open when the exclusion ends.
    assert_eq!(next(&d), Some(at("2028-03-01T00:00:00Z")));
    // The window of the 28th is cut short by the exclusion (M3's input).
    let d = p
        .may_start(NODE_PATCH, at("2028-02-28T22:30:00Z"))
        .expect("decides");
    assert_eq!(until(&d), Some(at("2028-02-28T23:00:00Z")));
}

#[test]
fn ungated_activities_are_allowed_anywhere() {
    // spec: M8 — repairs, security patches and host maintenance ignore the
    // policy; manual changes that recreate nodes do not.
    let p = holidays(2026, "Z", daily("03:00"));
    let t = at("2026-11-25T12:00:00Z");
    for u in Ungated::ALL {
        assert_eq!(
            p.check(Activity::Ungated(u), t),
            Ok(Decision::Allowed { until: None })
        );
    }
    let manual = |recreates_nodes| Activity::Maintenance {
        event: NODE_VM,
        trigger: Trigger::Manual { recreates_nodes },
    };
    assert!(p.check(manual(false), t).expect("decides").is_allowed());
    assert_eq!(p.check(manual(true), t), p.may_start(NODE_VM, t));
    assert!(!p.check(manual(true), t).expect("decides").is_allowed());
}

#[test]
fn backwards_exclusions_do_not_compile() {
    let mut w = MaintenanceWindow::default();
    w.maintenance_exclusions.insert(
        "oops".into(),
        tw("2026-12-10T00:00:00Z", "2026-12-09T00:00:00Z", None),
    );
    let e = Policy::compile(&MaintenancePolicy { window: Some(w) }).expect_err("backwards");
    assert!(
        e.to_string()
            .contains("maintenanceExclusions[oops].endTime"),
        "{e}"
    );
}

// ---- properties (spec: M1, M4, M5, M6) ----

const BASE: i64 = 1_798_761_600; // 2027-01-01T00:00:00Z, a Friday
const SPAN: i64 = 20 * 86_400;

fn ts_of(s: i64) -> Timestamp {
    Timestamp::from_second(s).expect("in range")
}

fn rfc(s: i64) -> String {
    ts_of(s).to_string()
}

fn arb_window() -> impl Strategy<Value = MaintenanceWindow> {
    prop_oneof![
        Just(MaintenanceWindow::default()),
        (0u8..24, 0u8..4).prop_map(|(h, q)| daily(&format!("{h:02}:{:02}", q * 15))),
        (
            quarters(7 * 86_400),
            quarters(3 * 86_400).prop_map(|l| l + 900),
            proptest::sample::subsequence(vec!["MO", "TU", "WE", "TH", "FR", "SA", "SU"], 1..4)
        )
            .prop_map(|(start, len, days)| MaintenanceWindow {
                recurring_window: Some(RecurringTimeWindow {
                    window: tw(
                        &rfc(BASE - 7 * 86_400 + start),
                        &rfc(BASE - 7 * 86_400 + start + len),
                        None
                    ),
                    recurrence: format!("FREQ=WEEKLY;BYDAY={}", days.join(",")),
                }),
                ..Default::default()
            }),
    ]
}

/// Multiples of 15 min below `limit`: bounds that meet each other often,
/// where off-by-one mistakes live.
fn quarters(limit: i64) -> impl Strategy<Value = i64> {
    (0..limit / 900).prop_map(|q| q * 900)
}

/// A time to ask at: on a quarter hour, or a second either side.
fn arb_dt() -> impl Strategy<Value = i64> {
    (quarters(SPAN), -1i64..=1).prop_map(|(q, d)| (q + d).max(0))
}

fn arb_scope() -> impl Strategy<Value = Option<ExclusionScope>> {
    prop_oneof![
        Just(None),
        Just(Some(ExclusionScope::NoUpgrades)),
        Just(Some(ExclusionScope::NoMinorUpgrades)),
        Just(Some(ExclusionScope::NoMinorOrNodeUpgrades)),
    ]
}

fn arb_policy() -> impl Strategy<Value = MaintenancePolicy> {
    (
        arb_window(),
        proptest::collection::vec(
            (
                quarters(SPAN),
                quarters(6 * 86_400).prop_map(|l| l + 900),
                arb_scope(),
            ),
            0..6,
        ),
    )
        .prop_map(|(mut w, ex)| {
            for (i, (start, len, scope)) in ex.into_iter().enumerate() {
                w.maintenance_exclusions.insert(
                    format!("x{i}"),
                    tw(&rfc(BASE + start), &rfc(BASE + start + len), scope),
                );
            }
            MaintenancePolicy { window: Some(w) }
        })
}

fn arb_event() -> impl Strategy<Value = Event> {
    proptest::sample::select(Event::ALL.to_vec())
}

/// The definition, from the compiled parts: open and not blocked at `t`.
fn allowed_by_definition(p: &Policy, open: &[Interval], e: Event, t: i64) -> bool {
    open.iter().any(|&(s, end)| s <= t && t < end)
        && !p
            .exclusions()
            .iter()
            .any(|x| blocks(x.scope, e) && x.active_at(ts_of(t)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // spec: M1, M4, M5 — (a) allowed ⇒ the window is open and no active
    // exclusion blocks; and the allowance lasts until its stated end.
    #[test]
    fn allowed_means_open_and_unblocked(policy in arb_policy(), e in arb_event(), dt in arb_dt()) {
        let p = Policy::compile(&policy).expect("compiles");
        let t = BASE + dt;
        let d = p.may_start(e, ts_of(t)).expect("decides");
        let open = p.window().intervals(t, t + 60 * 86_400).expect("expands");
        prop_assert_eq!(d.is_allowed(), allowed_by_definition(&p, &open, e, t));
        if let Decision::Allowed { until } = d {
            // None: no end within the horizon, so none in the days checked.
            let u = until.map_or(t + HORIZON_SECONDS, |u| u.as_second());
            prop_assert!(u > t);
            // Allowed every minute up to its end, and not at the end.
            let mut m = t;
            while m < u.min(t + 10 * 86_400) {
                prop_assert!(allowed_by_definition(&p, &open, e, m), "not allowed at {}", rfc(m));
                m += 60;
            }
            if u < t + 10 * 86_400 {
                prop_assert!(allowed_by_definition(&p, &open, e, u - 1), "not allowed just before until {}", rfc(u));
                prop_assert!(!allowed_by_definition(&p, &open, e, u), "still allowed at until {}", rfc(u));
            }
        }
    }

    // spec: M1, M5 — (b) the `next` of a refusal is allowed itself, and no
    // minute before it (from the time asked) is.
    #[test]
    fn next_is_the_earliest_allowed(policy in arb_policy(), e in arb_event(), dt in arb_dt()) {
        let p = Policy::compile(&policy).expect("compiles");
        let t = BASE + dt;
        let d = p.may_start(e, ts_of(t)).expect("decides");
        let Decision::Blocked { next, .. } = d else { return Ok(()); };
        let open = p.window().intervals(t, t + 60 * 86_400).expect("expands");
        let n = next.map(|n| n.as_second());
        if let Some(n) = n {
            prop_assert!(n > t);
            prop_assert!(p.may_start(e, ts_of(n)).expect("decides").is_allowed());
        }
        let end = n.unwrap_or(t + 30 * 86_400).min(t + 30 * 86_400);
        let mut m = t;
        while m < end {
            prop_assert!(!allowed_by_definition(&p, &open, e, m), "allowed at {} before next {:?}", rfc(m), next);
            m += 60;
        }
    }

    // spec: M6 — (c) exclusions that have ended block nothing: adding any
    // number of them changes no answer.
    #[test]
    fn expired_exclusions_never_block(
        policy in arb_policy(),
        e in arb_event(),
        dt in arb_dt(),
        expired in proptest::collection::vec((1i64..40 * 86_400, 60i64..30 * 86_400, arb_scope()), 1..4),
    ) {
        let t = BASE + dt;
        let mut more = policy.clone();
        let w = more.window.get_or_insert_with(Default::default);
        for (i, (ago, len, scope)) in expired.into_iter().enumerate() {
            let end = t - ago + 1; // ends at or before t
            let end = end.min(t);
            w.maintenance_exclusions.insert(format!("old{i}"), tw(&rfc(end - len), &rfc(end), scope));
        }
        let p = Policy::compile(&policy).expect("compiles");
        let q = Policy::compile(&more).expect("compiles");
        prop_assert_eq!(p.may_start(e, ts_of(t)).expect("decides"), q.may_start(e, ts_of(t)).expect("decides"));
    }
}
