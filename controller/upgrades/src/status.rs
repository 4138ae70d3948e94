//! The operation's status as one pass sees it: the state, a message a
//! user reads, per-zone progress with its blocking reasons, and warnings
//! kept from earlier passes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use sluice_model::operation::{
    BlueGreenProgress, Metric, OperationProgress, OperationState, OperationStatus,
};

/// Metric names.
pub const NODES_TOTAL: &str = "nodes_total";
pub const NODES_UPGRADED: &str = "nodes_upgraded";

/// One zone's line in the status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ZoneLine {
    pub zone: String,
    pub state: OperationState,
    pub total: usize,
    pub upgraded: usize,
    pub blocking: Vec<String>,
}

pub(crate) fn metric(name: &str, value: usize) -> Metric {
    Metric {
        name: name.to_owned(),
        int_value: Some(i64::try_from(value).unwrap_or(i64::MAX)),
        ..Default::default()
    }
}

pub(crate) fn text_metric(name: &str, value: impl Into<String>) -> Metric {
    Metric {
        name: name.to_owned(),
        string_value: Some(value.into()),
        ..Default::default()
    }
}

/// What a pass found, for the status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub state: OperationState,
    pub message: String,
    /// The progress's name: `surge-upgrade`, `surge-rollback`, `in-place`,
    /// `blue-green-upgrade`, `blue-green-rollback`.
    pub stage_name: &'static str,
    pub zones: Vec<ZoneLine>,
    pub current: Option<String>,
    pub warnings: Vec<String>,
    /// The strategy's own metrics, after the node counts.
    pub metrics: Vec<Metric>,
    pub blue_green: Option<BlueGreenProgress>,
}

/// The new status: `previous`'s times and warnings kept, the summary's
/// warnings added, the end time set once the state is final.
pub(crate) fn build(
    previous: &OperationStatus,
    summary: Summary,
    now: Timestamp,
) -> OperationStatus {
    let Summary {
        state,
        message,
        stage_name,
        zones,
        current,
        warnings,
        metrics: extra,
        blue_green,
    } = summary;
    let total: usize = zones.iter().map(|z| z.total).sum();
    let upgraded: usize = zones.iter().map(|z| z.upgraded).sum();
    let stages = zones
        .into_iter()
        .map(|z| OperationProgress {
            name: Some(z.zone),
            status: Some(z.state),
            metrics: vec![
                metric(NODES_TOTAL, z.total),
                metric(NODES_UPGRADED, z.upgraded),
            ],
            stages: Vec::new(),
            blocking: z.blocking,
        })
        .collect();
    let mut all_warnings = previous.warnings.clone();
    for w in warnings {
        if !all_warnings.contains(&w) {
            all_warnings.push(w);
        }
    }
    // Cancelled before it started: no start time either.
    let started = !matches!(state, OperationState::Pending | OperationState::Cancelled);
    OperationStatus {
        status: Some(state),
        status_message: Some(message),
        start_time: previous
            .start_time
            .clone()
            .or_else(|| started.then_some(Time(now))),
        end_time: previous
            .end_time
            .clone()
            .or_else(|| state.is_final().then_some(Time(now))),
        progress: Some(OperationProgress {
            name: Some(stage_name.to_owned()),
            status: Some(state),
            metrics: [metric(NODES_TOTAL, total), metric(NODES_UPGRADED, upgraded)]
                .into_iter()
                .chain(extra)
                .collect(),
            stages,
            blocking: Vec::new(),
        }),
        zone: current,
        warnings: all_warnings,
        blue_green,
    }
}
