//! One backend's health as GCE keeps it, pure: consecutive probe results
//! against two thresholds. A new backend starts unhealthy (with none
//! healthy the engine sends to all, which covers startup); it turns healthy
//! after `healthy_threshold` successes in a row and unhealthy only after
//! `unhealthy_threshold` failures in a row (spec H4): until then it keeps
//! getting new connections.

/// The thresholds of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub healthy: u32,
    pub unhealthy: u32,
}

/// A change of verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transition {
    ToHealthy,
    ToUnhealthy,
}

impl Transition {
    /// The `to` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::ToHealthy => "healthy",
            Transition::ToUnhealthy => "unhealthy",
        }
    }
}

/// The verdict and the current run of equal results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    healthy: bool,
    successes: u32,
    failures: u32,
}

impl Machine {
    /// Unhealthy, no results yet.
    pub fn new() -> Machine {
        Machine::default()
    }

    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Takes one probe result; a change of verdict is returned.
    pub fn record(&mut self, success: bool, t: Thresholds) -> Option<Transition> {
        if success {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if !self.healthy && self.successes >= t.healthy.max(1) {
                self.healthy = true;
                return Some(Transition::ToHealthy);
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.healthy && self.failures >= t.unhealthy.max(1) {
                self.healthy = false;
                return Some(Transition::ToUnhealthy);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GKE_CLUSTER: Thresholds = Thresholds {
        healthy: 1,
        unhealthy: 3,
    };

    fn feed(m: &mut Machine, t: Thresholds, results: &[bool]) -> Vec<Option<Transition>> {
        results.iter().map(|&r| m.record(r, t)).collect()
    }

    #[test]
    fn a_new_backend_is_unhealthy_until_its_healthy_threshold() {
        let t = Thresholds {
            healthy: 2,
            unhealthy: 2,
        };
        let mut m = Machine::new();
        assert!(!m.healthy());
        assert_eq!(
            feed(&mut m, t, &[true, false, true, true]),
            [None, None, None, Some(Transition::ToHealthy)]
        );
        assert!(m.healthy());
    }

    #[test]
    fn unhealthy_only_once_the_unhealthy_threshold_is_reached() {
        // spec: H4
        let mut m = Machine::new();
        assert_eq!(m.record(true, GKE_CLUSTER), Some(Transition::ToHealthy));
        assert_eq!(feed(&mut m, GKE_CLUSTER, &[false, false]), [None, None]);
        assert!(
            m.healthy(),
            "two failures of three: still sent new connections"
        );
        assert_eq!(m.record(false, GKE_CLUSTER), Some(Transition::ToUnhealthy));
        assert!(!m.healthy());
        assert_eq!(m.record(false, GKE_CLUSTER), None, "no second transition");
    }

    #[test]
    fn flapping_below_either_threshold_changes_nothing() {
        // spec: H4
        let t = Thresholds {
            healthy: 2,
            unhealthy: 2,
        };
        let mut m = Machine::new();
        assert_eq!(
            feed(&mut m, t, &[true, true]),
            [None, Some(Transition::ToHealthy)]
        );
        // Alternating results never make two failures in a row.
        let flaps = feed(&mut m, t, &[false, true, false, true, false, true]);
        assert!(flaps.iter().all(Option::is_none), "{flaps:?}");
        assert!(m.healthy());
        assert_eq!(
            feed(&mut m, t, &[false, false]),
            [None, Some(Transition::ToUnhealthy)]
        );
        // And back: alternating never makes two successes in a row.
        let flaps = feed(&mut m, t, &[true, false, true, false]);
        assert!(flaps.iter().all(Option::is_none), "{flaps:?}");
        assert!(!m.healthy());
    }

    #[test]
    fn thresholds_changed_on_the_way_apply_to_the_run_so_far() {
        let mut m = Machine::new();
        let slow = Thresholds {
            healthy: 3,
            unhealthy: 3,
        };
        assert_eq!(feed(&mut m, slow, &[true, true]), [None, None]);
        // The check's healthy threshold lowered to 2 after two successes:
        // the run is kept, and the next success is weighed against 2.
        let fast = Thresholds {
            healthy: 2,
            unhealthy: 3,
        };
        assert_eq!(m.record(true, fast), Some(Transition::ToHealthy));
    }
}
