//! B3, B4's arithmetic: how many blue nodes a drain batch takes, how many
//! batches there are, and how long each soak lasts under the 7-day cap.

use k8s_openapi::jiff::SignedDuration;
use sluice_model::duration::Duration;
use sluice_model::node_pool::{BlueGreenSettings, StandardRolloutPolicy};

/// B4: the soaks of one upgrade (every batch's and the pool's) add up to
/// at most this; once they reach it, the blue pool's deletion starts.
pub const SOAK_CAP: SignedDuration = SignedDuration::from_secs(7 * 86_400);

/// Nodes per batch with neither `batchNodeCount` nor `batchPercentage`
/// set: all of blue at once. No source states GKE's default; green
/// already holds a full copy of the pool when the drain starts, budgets
/// bound what one drain takes down, and the batch fields are there to
/// slow a drain down, not to make it possible.
pub const DEFAULT_BATCH_FRACTION: f64 = 1.0;

/// Nodes per batch for a blue pool of `blue` nodes: `batchNodeCount`, or
/// `batchPercentage` of the pool rounded down, at least 1; 0 when either
/// is set to 0 (the drain phase is skipped). Never more than `blue`.
pub fn batch_size(policy: Option<&StandardRolloutPolicy>, blue: usize) -> usize {
    let count = policy.and_then(|p| p.batch_node_count);
    let fraction = policy.and_then(|p| p.batch_percentage);
    let size = match (count, fraction) {
        (Some(n), _) => usize::try_from(n).unwrap_or(0),
        (None, Some(f)) if f <= 0.0 => 0,
        (None, f) => {
            let f = f.unwrap_or(DEFAULT_BATCH_FRACTION).clamp(0.0, 1.0);
            // Float to count: the fraction is checked to be within 0..=1,
            // so the product is within 0..=blue.
            ((blue as f64) * f).floor().max(1.0) as usize
        }
    };
    size.min(blue)
}

/// Batches a blue pool of `blue` nodes takes at `size` nodes a batch.
pub fn batch_count(size: usize, blue: usize) -> usize {
    if size == 0 {
        0
    } else {
        blue.div_ceil(size)
    }
}

pub(crate) fn signed(d: Duration) -> SignedDuration {
    SignedDuration::from_nanos(d.as_nanos())
}

/// The soak after batch `k` (1-based): `batchSoakDuration`, cut to what
/// the 7-day cap leaves after the soaks of the batches before it.
pub fn batch_soak(settings: &BlueGreenSettings, k: usize) -> SignedDuration {
    let each = signed(
        settings
            .standard_rollout_policy
            .as_ref()
            .map_or(Duration::ZERO, StandardRolloutPolicy::batch_soak_duration),
    );
    let before = each.saturating_mul(i32::try_from(k.saturating_sub(1)).unwrap_or(i32::MAX));
    left_under_cap(before).min(each)
}

/// The pool's soak after `batches` batches: `nodePoolSoakDuration`, cut
/// to what the 7-day cap leaves after the batches' soaks (B4).
pub fn pool_soak(settings: &BlueGreenSettings, batches: usize) -> SignedDuration {
    let each = signed(
        settings
            .standard_rollout_policy
            .as_ref()
            .map_or(Duration::ZERO, StandardRolloutPolicy::batch_soak_duration),
    );
    let spent = each.saturating_mul(i32::try_from(batches).unwrap_or(i32::MAX));
    left_under_cap(spent).min(signed(settings.node_pool_soak_duration()))
}

fn left_under_cap(spent: SignedDuration) -> SignedDuration {
    SOAK_CAP.saturating_sub(spent).max(SignedDuration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(count: Option<i32>, fraction: Option<f64>) -> StandardRolloutPolicy {
        StandardRolloutPolicy {
            batch_node_count: count,
            batch_percentage: fraction,
            batch_soak_duration: None,
        }
    }

    #[test]
    fn a_batch_is_the_count_or_the_fraction_rounded_down_at_least_one() {
        // spec: B3 — batchNodeCount, or batchPercentage of the pool rounded
        // down, at least 1 node.
        assert_eq!(batch_size(Some(&policy(Some(3), None)), 10), 3);
        assert_eq!(batch_size(Some(&policy(None, Some(0.25))), 10), 2);
        assert_eq!(batch_size(Some(&policy(None, Some(0.3))), 10), 3);
        assert_eq!(batch_size(Some(&policy(None, Some(0.01))), 10), 1);
        assert_eq!(batch_size(Some(&policy(None, Some(1.0))), 10), 10);
        // More than the pool is the pool.
        assert_eq!(batch_size(Some(&policy(Some(50), None)), 10), 10);
        assert_eq!(batch_count(3, 10), 4);
        assert_eq!(batch_count(10, 10), 1);
        assert_eq!(batch_count(1, 1000), 1000);
    }

    #[test]
    fn zero_skips_the_drain_phase() {
        // spec: B3 — either field at 0 skips to phase 4.
        for p in [policy(Some(0), None), policy(None, Some(0.0))] {
            assert_eq!(batch_size(Some(&p), 10), 0);
            assert_eq!(batch_count(0, 10), 0);
        }
    }

    #[test]
    fn without_a_batch_field_blue_drains_in_one_batch() {
        // spec: B3 — the documented default: the whole blue pool.
        assert_eq!(batch_size(None, 12), 12);
        assert_eq!(batch_size(Some(&policy(None, None)), 12), 12);
        assert_eq!(batch_count(batch_size(None, 12), 12), 1);
        assert_eq!(batch_size(None, 0), 0);
    }

    #[test]
    fn the_soaks_stop_at_seven_days() {
        // spec: B4 — nodePoolSoakDuration + batchSoakDuration × batches is
        // capped at 7 days: phase 5 starts at once when it is reached.
        let day = 86_400;
        let settings = |batch: i64, pool: i64| BlueGreenSettings {
            standard_rollout_policy: Some(StandardRolloutPolicy {
                batch_soak_duration: Some(Duration::from_secs(batch)),
                ..Default::default()
            }),
            node_pool_soak_duration: Some(Duration::from_secs(pool)),
            ..Default::default()
        };
        let s = settings(day, 3 * day);
        // 5 batches of one day: 5 days, then 2 of the pool's 3 days.
        assert_eq!(batch_soak(&s, 1), SignedDuration::from_secs(day));
        assert_eq!(batch_soak(&s, 5), SignedDuration::from_secs(day));
        assert_eq!(pool_soak(&s, 5), SignedDuration::from_secs(2 * day));
        // 10 batches of one day: the 8th and later soak nothing, nor the pool.
        assert_eq!(batch_soak(&s, 7), SignedDuration::from_secs(day));
        assert_eq!(batch_soak(&s, 8), SignedDuration::ZERO);
        assert_eq!(pool_soak(&s, 10), SignedDuration::ZERO);
        // Under the cap, each soak is whole; the default pool soak is 1 h.
        let s = settings(60, 3600);
        assert_eq!(pool_soak(&s, 3), SignedDuration::from_secs(3600));
        assert_eq!(
            pool_soak(&BlueGreenSettings::default(), 0),
            SignedDuration::from_secs(3600)
        );
        assert_eq!(
            batch_soak(&BlueGreenSettings::default(), 1),
            SignedDuration::ZERO
        );
    }
}
