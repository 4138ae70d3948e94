//! Operations as people and scripts read them: `operations list`'s table,
//! `describe`, and `wait`'s progress lines. Pure: each function returns
//! the text; the time a line is printed at is passed in.

use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::node_pool::{UpgradeSettings, UpgradeStrategy};
use sluice_model::operation::{
    BlueGreenProgress, Operation, OperationAction, OperationProgress, OperationState,
};

use sluice_upgrades::{NODES_TOTAL, NODES_UPGRADED, SOAK_LEFT_SECONDS};

use crate::request::state_name;

fn metric(p: &OperationProgress, name: &str) -> Option<i64> {
    p.metrics
        .iter()
        .find(|m| m.name == name)
        .and_then(|m| m.int_value)
}

/// `upgraded/total` (`5/12`), `-` before the controller counted.
pub fn counts(p: Option<&OperationProgress>) -> String {
    let total = p.and_then(|p| metric(p, NODES_TOTAL));
    let done = p.and_then(|p| metric(p, NODES_UPGRADED));
    match (done, total) {
        (Some(d), Some(t)) => format!("{d}/{t}"),
        (None, Some(t)) => format!("0/{t}"),
        _ => "-".into(),
    }
}

fn state(op: &Operation) -> Option<OperationState> {
    op.status.as_ref().and_then(|s| s.status)
}

