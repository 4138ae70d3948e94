//! Printing answers: `human` lines or `json` for scripts. Pure: each
//! function returns the text.

use serde_json::{json, Value};
use sluice_maintenance::{Blocker, Decision, Event};
use sluice_model::k8s::jiff::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

/// `human()` for people, `value` as pretty JSON for scripts.
pub fn either<T: serde::Serialize>(
    format: Format,
    human: impl FnOnce() -> String,
    value: &T,
) -> String {
    match format {
        Format::Human => human(),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(value)
                .unwrap_or_else(|e| json!({"error": e.to_string()}).to_string())
        ),
    }
}

const NOT_WITHIN: &str = "none within about 2 years";

fn or_none(t: Option<Timestamp>) -> String {
    t.map_or_else(|| NOT_WITHIN.to_string(), |t| t.to_string())
}

fn blocker_line(b: &Blocker) -> String {
    match b {
        Blocker::WindowClosed => "the maintenance window is closed".into(),
        Blocker::Exclusion { name, scope, end } => {
            format!(
                "maintenance exclusion {name} ({}) until {end}",
                scope_name(*scope)
            )
        }
    }
}

fn scope_name(s: sluice_model::cluster::ExclusionScope) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| format!("{s:?}"))
}

fn blocker_json(b: &Blocker) -> Value {
    match b {
        Blocker::WindowClosed => json!({"reason": "WindowClosed"}),
        Blocker::Exclusion { name, scope, end } => json!({
            "reason": "Exclusion", "exclusion": name, "scope": scope_name(*scope), "endTime": end.to_string(),
        }),
    }
}

/// `sluice maintenance check`'s answer.
pub fn check(format: Format, event: Event, at: Timestamp, d: &Decision) -> String {
    match (format, d) {
        (Format::Human, Decision::Allowed { until }) => format!(
            "allowed: {event} may start at {at}\n  until: {}\n",
            until.map_or_else(
                || "no end within about 2 years".to_string(),
                |t| t.to_string()
            )
        ),
        (Format::Human, Decision::Blocked { why, next }) => {
            let mut s = format!("blocked: {event} may not start at {at}\n");
            for b in why {
                s.push_str(&format!("  why: {}\n", blocker_line(b)));
            }
            s.push_str(&format!("  next: {}\n", or_none(*next)));
            s
        }
        (Format::Json, d) => {
            let (until, why, next) = match d {
                Decision::Allowed { until } => (*until, Vec::new(), None),
                Decision::Blocked { why, next } => {
                    (None, why.iter().map(blocker_json).collect(), *next)
                }
            };
            let v = json!({
                "event": event.to_string(),
                "at": at.to_string(),
                "allowed": d.is_allowed(),
                "until": until.map(|t| t.to_string()),
                "blockedBy": why,
                "next": next.map(|t| t.to_string()),
            });
            format!("{v}\n")
        }
    }
}

/// `sluice maintenance next`'s answer: when `event` may start (or the
/// window next opens, without one) after `after`.
pub fn next(
    format: Format,
    event: Option<Event>,
    after: Timestamp,
    next: Option<Timestamp>,
) -> String {
    match format {
        Format::Human => {
            let what = event.map_or_else(
                || "the maintenance window opens".to_string(),
                |e| format!("{e} may start"),
            );
            format!("next: {what} at {} (after {after})\n", or_none(next))
        }
        Format::Json => {
            let v = json!({
                "event": event.map(|e| e.to_string()),
                "after": after.to_string(),
                "next": next.map(|t| t.to_string()),
            });
            format!("{v}\n")
        }
    }
}
