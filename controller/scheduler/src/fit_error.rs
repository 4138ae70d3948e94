//! The message of a pod no node takes, worded as kube-scheduler's
//! `FitError`: `0/5 nodes are available: 2 node(s) were unschedulable, 3
//! Insufficient cpu.` Each reason is counted once per node that gave it;
//! the `count reason` strings are sorted as text, as upstream sorts them.
//!
//! Upstream then appends what preemption found (`preemption: 0/5 nodes
//! are available: ...`). Sluice does not preempt, so that clause is left
//! out.

use std::collections::BTreeMap;

/// kube-scheduler's error when the cluster has no node at all.
pub const NO_NODES_MESSAGE: &str = "no nodes available to schedule pods";

/// The message for `reasons` (reason → number of nodes) over `nodes`
/// nodes.
pub fn fit_error_message(nodes: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let mut msg = format!("0/{nodes} nodes are available:");
    if !parts.is_empty() {
        msg.push(' ');
        msg.push_str(&parts.join(", "));
        msg.push('.');
    }
    msg
}

/// The message for a pod whose spec cannot be read: upstream's form for a
/// pod refused before any node is looked at (`0/N nodes are available:
/// <why>.`), naming the field.
pub fn unreadable_pod_message(nodes: usize, why: &str) -> String {
    format!("0/{nodes} nodes are available: {why}.")
}
