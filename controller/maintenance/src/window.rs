//! The maintenance window compiled for evaluation: GKE's recurring window
//! (its first occurrence repeated by an RFC 5545 RRULE, evaluated in UTC,
//! M2), its daily window, or none (maintenance may happen at any time).
//!
//! Times inside are whole seconds since the Unix epoch: every bound the
//! policy speaks of is an RFC 3339 instant stored to the second, and
//! integer arithmetic keeps the interval algebra exact.

use chrono::{TimeZone, Utc};
use rrule::RRuleSet;
use sluice_model::cluster::{DailyMaintenanceWindow, MaintenanceWindow, RecurringTimeWindow};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::validation::parse_daily_start;

pub(crate) const DAY: i64 = 86_400;
pub(crate) const HOUR: i64 = 3_600;
/// How far ahead a question about the future is answered: about two years.
pub const HORIZON_SECONDS: i64 = 731 * DAY;
/// GKE's daily window lasts 4 h.
pub const DAILY_WINDOW_SECONDS: i64 = 4 * HOUR;
/// Occurrences one question may expand; a rule denser or older than this
/// allows is an error, never a hang.
pub const MAX_OCCURRENCES: usize = 200_000;

pub const RECURRING: &str = "spec.maintenancePolicy.window.recurringWindow";
pub const DAILY: &str = "spec.maintenancePolicy.window.dailyMaintenanceWindow";

/// A window that cannot be evaluated; each names the field and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error(
        "{field}: {value:?}: FREQ={freq} is not allowed; use DAILY, WEEKLY, MONTHLY or YEARLY"
    )]
    Frequency {
        field: String,
        value: String,
        freq: String,
    },
    #[error("{field}: {value:?}: {why}")]
    Malformed {
        field: String,
        value: String,
        why: String,
    },
    #[error("{field}: {value:?} never opens a window")]
    NeverOpens { field: String, value: String },
    #[error("{field}: {value:?} yields more than {MAX_OCCURRENCES} occurrences before {until}; the rule starts too long before the time asked about to be expanded")]
    TooManyOccurrences {
        field: String,
        value: String,
        until: Timestamp,
    },
}

impl WindowError {
    /// The field at fault.
    pub fn field(&self) -> &str {
        match self {
            WindowError::Frequency { field, .. }
            | WindowError::Malformed { field, .. }
            | WindowError::NeverOpens { field, .. }
            | WindowError::TooManyOccurrences { field, .. } => field,
        }
    }
}

/// Where the window stands at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// Open; `until` the end of this stretch of open time (None: not
    /// within the horizon, or never).
    Open { until: Option<Timestamp> },
    /// Closed; `opens` the next opening (None: not within the horizon).
    Closed { opens: Option<Timestamp> },
}

/// The compiled window.
#[derive(Clone, Debug)]
pub enum Window {
    /// No window: GKE may do maintenance at any time.
    Always,
    /// Every UTC day from `offset` seconds after midnight, for 4 h.
    Daily {
        offset: i64,
        start_time: String,
    },
    Recurring(Box<Recurring>),
}

/// A recurring window: occurrences of `rule` from `first_start`, each
/// open for `length` seconds.
#[derive(Clone, Debug)]
pub struct Recurring {
    first_start: i64,
    length: i64,
    recurrence: String,
    rule: RRuleSet,
}

/// Instant `s` (seconds) as a timestamp, clamped to what jiff can hold.
pub(crate) fn ts(s: i64) -> Timestamp {
    let s = s.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(s).unwrap_or(Timestamp::MAX)
}

/// Intervals are half-open `[start, end)` in seconds.
pub(crate) type Interval = (i64, i64);

/// An end at or past the horizon of a question asked at `from` reads as
/// "not within the horizon".
pub(crate) fn bounded(end: i64, from: i64) -> Option<Timestamp> {
    (end < from.saturating_add(HORIZON_SECONDS)).then(|| ts(end))
}

