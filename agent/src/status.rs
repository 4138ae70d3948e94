//! The status file: how tests, the lab and operators see what the agent has
//! applied without scraping logs.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::pods::{DrainProgress, EvictionReport, EvictionState};

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Incremented on every successful apply.
    pub generation: u64,
    /// The last attempt applied cleanly.
    pub synced: bool,
    pub datapath: String,
    /// Why the last attempt was rejected or failed; the previous state runs.
    pub error: Option<String>,
    pub services: usize,
    pub endpoints: usize,
    pub pods: usize,
    pub counters: Vec<(String, u64)>,
    /// Pods assigned to this node that the agent does not start, and why
    /// (`node cordoned`).
    pub pending_pods: Vec<PendingPod>,
    /// The last drain the Node asked for, kept after uncordon until the
    /// next drain begins.
    pub drain: Option<DrainStatus>,
    /// `namespace/name:port` of `Local` Services whose health-check port is
    /// taken (by another Service or the node server): their check is not
    /// served until the conflict goes.
    pub health_port_conflicts: Vec<String>,
    /// Evictions outside a drain (a pod left the desired state): under way
    /// and the last ones that ended.
    pub evictions: Vec<PodEviction>,
    /// Every PodDisruptionBudget of the state as the agent sees it: what
    /// the disruption controller would write into its status.
    pub budgets: Vec<BudgetReport>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BudgetReport {
    /// `namespace/name`.
    pub pdb: String,
    pub expected_pods: u32,
    pub current_healthy: u32,
    pub desired_healthy: u32,
    pub disruptions_allowed: u32,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PendingPod {
    pub namespace: String,
    pub name: String,
    pub reason: String,
}

/// Where a drain stands, for the controller or an operator to decide on the
/// pods it leaves alone (E2–E5).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    pub reason: String,
    /// The node takes no new pods (drain in progress or done, not
    /// uncordoned).
    pub cordoned: bool,
    /// Nothing left that this drain will do by itself.
    pub finished: bool,
    pub totals: DrainTotals,
    pub pods: Vec<PodEviction>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DrainTotals {
    /// Ended: exited gracefully or killed after the grace.
    pub evicted: usize,
    /// Pending, refused and retrying, or terminating.
    pub remaining: usize,
    /// Left alone by `safe-to-evict: "false"` (E2–E5, A3).
    pub protected: usize,
}

/// One pod's eviction.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodEviction {
    pub namespace: String,
    pub name: String,
    /// `node-upgrade`, `scale-down`, `user-drain`, `deletion`, ...
    pub reason: String,
    /// `pending`, `refused-by-pdb-retrying`, `terminating`,
    /// `exited-gracefully`, `killed-after-grace`, `refused-by-pdb-gave-up`,
    /// `protected`, `not-evicted`.
    pub phase: String,
    /// min(terminationGracePeriodSeconds, cap of the reason).
    pub grace_seconds: f64,
    /// Since the eviction was requested (an ended one: until it ended).
    pub elapsed_seconds: f64,
    pub pdb_refusals: u32,
    /// For `protected`: when the drain evicts it anyway (RFC 3339, UTC);
    /// absent: never by this kind of drain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_until: Option<String>,
}

/// `namespace/name`; a key without a namespace is in `default`.
fn split_key(key: &str) -> (String, String) {
    let (ns, name) = key.split_once('/').unwrap_or(("default", key));
    (ns.to_string(), name.to_string())
}

impl PendingPod {
    pub fn new(key: &str, reason: &str) -> Self {
        let (namespace, name) = split_key(key);
        PendingPod {
            namespace,
            name,
            reason: reason.to_string(),
        }
    }
}

