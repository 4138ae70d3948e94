//! A node drain as the controller sees it, reusable by every upgrade
//! strategy: the Node annotations that ask for it and record when it
//! started, and when it is finished — no pod left, or the reason's caps
//! (PodDisruptionBudgets honoured for so long, then the grace period)
//! spent, after which the node is removed anyway (U1, U2, E1, E6).
//!
//! The agent does the draining itself (`sluice.dev/drain`: cordon, then
//! the Eviction API with the reason's grace cap and PDB retries); the
//! controller only decides when the node may go.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::policy::eviction::{effective_grace, EvictionReason, PdbPolicy, EXTENDED_RUN};

pub use sluice_model::policy::eviction::DRAIN_ANNOTATION;

/// Companion of `sluice.dev/drain`: when the controller asked for the
/// drain (RFC 3339). The caps count from here, so a controller restarted
/// mid-drain neither waits again from zero nor forgets the drain.
pub const DRAIN_STARTED_ANNOTATION: &str = "sluice.dev/drain-started";

/// A pod a drain must still remove from its node: not a DaemonSet's, not
/// terminated (the caller filters them, as `kubectl drain
/// --ignore-daemonsets` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOnNode {
    /// `namespace/name`, for the status.
    pub name: String,
    /// Its `terminationGracePeriodSeconds` (Kubernetes' default: 30 s).
    pub grace: SignedDuration,
    /// Why its eviction is held back, if the caller knows (the agent's
    /// drain report: `PodDisruptionBudget default/web refuses its eviction`),
    /// for the operation's `blocking` list.
    pub held_by: Option<String>,
    /// Annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`:
    /// an autoscaled blue-green drain leaves it for 7 days after the
    /// node's cordon (A3).
    pub safe_to_evict_false: bool,
}

/// The drain a Node's annotations ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainMark {
    /// The reason named (`None`: a value no agent understands).
    pub reason: Option<EvictionReason>,
    /// When it started (`None`: not recorded, or unreadable).
    pub started: Option<Timestamp>,
}

/// The drain `node`'s annotations ask for, if any.
pub fn drain_mark(node: &Node) -> Option<DrainMark> {
    let annotations = node.metadata.annotations.as_ref()?;
    let value = annotations.get(DRAIN_ANNOTATION)?;
    Some(DrainMark {
        reason: EvictionReason::from_annotation(value),
        started: annotations
            .get(DRAIN_STARTED_ANNOTATION)
            .and_then(|t| t.parse().ok()),
    })
}

/// The annotations that ask for a drain for `reason` started at `started`.
pub fn drain_annotations(reason: EvictionReason, started: Timestamp) -> BTreeMap<String, String> {
    let value = format!("{reason:?}");
    BTreeMap::from([
        (DRAIN_ANNOTATION.to_owned(), value),
        (DRAIN_STARTED_ANNOTATION.to_owned(), started.to_string()),
    ])
}

/// Where a drain stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainProgress {
    /// No pod is left: the node may go.
    Finished,
    /// Pods are left but the caps are spent: the node goes anyway (their
    /// eviction is forced by deleting the node, U1's "after one hour").
    Forced { left: usize },
    /// Pods are left; `deadline`: when the caps are spent (`None`: never,
    /// for reasons that retry for good or give up).
    Waiting {
        left: usize,
        deadline: Option<Timestamp>,
    },
}

impl DrainProgress {
    /// The node may be deleted.
    pub fn is_over(&self) -> bool {
        matches!(self, DrainProgress::Finished | DrainProgress::Forced { .. })
    }

    /// How many pods are left.
    pub fn left(&self) -> usize {
        match self {
            DrainProgress::Finished => 0,
            DrainProgress::Forced { left } | DrainProgress::Waiting { left, .. } => *left,
        }
    }