impl Window {
    /// The policy's window; none given is `Always`.
    pub fn compile(w: Option<&MaintenanceWindow>) -> Result<Window, WindowError> {
        let Some(w) = w else {
            return Ok(Window::Always);
        };
        match (&w.recurring_window, &w.daily_maintenance_window) {
            (Some(r), Some(_)) => Err(WindowError::Malformed {
                field: DAILY.into(),
                value: r.recurrence.clone(),
                why: "a recurringWindow is given too: give dailyMaintenanceWindow or recurringWindow, not both".into(),
            }),
            (Some(r), None) => Recurring::compile(r).map(|r| Window::Recurring(Box::new(r))),
            (None, Some(d)) => Window::daily(d),
            (None, None) => Ok(Window::Always),
        }
    }

    fn daily(d: &DailyMaintenanceWindow) -> Result<Window, WindowError> {
        let (h, m) = parse_daily_start(&d.start_time).ok_or_else(|| WindowError::Malformed {
            field: format!("{DAILY}.startTime"),
            value: d.start_time.clone(),
            why: "must be HH:MM in UTC (00:00 to 23:59)".into(),
        })?;
        Ok(Window::Daily {
            offset: i64::from(h) * HOUR + i64::from(m) * 60,
            start_time: d.start_time.clone(),
        })
    }

    /// Open or closed at `t`, and until or from when.
    pub fn state_at(&self, t: Timestamp) -> Result<WindowState, WindowError> {
        let t = t.as_second();
        let open = self.intervals(t, t.saturating_add(HORIZON_SECONDS))?;
        Ok(match open.iter().find(|(_, e)| *e > t) {
            Some(&(s, e)) if s <= t => WindowState::Open {
                until: bounded(e, t),
            },
            Some(&(s, _)) => WindowState::Closed {
                opens: bounded(s, t),
            },
            None => WindowState::Closed { opens: None },
        })
    }

    /// The first opening strictly after `t` (None: not within the horizon).
    pub fn next_opening(&self, t: Timestamp) -> Result<Option<Timestamp>, WindowError> {
        let t = t.as_second();
        let open = self.intervals(t, t.saturating_add(HORIZON_SECONDS))?;
        Ok(open
            .iter()
            .find(|(s, _)| *s > t)
            .and_then(|&(s, _)| bounded(s, t)))
    }

    /// The open time meeting `[from, to)`, as merged, sorted, disjoint
    /// intervals. The last may run past `to` (by at most the horizon), so
    /// a stretch's end is its real end; `Always` is one interval that
    /// ends past any horizon.
    pub(crate) fn intervals(&self, from: i64, to: i64) -> Result<Vec<Interval>, WindowError> {
        match self {
            Window::Always => Ok(vec![(
                from.min(to).saturating_sub(HORIZON_SECONDS),
                to.saturating_add(2 * HORIZON_SECONDS),
            )]),
            Window::Daily { offset, .. } => {
                let first_day = (from - DAILY_WINDOW_SECONDS - offset).div_euclid(DAY);
                let starts = (first_day..).map(|d| d * DAY + offset);
                Ok(merge(starts.map(Ok), DAILY_WINDOW_SECONDS, from, to)?)
            }
            Window::Recurring(r) => r.intervals(from, to),
        }
    }
}

/// Merge occurrences (sorted starts, each open `length`) into the open
/// stretches meeting `[from, to)`.
fn merge<E>(
    starts: impl Iterator<Item = Result<i64, E>>,
    length: i64,
    from: i64,
    to: i64,
) -> Result<Vec<Interval>, E> {
    let mut out: Vec<Interval> = Vec::new();
    let mut current: Option<Interval> = None;
    // A window that never closes would otherwise be followed forever.
    let stop = to.saturating_add(HORIZON_SECONDS);
    for start in starts {
        let start = start?;
        let end = start.saturating_add(length);
        match current {
            Some((s, e)) if start <= e => current = Some((s, e.max(end))),
            _ => {
                if let Some(done) = current.take() {
                    if done.1 > from {
                        out.push(done);
                    }
                }
                if start >= to || start > stop {
                    break;
                }
                current = Some((start, end));
            }
        }
        if start > stop {
            break;
        }
    }
    if let Some(done) = current {
        if done.1 > from {
            out.push(done);
        }
    }
    Ok(out)
}

