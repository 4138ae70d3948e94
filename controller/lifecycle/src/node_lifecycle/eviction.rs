//! Which pods a node's NoExecute taints evict, and when: a pod with no
//! toleration for one of them at once, a pod tolerating them all once the
//! shortest `tolerationSeconds` runs out, counted from the taint's
//! `timeAdded`; a toleration without seconds tolerates for ever. As
//! upstream's taint-eviction manager, the eviction is a delete of the pod.
//!
//! The 300 s `not-ready` / `unreachable` tolerations every pod gets on
//! create (DefaultTolerationSeconds admission) are filled in by the API
//! server's defaults (`controller/apiserver/src/defaults.rs`), not here.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Pod;

use super::after;
use super::taints::NO_EXECUTE;

/// The reason of the `DisruptionTarget` condition upstream puts on a pod
/// it deletes for a taint.
pub const DISRUPTION_REASON: &str = "DeletionByTaintManager";

/// Why a pod is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionCause {
    /// No toleration of the taint at all.
    NotTolerated,
    /// Its toleration of the taint ran out.
    TolerationExpired { toleration_seconds: i64 },
}

/// What the taints mean for one pod at `now`.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Delete it now, for this taint.
    Evict { taint: Taint, cause: EvictionCause },
    /// Tolerated until then.
    Until(Timestamp),
    /// Tolerated for as long as the taints stay (or no NoExecute taint).
    Tolerated,
}

/// Whether `toleration` tolerates `taint` (the scheduler's rule): same
/// effect or none named; same key, or no key with `Exists`; `Exists`
/// needs no value, `Equal` (the default) the same one.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The verdict for `pod` under the node's `taints` (only NoExecute ones
/// count). A taint without `timeAdded` is counted from `now`.
pub fn verdict(pod: &Pod, taints: &[Taint], now: Timestamp) -> Verdict {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let mut earliest: Option<(Timestamp, &Taint, i64)> = None;
    for taint in taints.iter().filter(|t| t.effect == NO_EXECUTE) {
        // The first toleration that matches is the one that counts, as
        // upstream takes it.
        let Some(toleration) = tolerations.iter().find(|t| tolerates(t, taint)) else {
            return Verdict::Evict {
                taint: taint.clone(),
                cause: EvictionCause::NotTolerated,
            };
        };
        let Some(seconds) = toleration.toleration_seconds else {
            continue;
        };
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let until = after(added, SignedDuration::from_secs(seconds.max(0)));
        if earliest.is_none_or(|(e, _, _)| until < e) {
            earliest = Some((until, taint, seconds));
        }
    }
    match earliest {
        Some((until, taint, seconds)) if until <= now => Verdict::Evict {
            taint: taint.clone(),
            cause: EvictionCause::TolerationExpired {
                toleration_seconds: seconds,
            },
        },
        Some((until, _, _)) => Verdict::Until(until),
        None => Verdict::Tolerated,
    }
}
