//! M7 at admission through the API with the real kubectl: a Cluster whose
//! maintenance policy breaks a limit is refused whole, the error naming
//! the field, whether created (`kubectl apply`), patched or applied
//! server-side; an admissible one is stored with its times in UTC (M2).
//! The versions table comes from `serve --versions`.

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};
use sluice_model::k8s::jiff::{tz::Offset, Timestamp};
use sluice_tests::ScratchDir;

const DAY: i64 = 86_400;
const EXCLUSIONS: &str = "spec.maintenancePolicy.window.maintenanceExclusions";

/// Midnight UTC `days` from today, as an instant.
fn day(days: i64) -> Timestamp {
    let now = Timestamp::now().as_second();
    Timestamp::from_second((now / DAY + days) * DAY).expect("in range")
}

/// `t` written in the local time of UTC+05:30.
fn in_india(t: Timestamp) -> String {
    let tz = Offset::from_seconds(5 * 3600 + 1800)
        .expect("offset")
        .to_time_zone();
    t.to_zoned(tz).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// A versions table whose REGULAR default (1.35) reaches its end of life
/// 200 days from now.
fn versions_file(dir: &ScratchDir) -> String {
    let table = format!(
        "minors:\n  \"1.35\": {{endOfLife: {}}}\nchannels:\n  REGULAR: {{default: 1.35.1-gke.1, available: [1.35.1-gke.1]}}\n",
        day(200)
    );
    dir.write("versions.yaml", &table).display().to_string()
}

/// A Cluster on REGULAR with a daily window and `exclusions` (name,
/// start and end in days from today, scope).
fn cluster(exclusions: &[(&str, i64, i64, &str)]) -> String {
    let mut y = String::from(
        "apiVersion: sluice.dev/v1\nkind: Cluster\nmetadata: {name: default}\nspec:\n  releaseChannel: {channel: REGULAR}\n  maintenancePolicy:\n    window:\n      dailyMaintenanceWindow: {startTime: \"03:00\"}\n      maintenanceExclusions:\n",
    );
    for (name, start, end, scope) in exclusions {
        y.push_str(&format!(
            "        {name}:\n          startTime: \"{}\"\n          endTime: \"{}\"\n          maintenanceExclusionOptions: {{scope: {scope}}}\n",
            in_india(day(*start)),
            in_india(day(*end)),
        ));
    }
    y
}

/// The stored Cluster `default` through kubectl's jsonpath `path`.
fn get(s: &Server, path: &str) -> String {
    let jsonpath = format!("jsonpath={path}");
    ok(
        s,
        "admin",
        &["get", "clusters.sluice.dev", "default", "-o", &jsonpath],
    )
}

fn refused(s: &Server, args: &[&str], field: &str, words: &str) {
    let o = s.kubectl("admin", args);
    let out = text(&o);
    assert!(!o.status.success(), "{args:?} was admitted:\n{out}");
    assert!(out.contains(field), "{args:?}: no {field} in:\n{out}");
    assert!(out.contains(words), "{args:?}: no {words:?} in:\n{out}");
}

fn policy_is_checked_at_admission(backend: Backend) {
    let tag = format!("maint-{backend:?}").to_lowercase();
    // Removed with the guard, also when the test fails.
    let scratch = ScratchDir::new(&tag);
    let versions = versions_file(&scratch);
    let s = Server::start_on(&tag, backend, &["--versions", &versions]);

    // spec: M7 — four NO_UPGRADES exclusions: refused, naming the field.
    let four: Vec<(String, i64)> = (0..4).map(|i| (format!("x{i}"), 10 + 7 * i)).collect();
    let four: Vec<(&str, i64, i64, &str)> = four
        .iter()
        .map(|(n, d)| (n.as_str(), *d, *d + 1, "NO_UPGRADES"))
        .collect();
    let f = write(&s, "four.yaml", &cluster(&four));
    refused(
        &s,
        &["apply", "-f", &f],
        EXCLUSIONS,
        "4 NO_UPGRADES exclusions; at most 3",
    );
    // spec: M7 — past the end of life of the cluster's minor (the
    // channel's default, 1.35, from --versions): only the versions table
    // can tell.
    let late = cluster(&[("freeze", 150, 250, "NO_MINOR_UPGRADES")]);
    let f = write(&s, "late.yaml", &late);
    refused(
        &s,
        &["apply", "-f", &f],
        &format!("{EXCLUSIONS}[freeze].endTime"),
        "end of life of minor 1.35",
    );
    let o = s.kubectl("admin", &["get", "clusters.sluice.dev", "default"]);
    assert!(
        !o.status.success(),
        "a refused Cluster was stored:\n{}",
        text(&o)
    );

    // spec: M7, M2 — an admissible policy written in UTC+05:30 is stored
    // in UTC.
    let good = cluster(&[
        ("minor-freeze", 20, 120, "NO_MINOR_UPGRADES"),
        ("launch", 30, 40, "NO_UPGRADES"),
    ]);
    let f = write(&s, "good.yaml", &good);
    ok(&s, "admin", &["apply", "-f", &f]);
    let start = get(
        &s,
        "{.spec.maintenancePolicy.window.maintenanceExclusions.launch.startTime} {.spec.maintenancePolicy.window.dailyMaintenanceWindow.duration}",
    );
    assert_eq!(start, format!("{} PT4H0M0S", day(30)));

    // spec: M7 — a merge patch adding NO_UPGRADES exclusions that leave a
    // day between them (24 h in some 32 days): refused whole.
    let patch = format!(
        r#"{{"spec":{{"maintenancePolicy":{{"window":{{"maintenanceExclusions":{{"launch":null,"a":{{"startTime":"{}","endTime":"{}"}},"b":{{"startTime":"{}","endTime":"{}"}}}}}}}}}}}}"#,
        day(30),
        day(55),
        day(56),
        day(80),
    );
    refused(
        &s,
        &[
            "patch",
            "clusters.sluice.dev",
            "default",
            "--type=merge",
            "-p",
            &patch,
        ],
        EXCLUSIONS,
        "leave 24.0 h of maintenance availability",
    );
    // spec: M7 — server-side apply is checked too.
    let f = write(&s, "late-ssa.yaml", &late);
    refused(
        &s,
        &["apply", "--server-side", "--force-conflicts", "-f", &f],
        &format!("{EXCLUSIONS}[freeze].endTime"),
        "end of life of minor 1.35",
    );
    // Nothing refused reached the store.
    let names = get(&s, "{.spec.maintenancePolicy.window.maintenanceExclusions}");
    assert!(
        names.contains("launch") && !names.contains("\"freeze\""),
        "{names}"
    );
}

on_both_stores!(policy_is_checked_at_admission);