    /// This progress held until the load balancers have let the node go
    /// (`released`, as `OutOfBalancers::may_delete` answers): a drain
    /// that is over waits, until the release, while they have not.
    pub fn until_released(self, released: Result<(), Option<Timestamp>>) -> DrainProgress {
        match released {
            Err(deadline) if self.is_over() => DrainProgress::Waiting {
                left: self.left(),
                deadline,
            },
            _ => self,
        }
    }
}

/// When a drain for `reason` started at `started` has spent its caps with
/// `pods` left: budgets are retried for the reason's time (1 h for node
/// upgrades), then the pods get at most their grace, capped by the reason
/// (1 h) — E1, E6. `None`: never (a user's drain retries for good; a
/// scale-down gives up rather than forcing).
pub fn deadline(
    reason: EvictionReason,
    started: Timestamp,
    pods: &[PodOnNode],
) -> Option<Timestamp> {
    let budgets = match reason.pdb_policy() {
        PdbPolicy::Ignore => SignedDuration::ZERO,
        PdbPolicy::RetryThenForce(d) => signed(d),
        PdbPolicy::RetryForever | PdbPolicy::RetryThenGiveUp(_) => return None,
    };
    let grace = pods
        .iter()
        .map(|p| {
            let own = std::time::Duration::try_from(p.grace).unwrap_or_default();
            signed(effective_grace(own, reason))
        })
        .max()
        .unwrap_or(SignedDuration::ZERO);
    Some(
        started
            .checked_add(budgets.saturating_add(grace))
            .unwrap_or(Timestamp::MAX),
    )
}

/// How long a drained node is kept after its drain started before it is
/// deleted, however soon its pods are gone: the drain takes the node out
/// of every load balancer's backends, and that takes a moment to reach
/// them. Deleted sooner, an empty node would still be sent new
/// connections as it went. Where the balancers are followed, the node
/// also waits for having left them ([`DrainProgress::until_released`]).
pub use sluice_model::policy::balancers::LOAD_BALANCER_DELAY;

/// Where the drain of a node with `pods` left stands at `now`. The node
/// is never over before [`LOAD_BALANCER_DELAY`] has passed since `started`.
pub fn progress(
    reason: EvictionReason,
    started: Timestamp,
    pods: &[PodOnNode],
    now: Timestamp,
) -> DrainProgress {
    let out_of_balancers = started
        .checked_add(LOAD_BALANCER_DELAY)
        .unwrap_or(Timestamp::MAX);
    let left = pods.len();
    if pods.is_empty() {
        return if now >= out_of_balancers {
            DrainProgress::Finished
        } else {
            DrainProgress::Waiting {
                left,
                deadline: Some(out_of_balancers),
            }
        };
    }
    match deadline(reason, started, pods).map(|d| d.max(out_of_balancers)) {
        Some(d) if now >= d => DrainProgress::Forced { left },
        deadline => DrainProgress::Waiting { left, deadline },
    }
}

/// Until when a node cordoned at `cordoned_at` keeps its pods marked
/// `safe-to-evict: "false"` from an autoscaled blue-green drain (A3: 7
/// days after the cordon); `None` when it holds none.
pub fn protected_until(pods: &[PodOnNode], cordoned_at: Timestamp) -> Option<Timestamp> {
    pods.iter().any(|p| p.safe_to_evict_false).then(|| {
        cordoned_at
            .checked_add(signed(EXTENDED_RUN))
            .unwrap_or(Timestamp::MAX)
    })
}

/// Where an autoscaled blue-green drain (A2, A3) started at `started` on a
/// node cordoned at `cordoned_at` stands: as [`progress`] for its other
/// pods; a protected pod is not evicted before [`protected_until`], and
/// its budget and grace caps count from then, so the node is neither over
/// nor forced while such a pod is protected.
pub fn autoscaled_progress(
    started: Timestamp,
    cordoned_at: Timestamp,
    pods: &[PodOnNode],
    now: Timestamp,
) -> DrainProgress {
    const REASON: EvictionReason = EvictionReason::AutoscaledBlueGreen;
    let plain = progress(REASON, started, pods, now);
    let Some(until) = protected_until(pods, cordoned_at) else {
        return plain;
    };
    let left = pods.len();
    let protected: Vec<PodOnNode> = pods
        .iter()
        .filter(|p| p.safe_to_evict_false)
        .cloned()
        .collect();
    let deadline = deadline(REASON, until.max(started), &protected)
        .into_iter()
        .chain(deadline(REASON, started, pods))
        .max();
    match deadline {
        Some(d) if now >= d && now >= until => DrainProgress::Forced { left },
        deadline => DrainProgress::Waiting { left, deadline },
    }
}

