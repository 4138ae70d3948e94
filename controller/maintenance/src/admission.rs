//! M7 at admission: a `Cluster` whose maintenance policy breaks a limit is
//! refused whole, every error naming its field. The rules a spec answers
//! on its own (scopes need a channel, at most 3 `NO_UPGRADES` and 20
//! exclusions, end after start, 30 days per `NO_UPGRADES`) are the
//! model's; this adds what needs the clock, the RRULE expanded and the
//! versions table.

use sluice_model::cluster::{Cluster, ExclusionScope};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::validation::{validate_cluster, ErrorKind, FieldError, FieldErrors};

use crate::availability::{least, subtract, NEEDED, PERIOD, STRETCH};
use crate::policy::{Policy, PolicyError, EXCLUSIONS};
use crate::versions::Versions;
use crate::window::{ts, Interval, Window, WindowError, WindowState, DAILY, DAY, HOUR, RECURRING};

/// How far ahead the availability rule is checked beyond the last
/// exclusion: a year, so monthly and yearly rules show their worst month.
const AHEAD: i64 = 366 * DAY;

fn error(field: &str, kind: ErrorKind, message: String) -> FieldError {
    FieldError {
        field: field.to_string(),
        kind,
        message,
    }
}

fn window_error(e: &WindowError) -> FieldError {
    let field = e.field();
    let text = e.to_string();
    // The message without the field it is filed under.
    let message = text
        .strip_prefix(&format!("{field}: "))
        .unwrap_or(&text)
        .to_string();
    error(field, ErrorKind::Invalid, message)
}

fn hours(s: i64) -> String {
    let h = s as f64 / HOUR as f64;
    format!("{h:.1} h")
}

/// Check `cluster`'s maintenance policy at `now` against every M7 limit.
pub fn admit(cluster: &Cluster, versions: &Versions, now: Timestamp) -> Result<(), FieldErrors> {
    let mut errors = match validate_cluster(cluster) {
        Ok(()) => Vec::new(),
        Err(FieldErrors(e)) => e,
    };
    let policy = cluster.spec.maintenance_policy.clone().unwrap_or_default();
    match Policy::compile(&policy) {
        Ok(p) => {
            errors.extend(availability(&p, now));
        }
        Err(PolicyError::Window(e)) => {
            let e = window_error(&e);
            if !errors.iter().any(|x| x.field == e.field) {
                errors.push(e);
            }
        }
        // The model's validation names a backwards exclusion already.
        Err(PolicyError::Backwards { .. }) => {}
    }
    errors.extend(end_of_life(cluster, versions));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(FieldErrors(errors))
    }
}

/// M7, twice over, each 48 h in every 32 days from now on, in stretches
/// of at least 4 h. The window on its own (REFERENCE: GKE's rule for the
/// recurring window), judged from its first opening. The `NO_UPGRADES`
/// exclusions on their own (the seed: "these exclusions must allow 48 h"),
/// not laid over the window: the seed's own holiday season with a 4 h
/// daily window leaves 40 h between Dec 4 and Jan 5, and it is the seed's
/// recommended use.
fn availability(p: &Policy, now: Timestamp) -> Vec<FieldError> {
    let now = now.as_second();
    let describe = |what: &str, (got, at): (i64, i64)| {
        format!(
            "{what} leave {} of maintenance availability (counting stretches of at least {}) in the 32 days from {}; at least {} in any 32 days are needed",
            hours(got),
            hours(STRETCH),
            ts(at),
            hours(NEEDED)
        )
    };
    let mut errors = Vec::new();
    let from = match p.window().state_at(ts(now)) {
        Ok(WindowState::Closed { opens: Some(t) }) => t.as_second().max(now),
        _ => now,
    };
    let to = from.saturating_add(AHEAD);
    match p.window().intervals(from, to.saturating_add(PERIOD)) {
        Ok(open) => {
            let alone = least(&open, from, to);
            if alone.0 < NEEDED {
                let field = match p.window() {
                    Window::Daily { .. } => DAILY,
                    _ => RECURRING,
                };
                errors.push(error(
                    field,
                    ErrorKind::Invalid,
                    describe("the window's occurrences", alone),
                ));
            }
        }
        Err(e) => errors.push(window_error(&e)),
    }
    let holes: Vec<Interval> = p
        .exclusions()
        .iter()
        .filter(|e| e.scope == ExclusionScope::NoUpgrades && e.end.as_second() > now)
        .map(|e| (e.start.as_second(), e.end.as_second()))
        .collect();
    if let Some(last) = holes.iter().map(|h| h.1).max() {
        let always = [(now.saturating_sub(PERIOD), last.saturating_add(2 * PERIOD))];
        let with = least(&subtract(&always, &holes), now, last);
        if with.0 < NEEDED {
            errors.push(error(
                EXCLUSIONS,
                ErrorKind::Invalid,
                describe("the NO_UPGRADES exclusions", with),
            ));
        }
    }
    errors
}

/// M7: no exclusion reaches past the end of life of the cluster's minor.
fn end_of_life(cluster: &Cluster, versions: &Versions) -> Vec<FieldError> {
    let Some(minor) = versions.current_minor(&cluster.spec, cluster.status.as_ref()) else {
        return Vec::new();
    };
    let Some(eol) = versions.end_of_life(&minor) else {
        return Vec::new();
    };
    let exclusions = cluster
        .spec
        .maintenance_policy
        .as_ref()
        .and_then(|p| p.window.as_ref())
        .map(|w| &w.maintenance_exclusions);
    exclusions
        .into_iter()
        .flatten()
        .filter(|(_, e)| e.end_time.0 > eol)
        .map(|(name, e)| {
            error(
                &format!("{EXCLUSIONS}[{name}].endTime"),
                ErrorKind::Invalid,
                format!(
                    "{} is past the end of life of minor {minor} ({eol}); an exclusion may end at it at the latest",
                    e.end_time.0
                ),
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "tests/admission.rs"]
mod tests;
