//! When to rebuild the state after changes: once they stop coming for a
//! moment, so a storm of events (a rollout, a relist after a reconnect)
//! costs one build rather than one per event, but never later than a bound
//! after the first, so a steady trickle cannot starve the datapath. The
//! first change after a quiet spell is built at once (after `settle`), as
//! kube-proxy's bounded-frequency runner syncs at once when its last sync
//! is old enough: a lone endpoint change reaches the datapath without
//! waiting out the burst rule, and what follows it is batched as before.

use std::time::{Duration, Instant};

/// Rebuild after `quiet` without a change, at most `max` after the first;
/// a first change at least `idle` after the last build: after `settle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debounce {
    pub quiet: Duration,
    pub max: Duration,
    pub idle: Duration,
    pub settle: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            quiet: Duration::from_millis(20),
            max: Duration::from_millis(500),
            idle: Duration::from_millis(50),
            settle: Duration::from_millis(2),
        }
    }
}

/// Changes seen since the last build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub first: Instant,
    pub last: Instant,
    /// The last build was at least `idle` before the first change.
    pub leading: bool,
}

impl Pending {
    /// The first change, at `now`; the last build ended at `built`.
    pub fn new(now: Instant, built: Instant, d: &Debounce) -> Self {
        Pending {
            first: now,
            last: now,
            leading: now.saturating_duration_since(built) >= d.idle,
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
        if p.leading {
            return p.first + self.settle;
        }
        (p.last + self.quiet).min(p.first + self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A batch starting at `t0` right after a build.
    fn busy(d: &Debounce, t0: Instant) -> Pending {
        Pending::new(t0, t0, d)
    }

    #[test]
    fn a_change_right_after_a_build_waits_the_quiet_time() {
        let d = Debounce::default();
        let t0 = Instant::now();
        assert_eq!(d.due(&busy(&d, t0)), t0 + 20 * MS);
        let soon = Pending::new(t0 + 49 * MS, t0, &d);
        assert_eq!(d.due(&soon), t0 + 69 * MS);
    }

    #[test]
    fn the_first_change_after_a_quiet_spell_is_built_at_once() {
        let d = Debounce::default();
        let t0 = Instant::now();
        let mut p = Pending::new(t0 + 50 * MS, t0, &d);
        assert_eq!(d.due(&p), t0 + 52 * MS);
        // The rest of its burst waits for the next build.
        p.touch(t0 + 51 * MS);
        assert_eq!(d.due(&p), t0 + 52 * MS);
    }

    #[test]
    fn each_change_in_a_burst_moves_the_build_later() {
        let d = Debounce::default();
        let t0 = Instant::now();
        let mut p = busy(&d, t0);
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
        let mut p = busy(&d, t0);
        for i in 1..=20 {
            p.touch(t0 + i * 40 * MS);
        }
        assert_eq!(d.due(&p), t0 + 500 * MS);
    }
}
