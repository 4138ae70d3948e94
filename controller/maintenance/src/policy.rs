//! The one question the controller asks (M1, M4, M5, M6): may an event of
//! this kind start at this instant, until when, and if not, why and when.

use sluice_model::cluster::{ClusterSpec, ExclusionScope, MaintenancePolicy};
use sluice_model::k8s::jiff::Timestamp;

use crate::event::{Activity, Event};
use crate::scope::blocks;
use crate::window::{bounded, ts, Interval, Window, WindowError, HORIZON_SECONDS};

pub const EXCLUSIONS: &str = "spec.maintenancePolicy.window.maintenanceExclusions";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Window(#[from] WindowError),
    #[error("{EXCLUSIONS}[{name}].endTime: {end} is not after startTime {start}")]
    Backwards {
        name: String,
        start: Timestamp,
        end: Timestamp,
    },
}

/// One exclusion, as compiled (M4: one-off, wins over the window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusion {
    pub name: String,
    pub scope: ExclusionScope,
    pub start: Timestamp,
    pub end: Timestamp,
}

impl Exclusion {
    /// Active from its start up to, not including, its end; M6: once
    /// ended it blocks nothing.
    pub fn active_at(&self, t: Timestamp) -> bool {
        self.start <= t && t < self.end
    }

    fn span(&self) -> Interval {
        (self.start.as_second(), self.end.as_second())
    }
}

/// Why an event may not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocker {
    /// The window is closed (M1).
    WindowClosed,
    /// An active exclusion whose scope blocks the event (M4, M5).
    Exclusion {
        name: String,
        scope: ExclusionScope,
        end: Timestamp,
    },
}

/// The answer to "may it start now?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It may start. `until`: when this allowance ends (the window closes
    /// or a blocking exclusion begins, whichever is first); M3: work still
    /// running then pauses at a safe point. None: not within the horizon.
    Allowed { until: Option<Timestamp> },
    /// It may not; `why` lists every reason, `next` the earliest instant
    /// from which it may (None: not within the horizon, about 2 years).
    Blocked {
        why: Vec<Blocker>,
        next: Option<Timestamp>,
    },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }
}

/// A cluster's maintenance policy, compiled once and asked many times.
#[derive(Clone, Debug)]
pub struct Policy {
    window: Window,
    exclusions: Vec<Exclusion>,
}

impl Policy {
    pub fn compile(p: &MaintenancePolicy) -> Result<Policy, PolicyError> {
        let w = p.window.as_ref();
        let window = Window::compile(w)?;
        let mut exclusions = Vec::new();
        for (name, e) in w.iter().flat_map(|w| &w.maintenance_exclusions) {
            let (start, end) = (e.start_time.0, e.end_time.0);
            if end <= start {
                return Err(PolicyError::Backwards {
                    name: name.clone(),
                    start,
                    end,
                });
            }
            exclusions.push(Exclusion {
                name: name.clone(),
                scope: e.scope(),
                start,
                end,
            });
        }
        Ok(Policy { window, exclusions })
    }

    /// The policy of a cluster's spec; none means maintenance at any time.
    pub fn of_spec(spec: &ClusterSpec) -> Result<Policy, PolicyError> {
        Policy::compile(&spec.maintenance_policy.clone().unwrap_or_default())
    }

    pub fn window(&self) -> &Window {
        &self.window
    }

    pub fn exclusions(&self) -> &[Exclusion] {
        &self.exclusions
    }

    fn blocking(&self, event: Event) -> impl Iterator<Item = &Exclusion> {
        self.exclusions
            .iter()
            .filter(move |e| blocks(e.scope, event))
    }

    /// May an event of kind `event` start at `at`? Exclusions win over the
    /// window (M4); any active exclusion that blocks it blocks it (M5);
    /// ended ones do not (M6).
    pub fn may_start(&self, event: Event, at: Timestamp) -> Result<Decision, PolicyError> {
        let t = at.as_second();
        let open = self
            .window
            .intervals(t, t.saturating_add(HORIZON_SECONDS))?;
        let stretch = open.iter().find(|&&(s, e)| s <= t && t < e);
        let mut why: Vec<Blocker> = Vec::new();
        if stretch.is_none() {
            why.push(Blocker::WindowClosed);
        }
        why.extend(
            self.blocking(event)
                .filter(|e| e.active_at(at))
                .map(|e| Blocker::Exclusion {
                    name: e.name.clone(),
                    scope: e.scope,
                    end: e.end,
                }),
        );
        match stretch {
            Some(&(_, end)) if why.is_empty() => {
                let next_exclusion = self
                    .blocking(event)
                    .map(|e| e.start.as_second())
                    .filter(|&s| s > t)
                    .min();
                let until = next_exclusion.map_or(end, |s| s.min(end));
                Ok(Decision::Allowed {
                    until: bounded(until, t),
                })
            }
            _ => Ok(Decision::Blocked {
                why,
                next: self.earliest(event, t, &open),
            }),
        }
    }

    /// The gate for anything the controller may start: what M8 leaves
    /// ungated (repairs, security patches, host maintenance, manual
    /// changes that recreate no node) is allowed at once, with no end.
    pub fn check(&self, activity: Activity, at: Timestamp) -> Result<Decision, PolicyError> {
        match activity.gated_event() {
            Some(event) => self.may_start(event, at),
            None => Ok(Decision::Allowed { until: None }),
        }
    }

    /// The earliest instant at or after `at` when `event` may start (None:
    /// not within the horizon).
    pub fn next_allowed(
        &self,
        event: Event,
        at: Timestamp,
    ) -> Result<Option<Timestamp>, PolicyError> {
        let t = at.as_second();
        let open = self
            .window
            .intervals(t, t.saturating_add(HORIZON_SECONDS))?;
        Ok(self.earliest(event, t, &open))
    }

    /// The earliest `c >= t` inside an open stretch and outside every
    /// blocking exclusion. Each step moves `c` past an exclusion's end or
    /// to a stretch's start, so the walk ends within their number.
    fn earliest(&self, event: Event, t: i64, open: &[Interval]) -> Option<Timestamp> {
        let spans: Vec<Interval> = self.blocking(event).map(Exclusion::span).collect();
        let horizon = t.saturating_add(HORIZON_SECONDS);
        let mut c = t;
        while c < horizon {
            if let Some(end) = spans
                .iter()
                .filter(|&&(s, e)| s <= c && c < e)
                .map(|&(_, e)| e)
                .max()
            {
                c = end;
                continue;
            }
            match open.iter().find(|&&(_, e)| e > c) {
                Some(&(s, _)) if s <= c => return Some(ts(c)),
                Some(&(s, _)) => c = s,
                None => return None,
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "tests/policy.rs"]
mod tests;
