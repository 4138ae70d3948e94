//! Builders the unit tests share: policies written the way users write
//! them.

use sluice_model::cluster::{
    DailyMaintenanceWindow, ExclusionScope, MaintenanceExclusionOptions, MaintenanceWindow,
    RecurringTimeWindow, TimeWindow,
};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::Time;

/// An RFC 3339 instant (any offset).
pub fn at(s: &str) -> Timestamp {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// An interval, as an exclusion with `scope` when given.
pub fn tw(start: &str, end: &str, scope: Option<ExclusionScope>) -> TimeWindow {
    TimeWindow {
        start_time: Time(at(start)),
        end_time: Time(at(end)),
        maintenance_exclusion_options: scope
            .map(|s| MaintenanceExclusionOptions { scope: Some(s) }),
    }
}

/// GKE's daily window from `start` ("HH:MM").
pub fn daily(start: &str) -> MaintenanceWindow {
    MaintenanceWindow {
        daily_maintenance_window: Some(DailyMaintenanceWindow {
            start_time: start.into(),
            duration: None,
        }),
        ..Default::default()
    }
}

/// A recurring window whose first occurrence is `[start, end)`.
pub fn recurring(start: &str, end: &str, rule: &str) -> MaintenanceWindow {
    MaintenanceWindow {
        recurring_window: Some(RecurringTimeWindow {
            window: tw(start, end, None),
            recurrence: rule.into(),
        }),
        ..Default::default()
    }
}
