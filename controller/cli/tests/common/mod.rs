//! What the CLI's tests share.

/// The seed's holiday season (spec M5) on a REGULAR cluster with a daily
/// window at 03:00 UTC, its times written in UTC+01:00.
pub const HOLIDAYS: &str = r#"apiVersion: sluice.dev/v1
kind: Cluster
metadata: {name: default}
spec:
  releaseChannel: {channel: REGULAR}
  maintenancePolicy:
    window:
      dailyMaintenanceWindow: {startTime: "03:00"}
      maintenanceExclusions:
        holiday-minor:
          startTime: "2026-09-30T01:00:00+01:00"
          endTime: "2027-01-15T01:00:00+01:00"
          maintenanceExclusionOptions: {scope: NO_MINOR_UPGRADES}
        black-friday:
          startTime: "2026-11-19T01:00:00+01:00"
          endTime: "2026-12-04T01:00:00+01:00"
        year-end:
          startTime: "2026-12-15T01:00:00+01:00"
          endTime: "2027-01-05T01:00:00+01:00"
          maintenanceExclusionOptions: {scope: NO_UPGRADES}
"#;
