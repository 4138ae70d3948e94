//! Creations held back after a failure, and the outcomes of a pass folded
//! into the pool's status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::{CreateBackoff, NodePoolPhase, NodePoolStatus};

use super::{status, Action, Config, Outcome};
use crate::ProviderError;

/// The wait after `failures` failed rounds in a row: the initial wait,
/// doubled for each further round, capped.
pub(crate) fn delay(failures: u32, config: &Config) -> SignedDuration {
    let max = config.create_backoff_max;
    let mut d = config.create_backoff_initial;
    for _ in 1..failures {
        if d.is_zero() || d >= max {
            break;
        }
        d = d.checked_mul(2).unwrap_or(max);
    }
    d.min(max)
}

/// When creations may be tried again.
pub(crate) fn retry_at(b: &CreateBackoff, config: &Config) -> Timestamp {
    crate::later(b.last_failure_time.0, delay(b.failures, config))
}

/// The status after the plan's actions ran: `status` is the plan's,
/// `outcomes` what each action gave. A creation refused for quota (or
/// failed otherwise) starts or lengthens the backoff and, for quota, sets
/// `QuotaExceeded` with the provider's message; a round of creations with
/// no failure clears it. A deletion of an instance already gone counts as
/// done; another failed deletion is named in `statusMessage` (the next
/// plan asks again).
pub fn record(
    status: &NodePoolStatus,
    outcomes: &[Outcome],
    config: &Config,
    now: Timestamp,
) -> NodePoolStatus {
    let mut status = status.clone();
    let mut created = false;
    let mut failure: Option<&ProviderError> = None;
    let mut delete_failures = Vec::new();
    for o in outcomes {
        match (&o.action, &o.result) {
            (Action::Create(_), Ok(())) => created = true,
            (Action::Create(_), Err(e)) => {
                // The quota error wins: it is the one the pool reports.
                let quota = |e: &ProviderError| matches!(e, ProviderError::QuotaExhausted { .. });
                if failure.is_none_or(|f| !quota(f) && quota(e)) {
                    failure = Some(e);
                }
            }
            (Action::Delete { .. }, Ok(()) | Err(ProviderError::NotFound(_))) => {}
            (Action::Delete { name, .. }, Err(e)) => delete_failures.push(format!("{name}: {e}")),
        }
    }
    match failure {
        Some(e) => {
            let failures = status.create_backoff.as_ref().map_or(0, |b| b.failures);
            status.create_backoff = Some(CreateBackoff {
                failures: failures.saturating_add(1),
                last_failure_time: Time(now),
                quota_exceeded: matches!(e, ProviderError::QuotaExhausted { .. }),
                message: e.to_string(),
            });
        }
        None if created => status.create_backoff = None,
        None => {}
    }
    let deleting = status.status == Some(NodePoolPhase::Stopping);
    status::summarize(&mut status, deleting, config, now);
    if !delete_failures.is_empty() {
        let message = status.status_message.take().unwrap_or_default();
        status.status_message = Some(format!(
            "{message}; deleting failed: {}",
            delete_failures.join(", ")
        ));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_30_s_up_to_5_min() {
        let c = Config::default();
        let secs: Vec<i64> = [1, 2, 3, 4, 5, 6, u32::MAX]
            .into_iter()
            .map(|n| delay(n, &c).as_secs())
            .collect();
        assert_eq!(secs, [30, 60, 120, 240, 300, 300, 300]);
    }
}
