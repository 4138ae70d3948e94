//! The rules a `Cluster` satisfies on its own (M7's counting and scope
//! limits, RRULE frequencies, one window at most). The M7 rules left to
//! `sluice-maintenance` are listed in `validation`'s own documentation.

use super::{ErrorKind, Errors, FieldErrors, Path};
use crate::cluster::{
    Cluster, DailyMaintenanceWindow, ExclusionScope, MaintenanceWindow, RecurringTimeWindow,
    TimeWindow,
};

/// M7: at most 3 `NO_UPGRADES` exclusions.
pub const MAX_NO_UPGRADES_EXCLUSIONS: usize = 3;
/// M7: at most 20 exclusions in all.
pub const MAX_EXCLUSIONS: usize = 20;
/// A `NO_UPGRADES` exclusion lasts at most 30 days (REFERENCE, GKE).
pub const MAX_NO_UPGRADES_SECONDS: i64 = 30 * 24 * 3600;

pub fn validate_cluster(cluster: &Cluster) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let path = Path::root("spec")
        .field("maintenancePolicy")
        .field("window");
    if let Some(window) = cluster
        .spec
        .maintenance_policy
        .as_ref()
        .and_then(|p| p.window.as_ref())
    {
        maintenance_window(
            &mut errors,
            &path,
            window,
            cluster.spec.on_release_channel(),
        );
    }
    errors.into_result()
}

fn maintenance_window(errors: &mut Errors, path: &Path, w: &MaintenanceWindow, on_channel: bool) {
    if let Some(recurring) = &w.recurring_window {
        recurring_window(errors, &path.field("recurringWindow"), recurring);
    }
    if let Some(daily) = &w.daily_maintenance_window {
        daily_window(errors, &path.field("dailyMaintenanceWindow"), daily);
        if w.recurring_window.is_some() {
            errors.push(
                &path.field("dailyMaintenanceWindow"),
                ErrorKind::Forbidden,
                "give dailyMaintenanceWindow or recurringWindow, not both (one window per cluster)",
            );
        }
    }
    let exclusions = path.field("maintenanceExclusions");
    for (name, exclusion) in &w.maintenance_exclusions {
        let at = exclusions.key(name);
        if name.is_empty() {
            errors.push(&at, ErrorKind::Required, "an exclusion needs a name");
        }
        ordered(errors, &at, exclusion);
        let scope = exclusion.scope();
        if scope == ExclusionScope::NoUpgrades {
            let secs = exclusion.end_time.0.as_second() - exclusion.start_time.0.as_second();
            if secs > MAX_NO_UPGRADES_SECONDS {
                errors.invalid(
                    &at.field("endTime"),
                    "a NO_UPGRADES exclusion lasts at most 30 days",
                );
            }
        } else if !on_channel {
            errors.push(
                &at.field("maintenanceExclusionOptions").field("scope"),
                ErrorKind::Forbidden,
                format!("scope {scope:?} needs a release channel (spec.releaseChannel); without one only NO_UPGRADES"),
            );
        }
    }
    let no_upgrades = w
        .maintenance_exclusions
        .values()
        .filter(|e| e.scope() == ExclusionScope::NoUpgrades)
        .count();
    if no_upgrades > MAX_NO_UPGRADES_EXCLUSIONS {
        errors.push(
            &exclusions,
            ErrorKind::TooMany,
            format!("{no_upgrades} NO_UPGRADES exclusions; at most {MAX_NO_UPGRADES_EXCLUSIONS}"),
        );
    }
    let all = w.maintenance_exclusions.len();
    if all > MAX_EXCLUSIONS {
        errors.push(
            &exclusions,
            ErrorKind::TooMany,
            format!("{all} exclusions; at most {MAX_EXCLUSIONS}"),
        );
    }
}

fn recurring_window(errors: &mut Errors, path: &Path, r: &RecurringTimeWindow) {
    let window = path.field("window");
    ordered(errors, &window, &r.window);
    if r.window.maintenance_exclusion_options.is_some() {
        errors.push(
            &window.field("maintenanceExclusionOptions"),
            ErrorKind::Forbidden,
            "only maintenance exclusions have exclusion options",
        );
    }
    if let Err(why) = check_rrule(&r.recurrence) {
        errors.invalid(
            &path.field("recurrence"),
            format!("{:?}: {why}", r.recurrence),
        );
    }
}

/// `HH:MM` in UTC, as GKE's `dailyMaintenanceWindow.startTime`.
pub fn parse_daily_start(s: &str) -> Option<(u8, u8)> {
    let (h, m) = s.split_once(':')?;
    let digits = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
    if !digits(h) || !digits(m) {
        return None;
    }
    let (h, m) = (h.parse::<u8>().ok()?, m.parse::<u8>().ok()?);
    (h < 24 && m < 60).then_some((h, m))
}

fn daily_window(errors: &mut Errors, path: &Path, d: &DailyMaintenanceWindow) {
    if parse_daily_start(&d.start_time).is_none() {
        errors.invalid(
            &path.field("startTime"),
            format!("{:?}: must be HH:MM in UTC (00:00 to 23:59)", d.start_time),
        );
    }
}

fn ordered(errors: &mut Errors, path: &Path, w: &TimeWindow) {
    if w.end_time <= w.start_time {
        errors.invalid(&path.field("endTime"), "must be after startTime");
    }
}

/// Enough of RFC 5545 to refuse what GKE refuses: a rule of `KEY=VALUE`
/// parts with a `FREQ` no finer than daily. Expanding the rule (and its
/// full grammar) is `sluice-maintenance`'s, with the `rrule` crate.
fn check_rrule(rule: &str) -> Result<(), String> {
    let body = rule.strip_prefix("RRULE:").unwrap_or(rule);
    let mut freq = None;
    for part in body.split(';') {
        let (key, value) = part
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
        if key == "FREQ" {
            if freq.is_some() {
                return Err("FREQ is given twice".into());
            }
            freq = Some(value);
        }
    }
    match freq {
        None => Err("no FREQ".into()),
        Some("DAILY" | "WEEKLY" | "MONTHLY" | "YEARLY") => Ok(()),
        Some(f @ ("HOURLY" | "MINUTELY" | "SECONDLY")) => Err(format!(
            "FREQ={f} is not allowed; use DAILY, WEEKLY or MONTHLY"
        )),
        Some(f) => Err(format!("FREQ={f} is not an RFC 5545 frequency")),
    }
}

#[cfg(test)]
mod tests {
    use super::check_rrule;

    #[test]
    fn rrule_forms() {
        for ok in [
            "FREQ=WEEKLY;BYDAY=SA,SU",
            "RRULE:FREQ=DAILY",
            "FREQ=MONTHLY;BYMONTHDAY=1",
        ] {
            assert_eq!(check_rrule(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "BYDAY=SA",
            "FREQ=WEEKLY;;",
            "FREQ=FORTNIGHTLY",
            "FREQ=DAILY;FREQ=WEEKLY",
        ] {
            assert!(check_rrule(bad).is_err(), "{bad:?}");
        }
    }
}
