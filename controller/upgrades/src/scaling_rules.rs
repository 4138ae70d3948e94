//! What the cluster autoscaler may do to each side of a blue-green
//! upgrade in each phase: written once here, published in the pool's
//! `status.updateInfo.blueGreenInfo` by the upgrade loop, and read by the
//! autoscaler. The table is GKE's: in phases 1–3 green may only grow and
//! blue is left alone (B1–B3); from the soak on green scales both ways
//! (B4, B5); while an autoscaled upgrade waits to drain, blue may only
//! shrink, to zero, its minimum not applying (A1); during a rollback blue
//! may grow and green is left alone (B6).

use sluice_model::node_pool::ScalingRules;
use sluice_model::operation::BlueGreenPhase;

const NONE: ScalingRules = ScalingRules {
    scale_up: false,
    scale_down: false,
    respect_minimum: true,
};
const UP: ScalingRules = ScalingRules {
    scale_up: true,
    scale_down: false,
    respect_minimum: true,
};
const BOTH: ScalingRules = ScalingRules {
    scale_up: true,
    scale_down: true,
    respect_minimum: true,
};
const DOWN_TO_ZERO: ScalingRules = ScalingRules {
    scale_up: false,
    scale_down: true,
    respect_minimum: false,
};

/// The rules for (blue, green) in `phase` (`None`: no upgrade: the pool
/// scales as usual). `autoscaled`: the upgrade has an
/// `autoscaledRolloutPolicy`.
pub fn blue_green(phase: Option<BlueGreenPhase>, autoscaled: bool) -> (ScalingRules, ScalingRules) {
    use BlueGreenPhase as P;
    let Some(phase) = phase else {
        return (BOTH, BOTH);
    };
    match (phase, autoscaled) {
        (P::RollbackStarted, false) => (UP, NONE),
        (P::RollbackStarted, true) => (BOTH, NONE),
        (P::WaitingToDrainBluePool, _) => (DOWN_TO_ZERO, BOTH),
        (_, true) => (NONE, BOTH),
        (P::NodePoolSoaking | P::DeletingBluePool, false) => (NONE, BOTH),
        (
            P::UpdateStarted | P::CreatingGreenPool | P::CordoningBluePool | P::DrainingBluePool,
            false,
        ) => (NONE, UP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BlueGreenPhase as P;

    #[test]
    fn standard_blue_green_grows_green_only_until_the_soak() {
        // spec: B1, B2, B3 — blue is neither grown nor cut; green only grows.
        for p in [
            P::CreatingGreenPool,
            P::CordoningBluePool,
            P::DrainingBluePool,
        ] {
            assert_eq!(blue_green(Some(p), false), (NONE, UP), "{p:?}");
        }
        // spec: B4, B5 — from the soak on green scales both ways.
        for p in [P::NodePoolSoaking, P::DeletingBluePool] {
            assert_eq!(blue_green(Some(p), false), (NONE, BOTH), "{p:?}");
        }
        // spec: B6 — a rollback may grow blue and leaves green alone.
        assert_eq!(blue_green(Some(P::RollbackStarted), false), (UP, NONE));
    }

    #[test]
    fn autoscaled_blue_green_shrinks_blue_to_zero_only_while_waiting() {
        // spec: A1 — during the wait blue only shrinks, to zero, ignoring
        // its minimum; green scales as usual in every phase.
        let (blue, green) = blue_green(Some(P::WaitingToDrainBluePool), true);
        assert!(!blue.scale_up && blue.scale_down && !blue.respect_minimum);
        assert_eq!(green, BOTH);
        for p in [
            P::CreatingGreenPool,
            P::CordoningBluePool,
            P::DrainingBluePool,
            P::DeletingBluePool,
        ] {
            assert_eq!(blue_green(Some(p), true), (NONE, BOTH), "{p:?}");
        }
    }

    #[test]
    fn without_an_upgrade_the_pool_scales_as_usual() {
        assert_eq!(blue_green(None, false), (BOTH, BOTH));
        assert_eq!(blue_green(None, true), (BOTH, BOTH));
    }
}
