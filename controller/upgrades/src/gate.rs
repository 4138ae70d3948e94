//! Whether an operation may start new disruptions now. The planner only
//! reads it; [`crate::gate_of`] (`policy_gate.rs`) computes it from the
//! cluster's maintenance policy (M1–M8), and tests set it directly.

use k8s_openapi::jiff::Timestamp;

/// May the operation start disrupting more nodes now?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Yes; `until`: when the window closes, if it does.
    Open { until: Option<Timestamp> },
    /// No, for `reason` (`"maintenance window closed"`, `"exclusion
    /// holiday (NO_UPGRADES)"`); `next`: when it opens again, if known.
    Closed {
        reason: String,
        next: Option<Timestamp>,
    },
}

impl Gate {
    /// Always open (no maintenance policy).
    pub const OPEN: Gate = Gate::Open { until: None };

    pub fn is_open(&self) -> bool {
        matches!(self, Gate::Open { .. })
    }

    /// When the answer may change.
    pub fn changes_at(&self) -> Option<Timestamp> {
        match self {
            Gate::Open { until } => *until,
            Gate::Closed { next, .. } => *next,
        }
    }

    /// `"<reason>, next at <time>"` for a closed gate, for the status.
    pub fn why_closed(&self) -> Option<String> {
        match self {
            Gate::Open { .. } => None,
            Gate::Closed {
                reason,
                next: Some(t),
            } => Some(format!("{reason}, next at {t}")),
            Gate::Closed { reason, next: None } => Some(reason.clone()),
        }
    }
}
