//! A Pod's row: READY, STATUS and RESTARTS summarised from its container
//! statuses the way kubectl users read them (`Init:1/2`,
//! `CrashLoopBackOff`, `Completed`, `Terminating`), not just its phase.

use serde_json::Value;
use sluice_model::k8s::jiff::Timestamp;

use super::age;
use super::columns::{or_none, str_at, Cell};

/// The reason kube-apiserver's node lifecycle gives pods of a lost node.
const NODE_LOST: &str = "NodeLost";

fn count(v: &Value, ptr: &str) -> usize {
    v.pointer(ptr).and_then(Value::as_array).map_or(0, Vec::len)
}

/// The exit summary of a terminated container without a reason.
fn exit_summary(terminated: &Value, prefix: &str) -> String {
    let signal = terminated
        .get("signal")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        let code = terminated
            .get("exitCode")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        format!("{prefix}ExitCode:{code}")
    }
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Restart count and the latest restart (a terminated last state's finish).
#[derive(Default)]
struct Restarts {
    count: i64,
    last: Option<Timestamp>,
}

impl Restarts {
    fn add(&mut self, status: &Value) {
        self.count += status
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let finished = status
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok());
        if let Some(f) = finished {
            self.last = Some(self.last.map_or(f, |l| l.max(f)));
        }
    }

    fn cell(&self, now: Timestamp) -> String {
        match self.last {
            Some(t) if self.count > 0 => {
                format!(
                    "{} ({} ago)",
                    self.count,
                    age::human(now.as_second() - t.as_second())
                )
            }
            _ => self.count.to_string(),
        }
    }
}

