//! What a Deployment's spec asks for, read and checked once per sync:
//! the strategy with its resolved surge and unavailability, the selector,
//! the limits; upstream's `deploymentutil` getters over a checked spec.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::policy::disruption::{IntOrPercent, PolicyError, Selector};

use crate::owner::display_name;
use crate::{spec, WorkloadError};

pub(super) const KIND: &str = "Deployment";

/// `maxSurge` and `maxUnavailable` when unset.
const DEFAULT_FENCEPOST: &str = "25%";

/// How the Deployment replaces its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    /// All old pods gone before any new one is made.
    Recreate,
    /// At most `surge` pods over `spec.replicas`, at most `unavailable`
    /// under it, both resolved against `spec.replicas`.
    Rolling { surge: i32, unavailable: i32 },
}

/// A checked Deployment and the time of this sync.
pub(super) struct Ctx<'a> {
    pub d: &'a Deployment,
    pub name: &'a str,
    pub replicas: i32,
    pub strategy: Strategy,
    pub selector: Selector,
    pub now: Timestamp,
}

impl<'a> Ctx<'a> {
    pub fn of(d: &'a Deployment, now: Timestamp) -> Result<Self, WorkloadError> {
        let name = spec::name(KIND, &d.metadata)?;
        spec::uid(KIND, &d.metadata)?;
        let (selector, replicas, strategy) = read_spec(d)?;
        Ok(Ctx {
            d,
            name,
            replicas,
            strategy,
            selector,
            now,
        })
    }

    /// Upstream's `MaxSurge`: 0 for Recreate.
    pub fn max_surge(&self) -> i32 {
        match self.strategy {
            Strategy::Rolling { surge, .. } => surge,
            Strategy::Recreate => 0,
        }
    }

    /// Upstream's `MaxUnavailable`: 0 for Recreate or no replicas, never
    /// more than `spec.replicas`.
    pub fn max_unavailable(&self) -> i32 {
        match self.strategy {
            Strategy::Rolling { unavailable, .. } if self.replicas > 0 => {
                unavailable.min(self.replicas)
            }
            _ => 0,
        }
    }

    pub fn is_rolling(&self) -> bool {
        matches!(self.strategy, Strategy::Rolling { .. })
    }

    pub fn min_ready_seconds(&self) -> Option<i32> {
        self.d.spec.min_ready_seconds
    }

    pub fn paused(&self) -> bool {
        self.d.spec.paused == Some(true)
    }

    pub fn generation(&self) -> i64 {
        self.d.metadata.generation.unwrap_or(0)
    }

    pub fn deleting(&self) -> bool {
        self.d.metadata.deletion_timestamp.is_some()
    }

    /// `progressDeadlineSeconds`, unless unset or `MaxInt32` (upstream's
    /// "no deadline").
    pub fn progress_deadline(&self) -> Option<SignedDuration> {
        self.d
            .spec
            .progress_deadline_seconds
            .filter(|s| *s != i32::MAX)
            .map(|s| SignedDuration::from_secs(i64::from(s)))
    }

    /// `revisionHistoryLimit`, unless unset or `MaxInt32`. The API server
    /// defaults it to 10; an object that was not defaulted keeps all its
    /// history, as upstream.
    pub fn revision_history_limit(&self) -> Option<usize> {
        self.d
            .spec
            .revision_history_limit
            .filter(|l| *l != i32::MAX)
            .map(|l| usize::try_from(l).unwrap_or(0))
    }
}

/// What apps/v1 validation checks of a Deployment's spec, with the same
/// reading a sync makes: the API server refuses a Deployment that fails
/// here, so no stored one leaves the controller retrying forever. The
/// template's pod is the caller's to check (it is the scheduler's reading).
pub fn check(d: &Deployment) -> Result<(), WorkloadError> {
    read_spec(d)?;
    let s = &d.spec;
    spec::non_negative(KIND, &d.metadata, "minReadySeconds", s.min_ready_seconds)?;
    spec::non_negative(
        KIND,
        &d.metadata,
        "revisionHistoryLimit",
        s.revision_history_limit,
    )?;
    spec::non_negative(
        KIND,
        &d.metadata,
        "progressDeadlineSeconds",
        s.progress_deadline_seconds,
    )?;
    let min_ready = s.min_ready_seconds.unwrap_or(0);
    if let Some(deadline) = s.progress_deadline_seconds.filter(|p| *p <= min_ready) {
        return Err(WorkloadError::DeadlineNotAfterMinReady {
            object: display_name(&d.metadata),
            deadline,
            min_ready,
        });
    }
    let st = s.strategy.as_ref();
    if st.and_then(|st| st.type_.as_deref()) == Some("Recreate")
        && st.is_some_and(|st| st.rolling_update.is_some())
    {
        return Err(WorkloadError::RollingUpdateWithRecreate {
            object: display_name(&d.metadata),
        });
    }
    Ok(())
}