fn type_name(op: &Operation) -> String {
    serde_json::to_value(op.spec.operation_type)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The target as gcloud shows it: the pool's name for a pool link.
fn target(op: &Operation) -> String {
    op.spec
        .node_pool()
        .map_or_else(|| op.spec.target_link.clone(), String::from)
}

fn time(t: Option<&sluice_model::k8s::Time>) -> String {
    t.map_or_else(|| "-".into(), |t| t.0.to_string())
}

/// `operations list`: one row an operation, in the order given, columns
/// padded to their widest cell.
pub fn table(ops: &[Operation]) -> String {
    let mut rows = vec![[
        "NAME", "TYPE", "TARGET", "STATUS", "START", "END", "PROGRESS",
    ]
    .map(String::from)];
    for op in ops {
        let st = op.status.as_ref();
        rows.push([
            op.metadata.name.clone().unwrap_or_default(),
            type_name(op),
            target(op),
            state_name(state(op)),
            time(st.and_then(|s| s.start_time.as_ref())),
            time(st.and_then(|s| s.end_time.as_ref())),
            counts(st.and_then(|s| s.progress.as_ref())),
        ]);
    }
    let mut widths = [0usize; 7];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `operations describe`: every field, then each zone's count and what
/// blocks it, then the warnings.
pub fn describe(op: &Operation) -> String {
    let st = op.status.clone().unwrap_or_default();
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k}: {v}\n"));
    line("name", op.metadata.name.clone().unwrap_or_default());
    line("operationType", type_name(op));
    line("targetLink", op.spec.target_link.clone());
    if let Some(v) = &op.spec.node_version {
        line("nodeVersion", v.clone());
    }
    if let Some(c) = &op.spec.config {
        line("config", serde_json::to_string(c).unwrap_or_default());
    }
    if let Some(u) = &op.spec.upgrade_settings {
        line("upgradeSettings", settings_text(u));
    }
    if let Some(a) = op.spec.action {
        line(
            "action",
            serde_json::to_value(a)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        );
    }
    line("status", state_name(st.status));
    if let Some(m) = &st.status_message {
        line("statusMessage", m.clone());
    }
    line("startTime", time(st.start_time.as_ref()));
    line("endTime", time(st.end_time.as_ref()));
    if let Some(z) = &st.zone {
        line("zone", z.clone());
    }
    line("progress", counts(st.progress.as_ref()));
    if let Some(bg) = phase_text(op) {
        line("blueGreen", bg);
    }
    for stage in st.progress.iter().flat_map(|p| &p.stages) {
        s.push_str(&format!(
            "  {} {} {}\n",
            stage.name.as_deref().unwrap_or("-"),
            counts(Some(stage)),
            stage
                .status
                .map(|x| state_name(Some(x)))
                .unwrap_or_default()
        ));
        for b in &stage.blocking {
            s.push_str(&format!("    blocking: {b}\n"));
        }
    }
    for b in st.progress.iter().flat_map(|p| &p.blocking) {
        s.push_str(&format!("  blocking: {b}\n"));
    }
    for w in &st.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// A pool's upgrade settings in a line: the strategy and what it uses.
pub fn settings_text(u: &UpgradeSettings) -> String {
    match u.strategy() {
        UpgradeStrategy::Surge => format!(
            "strategy SURGE, maxSurge {}, maxUnavailable {}",
            u.max_surge(),
            u.max_unavailable()
        ),
        UpgradeStrategy::ShortLived => "strategy SHORT_LIVED".into(),
        UpgradeStrategy::BlueGreen => {
            let bg = u.blue_green_settings.clone().unwrap_or_default();
            let mut parts = vec!["strategy BLUE_GREEN".to_owned()];
            if let Some(p) = &bg.standard_rollout_policy {
                if let Some(n) = p.batch_node_count {
                    parts.push(format!("batchNodeCount {n}"));
                }
                if let Some(f) = p.batch_percentage {
                    parts.push(format!("batchPercentage {f}"));
                }
                parts.push(format!("batchSoakDuration {}", p.batch_soak_duration()));
            }
            if let Some(a) = &bg.autoscaled_rollout_policy {
                parts.push(format!(
                    "waitForDrainDuration {}",
                    a.wait_for_drain_duration()
                ));
            }
            parts.push(format!(
                "nodePoolSoakDuration {}",
                bg.node_pool_soak_duration()
            ));
            parts.join(", ")
        }
    }
}

fn phase_of(op: &Operation) -> Option<&BlueGreenProgress> {
    op.status.as_ref().and_then(|s| s.blue_green.as_ref())
}

/// A blue-green upgrade's phase, batch k of n and the soak left:
/// `DRAINING_BLUE_POOL, batch 2 of 4 drained` (`None`: not blue-green).
pub fn phase_text(op: &Operation) -> Option<String> {
    let bg = phase_of(op)?;
    let mut s = bg.phase.map_or("UPDATE_STARTED", |p| p.as_str()).to_owned();
    if let Some(n) = bg.batches {
        s.push_str(&format!(", batch {} of {n} drained", bg.batches_drained));
    }
    let left = op
        .status
        .as_ref()
        .and_then(|st| st.progress.as_ref())
        .and_then(|p| metric(p, SOAK_LEFT_SECONDS));
    if let Some(left) = left {
        s.push_str(&format!(", soak ends in {left}s"));
    }
    Some(s)
}

/// The stage being worked on: the zone the status names, else the
/// whole operation.
fn current(op: &Operation) -> (String, Option<&OperationProgress>, Vec<&str>) {
    let st = op.status.as_ref();
    let progress = st.and_then(|s| s.progress.as_ref());
    let zone = st.and_then(|s| s.zone.as_deref());
    let stage = zone.and_then(|z| {
        progress.and_then(|p| p.stages.iter().find(|s| s.name.as_deref() == Some(z)))
    });
    let mut blocking: Vec<&str> = stage
        .iter()
        .flat_map(|s| s.blocking.iter().map(String::as_str))
        .collect();
    blocking.extend(
        progress
            .iter()
            .flat_map(|p| p.blocking.iter().map(String::as_str)),
    );
    match (zone, stage) {
        (Some(z), Some(s)) => (z.to_string(), Some(s), blocking),
        _ => ("all zones".to_string(), progress, blocking),
    }
}

/// What `wait` compares to tell a change: `zone-a 3/4 · RUNNING ·
/// blocking: …`, then the status message when there is one.
pub fn progress_text(op: &Operation) -> String {
    let (zone, stage, blocking) = current(op);
    let mut line = format!("{zone} {} · {}", counts(stage), state_name(state(op)));
    if let Some(p) = phase_text(op) {
        line.push_str(&format!(" · {p}"));
    }
    if !blocking.is_empty() {
        line.push_str(&format!(" · blocking: {}", blocking.join("; ")));
    }
    if let Some(m) = op.status.as_ref().and_then(|s| s.status_message.as_ref()) {
        line.push_str(&format!(" · {m}"));
    }
    line
}

/// `wait`'s line for one change, with the time it was seen.
pub fn progress_line(op: &Operation, at: Timestamp) -> String {
    format!("{at} {}\n", progress_text(op))
}

/// `wait --format json`: one object a change (JSON lines).
pub fn progress_json(op: &Operation, at: Timestamp) -> String {
    let (zone, stage, blocking) = current(op);
    let st = op.status.as_ref();
    let v = json!({
        "time": at.to_string(),
        "name": op.metadata.name,
        "status": state_name(state(op)),
        "zone": zone,
        "upgraded": stage.and_then(|p| metric(p, NODES_UPGRADED)),
        "total": stage.and_then(|p| metric(p, NODES_TOTAL)),
        "blocking": blocking,
        "statusMessage": st.and_then(|s| s.status_message.clone()),
        "warnings": st.map(|s| s.warnings.clone()).unwrap_or_default(),
        "phase": phase_of(op).and_then(|b| b.phase).map(|p| p.as_str()),
        "batches": phase_of(op).and_then(|b| b.batches),
        "batchesDrained": phase_of(op).map(|b| b.batches_drained),
        "soakLeftSeconds": st
            .and_then(|s| s.progress.as_ref())
            .and_then(|p| metric(p, SOAK_LEFT_SECONDS)),
    });
    format!("{v}\n")
}

/// When `wait` stops, and with what exit code: 0 done, 1 failed, 10
/// cancelled or rolled back; `None`: keep waiting. A CANCELLED upgrade
/// whose action is already RESUME or ROLLBACK is about to move on (the
/// controller has not read the action yet), so it is waited for.
pub fn wait_exit(state: Option<OperationState>, action: Option<OperationAction>) -> Option<u8> {
    match state? {
        OperationState::Done => Some(crate::exit::OK),
        OperationState::Failed => Some(crate::exit::ERROR),
        OperationState::RolledBack => Some(crate::exit::BLOCKED),
        OperationState::Cancelled => match action {
            Some(OperationAction::Resume | OperationAction::Rollback) => None,
            Some(OperationAction::Cancel | OperationAction::Complete) | None => {
                Some(crate::exit::BLOCKED)
            }
        },
        _ => None,
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