/// Name, Ready, Status, Restarts, Age; wide: IP, Node, Nominated Node,
/// Readiness Gates.
pub fn cells(pod: &Value, now: Timestamp) -> Vec<Cell> {
    let containers = count(pod, "/spec/containers");
    let init_total = count(pod, "/spec/initContainers");
    let mut ready = 0usize;
    let mut restarts = Restarts::default();
    let mut reason = str_at(pod, "/status/reason")
        .or_else(|| str_at(pod, "/status/phase"))
        .unwrap_or("Pending")
        .to_string();
    let empty = Vec::new();
    let statuses = |ptr: &str| {
        pod.pointer(ptr)
            .and_then(Value::as_array)
            .unwrap_or(&empty)
            .clone()
    };

    let mut initializing = false;
    for (i, st) in statuses("/status/initContainerStatuses").iter().enumerate() {
        restarts.add(st);
        let terminated = st.pointer("/state/terminated");
        let waiting_reason = st
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty() && *r != "PodInitializing");
        match (terminated, waiting_reason) {
            (Some(t), _) if t.get("exitCode").and_then(Value::as_i64) == Some(0) => continue,
            (Some(t), _) => {
                reason = match t.get("reason").and_then(Value::as_str) {
                    Some(r) if !r.is_empty() => format!("Init:{r}"),
                    _ => exit_summary(t, "Init:"),
                };
            }
            (None, Some(w)) => reason = format!("Init:{w}"),
            (None, None) => reason = format!("Init:{i}/{init_total}"),
        }
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        let mut running = false;
        // Last container first, so the first container's state is what
        // shows when several are unhappy (kubectl's order).
        for st in statuses("/status/containerStatuses").iter().rev() {
            restarts.add(st);
            let waiting = st
                .pointer("/state/waiting/reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty());
            let terminated = st.pointer("/state/terminated");
            if let Some(w) = waiting {
                reason = w.to_string();
            } else if let Some(t) = terminated {
                reason = match t.get("reason").and_then(Value::as_str) {
                    Some(r) if !r.is_empty() => r.to_string(),
                    _ => exit_summary(t, ""),
                };
            } else if st.get("ready").and_then(Value::as_bool) == Some(true)
                && st.pointer("/state/running").is_some()
            {
                running = true;
                ready += 1;
            }
        }
        // A completed sidecar-style container next to a running one: the
        // pod is still running.
        if reason == "Completed" && running {
            reason = if condition_true(pod, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    let terminal = matches!(
        str_at(pod, "/status/phase"),
        Some("Succeeded") | Some("Failed")
    );
    if deleting && str_at(pod, "/status/reason") == Some(NODE_LOST) {
        reason = "Unknown".into();
    } else if deleting && !terminal {
        reason = "Terminating".into();
    }

    let gates = count(pod, "/spec/readinessGates");
    let gates_cell = if gates == 0 {
        "<none>".to_string()
    } else {
        let passed = pod
            .pointer("/spec/readinessGates")
            .and_then(Value::as_array)
            .map_or(0, |gs| {
                gs.iter()
                    .filter_map(|g| g.get("conditionType").and_then(Value::as_str))
                    .filter(|c| condition_true(pod, c))
                    .count()
            });
        format!("{passed}/{gates}")
    };
    let ip = str_at(pod, "/status/podIPs/0/ip").or_else(|| str_at(pod, "/status/podIP"));
    vec![
        Cell::name(pod),
        Cell::Str(format!("{ready}/{containers}")),
        Cell::Str(reason),
        Cell::Str(restarts.cell(now)),
        Cell::age(pod, now),
        Cell::Str(or_none(ip)),
        Cell::Str(or_none(str_at(pod, "/spec/nodeName"))),
        Cell::Str(or_none(str_at(pod, "/status/nominatedNodeName"))),
        Cell::Str(gates_cell),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T12:00:00Z".parse().unwrap()
    }

    fn status_of(pod: Value) -> (String, String, String) {
        let c = cells(&pod, now());
        let s = |i: usize| match &c[i] {
            Cell::Str(s) => s.clone(),
            other => panic!("cell {i} is {other:?}"),
        };
        (s(1), s(2), s(3))
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2026-11-23T11:58:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]},
            "status": status,
        })
    }

    #[test]
    fn running_and_ready_counts_ready_running_containers() {
        let p = pod(json!({
            "phase": "Running",
            "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}],
            "containerStatuses": [
                {"ready": true, "restartCount": 1, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": "2026-11-23T11:55:00Z"}}},
                {"ready": false, "state": {"running": {}}},
            ],
        }));
        assert_eq!(
            status_of(p),
            ("1/2".into(), "Running".into(), "1 (5m ago)".into())
        );
    }

    #[test]
    fn init_containers_show_progress_or_their_failure() {
        let waiting = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"state": {"running": {}}}]}));
        assert_eq!(status_of(waiting).1, "Init:0/1");
        let failed = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}));
        assert_eq!(status_of(failed).1, "Init:ExitCode:3");
        let backoff = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}));
        assert_eq!(status_of(backoff).1, "Init:CrashLoopBackOff");
    }

    #[test]
    fn waiting_and_terminated_reasons_win_over_the_phase() {
        let p = pod(json!({"phase": "Running", "containerStatuses": [
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "restartCount": 4},
            {"state": {"terminated": {"signal": 9}}},
        ]}));
        assert_eq!(status_of(p).1, "CrashLoopBackOff");
    }

    #[test]
    fn deleting_pods_are_terminating_unless_done_or_lost() {
        let mut p = pod(json!({"phase": "Running"}));
        p["metadata"]["deletionTimestamp"] = json!("2026-11-23T11:59:00Z");
        assert_eq!(status_of(p.clone()).1, "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(status_of(p.clone()).1, "Unknown");
        p["status"] = json!({"phase": "Succeeded"});
        assert_eq!(status_of(p).1, "Succeeded");
    }

    #[test]
    fn a_bare_pod_is_pending_with_nothing_ready() {
        let p = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(status_of(p), ("0/1".into(), "Pending".into(), "0".into()));
    }
}