/// The selector, replica count and strategy, as every sync reads them.
fn read_spec(d: &Deployment) -> Result<(Selector, i32, Strategy), WorkloadError> {
    let selector = spec::selector(
        KIND,
        &d.metadata,
        Some(&d.spec.selector),
        Some(&d.spec.template),
    )?;
    let replicas = spec::replicas(KIND, &d.metadata, d.spec.replicas)?;
    Ok((selector, replicas, strategy(d, replicas)?))
}

fn strategy(d: &Deployment, replicas: i32) -> Result<Strategy, WorkloadError> {
    let object = display_name(&d.metadata);
    let st = d.spec.strategy.clone().unwrap_or_default();
    match st.type_.as_deref().unwrap_or("RollingUpdate") {
        "Recreate" => Ok(Strategy::Recreate),
        "RollingUpdate" => {
            let ru = st.rolling_update.unwrap_or_default();
            let invalid = |source| WorkloadError::Invalid {
                kind: KIND,
                object: object.clone(),
                source,
            };
            let (surge, unavailable) =
                fenceposts(ru.max_surge.as_ref(), ru.max_unavailable.as_ref(), replicas)
                    .map_err(invalid)?
                    .ok_or_else(|| WorkloadError::NoRollingRoom {
                        object: object.clone(),
                    })?;
            Ok(Strategy::Rolling { surge, unavailable })
        }
        other => Err(WorkloadError::UnknownStrategy {
            object,
            value: other.to_string(),
        }),
    }
}

/// Upstream's `ResolveFenceposts`: `maxSurge` scaled rounding up (any
/// percentage), `maxUnavailable` rounding down (at most 100%). Both set to
/// zero is refused (`None`), as apps/v1 validation does; both merely
/// rounding to zero makes `maxUnavailable` 1, so the rollout can move.
fn fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<Option<(i32, i32)>, PolicyError> {
    let default = IntOrString::String(DEFAULT_FENCEPOST.into());
    let surge = IntOrPercent::parse_uncapped(
        "spec.strategy.rollingUpdate.maxSurge",
        max_surge.unwrap_or(&default),
    )?;
    let unavailable = IntOrPercent::parse(
        "spec.strategy.rollingUpdate.maxUnavailable",
        max_unavailable.unwrap_or(&default),
    )?;
    let zero = |v: IntOrPercent| matches!(v, IntOrPercent::Int(0) | IntOrPercent::Percent(0));
    if zero(surge) && zero(unavailable) {
        return Ok(None);
    }
    let total = u32::try_from(desired).unwrap_or(0);
    let clamp = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    let surge = clamp(surge.scaled_up(total));
    let unavailable = clamp(unavailable.scaled_down(total));
    if surge == 0 && unavailable == 0 {
        return Ok(Some((0, 1)));
    }
    Ok(Some((surge, unavailable)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn percentages_round_surge_up_and_unavailable_down() {
        assert_eq!(fenceposts(None, None, 10), Ok(Some((3, 2))));
        assert_eq!(
            fenceposts(Some(&s("10%")), Some(&s("10%")), 15),
            Ok(Some((2, 1)))
        );
        assert_eq!(
            fenceposts(Some(&s("200%")), Some(&IntOrString::Int(0)), 3),
            Ok(Some((6, 0)))
        );
    }

    #[test]
    fn both_rounding_to_zero_leaves_one_unavailable() {
        assert_eq!(
            fenceposts(Some(&IntOrString::Int(0)), Some(&s("10%")), 5),
            Ok(Some((0, 1)))
        );
    }

    #[test]
    fn both_set_to_zero_is_refused_and_bad_values_name_the_field() {
        assert_eq!(
            fenceposts(Some(&IntOrString::Int(0)), Some(&s("0%")), 5),
            Ok(None)
        );
        let err = fenceposts(None, Some(&s("150%")), 5).unwrap_err();
        assert_eq!(err.field(), "spec.strategy.rollingUpdate.maxUnavailable");
        let err = fenceposts(Some(&s("lots")), None, 5).unwrap_err();
        assert_eq!(err.field(), "spec.strategy.rollingUpdate.maxSurge");
    }
}