impl PodEviction {
    /// `now`/`wall_now`: the same moment on the monotonic and the wall
    /// clock, to turn a protection's end into a date.
    pub fn from_report(r: &EvictionReport, now: Instant, wall_now: SystemTime) -> Self {
        let (namespace, name) = split_key(&r.key);
        let protected_until = match r.state {
            EvictionState::Protected { until: Some(u) } => {
                let wall = if u >= now {
                    wall_now.checked_add(u - now)
                } else {
                    wall_now.checked_sub(now - u)
                };
                wall.map(rfc3339)
            }
            _ => None,
        };
        PodEviction {
            namespace,
            name,
            reason: r.reason.as_str().to_string(),
            phase: r.state.as_str().to_string(),
            grace_seconds: secs(r.grace),
            elapsed_seconds: secs(r.elapsed),
            pdb_refusals: r.refusals,
            protected_until,
        }
    }
}

impl DrainStatus {
    pub fn from_progress(p: &DrainProgress, now: Instant, wall_now: SystemTime) -> Self {
        let mut totals = DrainTotals::default();
        for r in &p.pods {
            match r.state {
                EvictionState::ExitedGracefully
                | EvictionState::KilledAfterGrace
                | EvictionState::Deleted => totals.evicted += 1,
                EvictionState::Protected { .. } => totals.protected += 1,
                EvictionState::Pending
                | EvictionState::RefusedByPdbRetrying
                | EvictionState::Terminating => totals.remaining += 1,
                EvictionState::RefusedByPdbGaveUp | EvictionState::NotEvicted => {}
            }
        }
        DrainStatus {
            reason: p.reason.map(|r| r.as_str().to_string()).unwrap_or_default(),
            cordoned: p.cordoned,
            finished: p.finished,
            totals,
            pods: p
                .pods
                .iter()
                .map(|r| PodEviction::from_report(r, now, wall_now))
                .collect(),
        }
    }
}

/// Seconds with millisecond precision, enough for a report.
fn secs(d: Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}

/// `2026-11-23T03:45:28Z` (RFC 3339, UTC, whole seconds).
pub fn rfc3339(t: SystemTime) -> String {
    let s = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Write via a temporary file and rename, so a reader never sees half a file.
pub fn write_status(path: &Path, status: &Status) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let body = serde_json::to_vec_pretty(status).map_err(std::io::Error::other)?;
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::EvictionReason;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_164_800 + 3661); // leap day 2024
        assert_eq!(rfc3339(t), "2024-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn protected_pods_keep_their_date_and_totals_add_up() {
        // spec: E2, A3 — a protected pod is reported with when it may go.
        let now = Instant::now();
        let wall = UNIX_EPOCH + Duration::from_secs(1_709_164_800);
        let report = |key: &str, state| EvictionReport {
            key: key.into(),
            reason: EvictionReason::NodeUpgrade,
            state,
            grace: Duration::from_millis(30_000),
            elapsed: Duration::from_millis(1_250),
            refusals: 0,
        };
        let p = DrainProgress {
            reason: Some(EvictionReason::NodeUpgrade),
            cordoned: true,
            pods: vec![
                report("ns/a", EvictionState::ExitedGracefully),
                report(
                    "ns/b",
                    EvictionState::Protected {
                        until: Some(now + Duration::from_secs(86_400)),
                    },
                ),
                report("c", EvictionState::Terminating),
            ],
            ..DrainProgress::default()
        };
        let d = DrainStatus::from_progress(&p, now, wall);
        assert_eq!(
            d.totals,
            DrainTotals {
                evicted: 1,
                remaining: 1,
                protected: 1
            }
        );
        let j = serde_json::to_value(&d).expect("json");
        assert_eq!(j["cordoned"], true);
        assert_eq!(j["pods"][0]["namespace"], "ns");
        assert_eq!(j["pods"][0]["phase"], "exited-gracefully");
        assert_eq!(j["pods"][0]["graceSeconds"], 30.0);
        assert_eq!(j["pods"][0]["elapsedSeconds"], 1.25);
        assert!(j["pods"][0].get("protectedUntil").is_none());
        assert_eq!(j["pods"][1]["phase"], "protected");
        assert_eq!(j["pods"][1]["protectedUntil"], "2024-03-01T00:00:00Z");
        assert_eq!(j["pods"][2]["namespace"], "default");
    }
}