/// Time the agent is given to start a pod's eviction before a blue-green
/// batch stops waiting for it (its grace counts after this).
pub const EVICTION_SLACK: SignedDuration = SignedDuration::from_secs(30);

/// Where a blue-green drain batch started at `started` stands (B3): over
/// when each pod left on its nodes is held by a budget, or has had its
/// grace (capped at phase 3's 60 min) and [`EVICTION_SLACK`] to go; those
/// are left for phase 5, never forced here. `Err(deadline)`: not over,
/// and when it will be at the latest (`None`: only when a pod leaves).
pub fn batch_over(
    started: Timestamp,
    pods: &[&PodOnNode],
    now: Timestamp,
) -> Result<(), Option<Timestamp>> {
    let mut latest: Option<Timestamp> = None;
    for p in pods.iter().filter(|p| p.held_by.is_none()) {
        let own = std::time::Duration::try_from(p.grace).unwrap_or_default();
        let grace = signed(effective_grace(own, EvictionReason::BlueGreenDrain));
        let bound = started
            .checked_add(EVICTION_SLACK.saturating_add(grace))
            .unwrap_or(Timestamp::MAX);
        if now < bound {
            latest = Some(latest.map_or(bound, |l| l.max(bound)));
        }
    }
    match latest {
        None => Ok(()),
        Some(t) => Err(Some(t)),
    }
}