impl Recurring {
    fn compile(r: &RecurringTimeWindow) -> Result<Recurring, WindowError> {
        let field = format!("{RECURRING}.recurrence");
        let value = r.recurrence.clone();
        let malformed = |why: String| WindowError::Malformed {
            field: field.clone(),
            value: value.clone(),
            why,
        };
        let first_start = r.window.start_time.0.as_second();
        let length = r.window.end_time.0.as_second() - first_start;
        if length <= 0 {
            return Err(WindowError::Malformed {
                field: format!("{RECURRING}.window.endTime"),
                value: r.window.end_time.0.to_string(),
                why: "must be after startTime".into(),
            });
        }
        let body = r.recurrence.strip_prefix("RRULE:").unwrap_or(&r.recurrence);
        // One rule, nothing else: no DTSTART, EXDATE or RDATE smuggled in
        // on another line.
        if body.contains(['\n', '\r', ':']) {
            return Err(malformed(
                "must be one RRULE (FREQ=...;...) and nothing else".into(),
            ));
        }
        let mut freq = None;
        for part in body.split(';') {
            let (key, val) = part
                .split_once('=')
                .ok_or_else(|| malformed(format!("{part:?} is not KEY=VALUE")))?;
            match key {
                "FREQ" => freq = Some(val),
                // The window's time of day is its startTime's; rules that
                // open it several times a day are sub-daily frequencies
                // in disguise, which GKE refuses.
                "BYHOUR" | "BYMINUTE" | "BYSECOND" => {
                    return Err(malformed(format!(
                        "{key} is not allowed: the window opens at its startTime's time of day"
                    )))
                }
                _ => {}
            }
        }
        match freq {
            Some(f @ ("HOURLY" | "MINUTELY" | "SECONDLY")) => {
                return Err(WindowError::Frequency {
                    field,
                    value,
                    freq: f.into(),
                })
            }
            None => return Err(malformed("no FREQ".into())),
            Some(_) => {}
        }
        let dtstart = Utc
            .timestamp_opt(first_start, 0)
            .single()
            .ok_or_else(|| malformed("startTime is out of range".into()))?;
        let text = format!("DTSTART:{}\nRRULE:{body}", dtstart.format("%Y%m%dT%H%M%SZ"));
        let rule = text
            .parse::<RRuleSet>()
            .map_err(|e| malformed(e.to_string()))?
            .limit();
        let compiled = Recurring {
            first_start,
            length,
            recurrence: r.recurrence.clone(),
            rule,
        };
        if compiled.starts().next().is_none() {
            return Err(WindowError::NeverOpens { field, value });
        }
        Ok(compiled)
    }

    /// Occurrence starts in order (the crate stops a rule that yields
    /// nothing for 100 000 periods: no hang).
    fn starts(&self) -> impl Iterator<Item = i64> + '_ {
        (&self.rule).into_iter().map(|d| d.timestamp())
    }

    fn intervals(&self, from: i64, to: i64) -> Result<Vec<Interval>, WindowError> {
        if to <= self.first_start.min(from) {
            return Ok(Vec::new());
        }
        let starts = self.starts().enumerate().map(|(i, s)| {
            if i >= MAX_OCCURRENCES {
                Err(WindowError::TooManyOccurrences {
                    field: format!("{RECURRING}.recurrence"),
                    value: self.recurrence.clone(),
                    until: ts(to),
                })
            } else {
                Ok(s)
            }
        });
        merge(starts, self.length, from, to)
    }
}

#[cfg(test)]
#[path = "tests/window.rs"]
mod tests;
