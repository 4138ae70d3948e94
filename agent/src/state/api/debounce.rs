//! When to rebuild the state after changes: once they stop coming for a
//! moment, so a storm of events (a rollout, a relist after a reconnect)
//! costs one build rather than one per event, but never later than a bound
//! after the first, so a steady trickle cannot starve the datapath.

use std::time::{Duration, Instant};

/// Rebuild after `quiet` without a change, at most `max` after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debounce {
    pub quiet: Duration,
    pub max: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            quiet: Duration::from_millis(20),
            max: Duration::from_millis(500),
        }
    }
}

/// Changes seen since the last build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub first: Instant,
    pub last: Instant,
}

impl Pending {
    /// The first change, at `now`.
    pub fn new(now: Instant) -> Self {
        Pending {
            first: now,
            last: now,
        }
    }

    /// Another change, at `now`.
    pub fn touch(&mut self, now: Instant) {
        self.last = self.last.max(now);
    }
}

impl Debounce {
    /// When to build for the changes `p` holds.
    pub fn due(&self, p: &Pending) -> Instant {
        (p.last + self.quiet).min(p.first + self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_lone_change_is_built_after_the_quiet_time() {
        let d = Debounce::default();
        let t0 = Instant::now();
        assert_eq!(d.due(&Pending::new(t0)), t0 + 20 * MS);
    }

    #[test]
    fn each_change_in_a_burst_moves_the_build_later() {
        let d = Debounce::default();
        let t0 = Instant::now();
        let mut p = Pending::new(t0);
        p.touch(t0 + 30 * MS);
        assert_eq!(d.due(&p), t0 + 50 * MS);
        // A change reported late (an older instant) moves nothing back.
        p.touch(t0 + 10 * MS);
        assert_eq!(d.due(&p), t0 + 50 * MS);
    }

    #[test]
    fn a_steady_trickle_is_built_at_the_bound() {
        let d = Debounce::default();
        let t0 = Instant::now();
        let mut p = Pending::new(t0);
        for i in 1..=20 {
            p.touch(t0 + i * 40 * MS);
        }
        assert_eq!(d.due(&p), t0 + 500 * MS);
    }
}