fn signed(d: std::time::Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        "2026-11-23T02:00:00Z".parse().unwrap()
    }

    fn pod(grace_secs: i64) -> PodOnNode {
        PodOnNode {
            name: "default/web-1".into(),
            grace: SignedDuration::from_secs(grace_secs),
            held_by: None,
            safe_to_evict_false: false,
        }
    }

    const H: i64 = 3600;
    const DAY: i64 = 24 * H;

    #[test]
    fn an_autoscaled_drain_caps_budgets_at_an_hour_and_grace_at_a_day() {
        // spec: A2 — budgets honoured up to 1 h, grace up to 24 h, then
        // the node goes.
        let at = |s: i64| t0() + SignedDuration::from_secs(s);
        let pods = [pod(30), pod(3 * DAY)];
        let p = autoscaled_progress(t0(), t0(), &pods, at(H + DAY - 1));
        assert_eq!(
            p,
            DrainProgress::Waiting {
                left: 2,
                deadline: Some(at(H + DAY))
            }
        );
        assert_eq!(
            autoscaled_progress(t0(), t0(), &pods, at(H + DAY)),
            DrainProgress::Forced { left: 2 }
        );
        assert_eq!(
            autoscaled_progress(t0(), t0(), &[], at(5)),
            DrainProgress::Finished
        );
    }

    #[test]
    fn a_safe_to_evict_false_pod_holds_its_node_7_days_from_the_cordon() {
        // spec: A3 — not drained until 7 days after the node's cordon; the
        // node is never deleted while the pod is protected; its caps count
        // from the end of the protection.
        let at = |s: i64| t0() + SignedDuration::from_secs(s);
        let keep = PodOnNode {
            safe_to_evict_false: true,
            ..pod(60)
        };
        let pods = [pod(30), keep.clone()];
        assert_eq!(protected_until(&pods, t0()), Some(at(7 * DAY)));
        assert_eq!(protected_until(&[pod(30)], t0()), None);
        // The drain began 3 days after the cordon: 4 days to wait, then
        // 1 h of budgets and the pod's 60 s.
        let started = at(3 * DAY);
        let end = at(7 * DAY + H + 60);
        for now in [
            started,
            at(7 * DAY - 1),
            at(7 * DAY),
            end - SignedDuration::from_secs(1),
        ] {
            let p = autoscaled_progress(started, t0(), &pods, now);
            assert_eq!(
                p,
                DrainProgress::Waiting {
                    left: 2,
                    deadline: Some(end)
                },
                "at {now}"
            );
        }
        assert_eq!(
            autoscaled_progress(started, t0(), &pods, end),
            DrainProgress::Forced { left: 2 }
        );
        // A drain begun after the 7 days: the caps count from its start.
        let late = at(8 * DAY);
        assert_eq!(
            autoscaled_progress(
                late,
                t0(),
                &[keep],
                late + SignedDuration::from_secs(H + 60)
            ),
            DrainProgress::Forced { left: 1 }
        );
    }

    #[test]
    fn a_drain_with_no_pod_left_is_finished_once_out_of_the_load_balancers() {
        // spec: U1 — the old node is deleted once drained, and not before
        // the load balancers have had the time to stop choosing it.
        let at = |s: i64| t0() + SignedDuration::from_secs(s);
        let early = progress(EvictionReason::NodeUpgrade, t0(), &[], at(4));
        assert_eq!(
            early,
            DrainProgress::Waiting {
                left: 0,
                deadline: Some(at(5))
            }
        );
        assert!(!early.is_over());
        let p = progress(EvictionReason::NodeUpgrade, t0(), &[], at(5));
        assert_eq!(p, DrainProgress::Finished);
        assert!(p.is_over());
    }

    #[test]
    fn a_drain_that_ignores_budgets_still_waits_for_the_load_balancers() {
        // spec: B5 — blue's deletion ignores budgets; a pod with no grace
        // is forced at once, but the node stays 5 s after its drain began.
        let pods = [pod(0)];
        let at = |s: i64| t0() + SignedDuration::from_secs(s);
        let p = progress(EvictionReason::BluePoolDeletion, t0(), &pods, at(1));
        assert!(!p.is_over(), "{p:?}");
        let p = progress(EvictionReason::BluePoolDeletion, t0(), &pods, at(5));
        assert_eq!(p, DrainProgress::Forced { left: 1 });
    }

    #[test]
    fn an_upgrade_drain_forces_after_an_hour_of_budgets_and_the_capped_grace() {
        // spec: E1, E6, U1 — PDBs honoured for up to 1 h, then the pod's
        // grace, capped at 1 h; a 2 h grace counts as 1 h.
        let pods = [pod(30), pod(2 * H)];
        let d = deadline(EvictionReason::NodeUpgrade, t0(), &pods).unwrap();
        assert_eq!(d, t0() + SignedDuration::from_secs(2 * H));
        let before = d - SignedDuration::from_secs(1);
        assert_eq!(
            progress(EvictionReason::NodeUpgrade, t0(), &pods, before),
            DrainProgress::Waiting {
                left: 2,
                deadline: Some(d)
            }
        );
        assert_eq!(
            progress(EvictionReason::NodeUpgrade, t0(), &pods, d),
            DrainProgress::Forced { left: 2 }
        );
        // A short grace forces sooner: 1 h + 30 s.
        let d = deadline(EvictionReason::NodeUpgrade, t0(), &[pod(30)]).unwrap();
        assert_eq!(d, t0() + SignedDuration::from_secs(H + 30));
    }

    #[test]
    fn reasons_that_never_force_have_no_deadline() {
        // spec: E6 — a user's drain retries for good; C5 — scale-down gives up.
        for r in [
            EvictionReason::UserDrain,
            EvictionReason::ScaleDown,
            EvictionReason::BlueGreenDrain,
        ] {
            assert_eq!(deadline(r, t0(), &[pod(30)]), None, "{r:?}");
        }
        // spec: B5 — blue-pool deletion ignores budgets: only the grace (≤ 60 min).
        let d = deadline(EvictionReason::BluePoolDeletion, t0(), &[pod(3 * H)]).unwrap();
        assert_eq!(d, t0() + SignedDuration::from_secs(H));
    }

    #[test]
    fn annotations_round_trip_and_bad_values_are_read_as_unknown() {
        let mut node = Node::default();
        assert_eq!(drain_mark(&node), None);
        node.metadata.annotations = Some(drain_annotations(EvictionReason::NodeUpgrade, t0()));
        assert_eq!(
            drain_mark(&node),
            Some(DrainMark {
                reason: Some(EvictionReason::NodeUpgrade),
                started: Some(t0())
            })
        );
        let a = node.metadata.annotations.as_mut().unwrap();
        a.insert(DRAIN_STARTED_ANNOTATION.into(), "yesterday".into());
        a.insert(DRAIN_ANNOTATION.into(), "Upgrade".into());
        assert_eq!(
            drain_mark(&node),
            Some(DrainMark {
                reason: None,
                started: None
            })
        );
    }

    #[test]
    fn a_blue_green_batch_leaves_held_and_long_grace_pods_for_phase_5() {
        // spec: B3 — budgets are honoured and nothing is forced: a pod a
        // budget holds, or whose grace outlasts the batch, is left.
        let held = PodOnNode {
            held_by: Some("PodDisruptionBudget default/web refuses its eviction".into()),
            ..pod(30)
        };
        let slow = pod(3 * H);
        assert_eq!(batch_over(t0(), &[], t0()), Ok(()));
        assert_eq!(batch_over(t0(), &[&held], t0()), Ok(()));
        // A 30 s grace: the batch waits 30 s of slack and the grace.
        let quick = pod(30);
        let bound = t0() + SignedDuration::from_secs(60);
        assert_eq!(batch_over(t0(), &[&held, &quick], t0()), Err(Some(bound)));
        assert_eq!(batch_over(t0(), &[&held, &quick], bound), Ok(()));
        // A 3 h grace counts as phase 3's 60 min cap.
        let bound = t0() + SignedDuration::from_secs(H + 30);
        assert_eq!(batch_over(t0(), &[&slow], t0()), Err(Some(bound)));
        assert_eq!(batch_over(t0(), &[&slow], bound), Ok(()));
        // Never forced: the phase-3 reason retries budgets for good.
        assert_eq!(
            deadline(EvictionReason::BlueGreenDrain, t0(), &[pod(30)]),
            None
        );
    }

    #[test]
    fn a_drain_that_is_over_waits_for_the_load_balancers_to_let_the_node_go() {
        // spec: U1 — deleted once drained and out of the load balancers.
        let at = |s: i64| t0() + SignedDuration::from_secs(s);
        let done = progress(EvictionReason::NodeUpgrade, t0(), &[], at(10));
        assert_eq!(done.clone().until_released(Ok(())), DrainProgress::Finished);
        assert_eq!(
            done.until_released(Err(Some(at(40)))),
            DrainProgress::Waiting {
                left: 0,
                deadline: Some(at(40))
            }
        );
        let forced = DrainProgress::Forced { left: 2 };
        assert_eq!(forced.left(), 2);
        assert_eq!(
            forced.until_released(Err(None)),
            DrainProgress::Waiting {
                left: 2,
                deadline: None
            }
        );
        // Not over: unchanged, whatever the balancers say.
        let waiting = DrainProgress::Waiting {
            left: 1,
            deadline: Some(at(60)),
        };
        assert_eq!(waiting.clone().until_released(Err(Some(at(40)))), waiting);
    }

    #[test]
    fn negative_or_huge_graces_do_not_panic() {
        let d = deadline(EvictionReason::NodeUpgrade, t0(), &[pod(-5)]).unwrap();
        assert_eq!(d, t0() + SignedDuration::from_secs(H));
        let far = deadline(
            EvictionReason::NodeUpgrade,
            Timestamp::MAX,
            &[pod(i64::MAX)],
        );
        assert_eq!(far, Some(Timestamp::MAX));
    }
}
