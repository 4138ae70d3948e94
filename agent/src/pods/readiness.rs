//! Readiness as the kubelet computes it, without I/O: the caller says when a
//! container started or stopped and what each probe returned; this says when
//! the next probe is due and whether the pod is ready.
//!
//! Kubernetes semantics kept here:
//! - a container with a readiness probe starts *not ready* and becomes ready
//!   after `successThreshold` consecutive successes; the first probe runs
//!   `initialDelaySeconds` after the start, then every `periodSeconds`;
//! - a ready container becomes not ready after `failureThreshold`
//!   consecutive failures; a timeout is a failure;
//! - without a probe, a running container is ready;
//! - probes never overlap: the next one is due a period after the previous
//!   one started, or when it answered if that was later;
//! - readiness probes keep running while the pod terminates (the endpoint's
//!   `serving` condition follows them).

use std::time::{Duration, Instant};

use super::spec::Probe;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub initial_delay: Duration,
    pub period: Duration,
    pub success: u32,
    pub failure: u32,
}

impl From<&Probe> for Thresholds {
    fn from(p: &Probe) -> Self {
        Thresholds {
            initial_delay: p.initial_delay,
            period: p.period,
            success: p.success_threshold.max(1),
            failure: p.failure_threshold.max(1),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Readiness {
    probe: Option<Thresholds>,
    running: bool,
    ready: bool,
    successes: u32,
    failures: u32,
    next_at: Option<Instant>,
    in_flight: bool,
}

impl Readiness {
    pub fn new(probe: Option<Thresholds>) -> Self {
        Readiness {
            probe,
            running: false,
            ready: false,
            successes: 0,
            failures: 0,
            next_at: None,
            in_flight: false,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.running && self.ready
    }

    /// The container (re)started at `now`.
    pub fn started(&mut self, now: Instant) {
        self.running = true;
        self.successes = 0;
        self.failures = 0;
        self.in_flight = false;
        match self.probe {
            None => {
                self.ready = true;
                self.next_at = None;
            }
            Some(t) => {
                self.ready = false;
                self.next_at = Some(now + t.initial_delay);
            }
        }
    }

    /// The container is no longer running.
    pub fn stopped(&mut self) {
        self.running = false;
        self.ready = false;
        self.next_at = None;
        self.in_flight = false;
    }

    /// A probe should start now.
    pub fn due(&self, now: Instant) -> bool {
        self.running && !self.in_flight && self.next_at.is_some_and(|t| t <= now)
    }

    /// When the next probe is due (for the caller's sleep).
    pub fn next_due(&self) -> Option<Instant> {
        if self.running && !self.in_flight {
            self.next_at
        } else {
            None
        }
    }

    pub fn probe_started(&mut self, now: Instant) {
        self.in_flight = true;
        if let Some(t) = self.probe {
            self.next_at = Some(now + t.period);
        }
    }

    /// Record a probe's result; returns the new readiness when it changed.
    pub fn record(&mut self, success: bool, now: Instant) -> Option<bool> {
        if !self.in_flight || !self.running {
            // A result for a container that stopped meanwhile: stale.
            return None;
        }
        self.in_flight = false;
        let t = self.probe?;
        if let Some(next) = self.next_at {
            if next < now {
                self.next_at = Some(now);
            }
        }
        let before = self.ready;
        if success {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if self.successes >= t.success {
                self.ready = true;
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.failures >= t.failure {
                self.ready = false;
            }
        }
        (self.ready != before).then_some(self.ready)
    }
}

/// The EndpointSlice conditions of a pod's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointConditions {
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// Kubernetes: `serving` is the pod's readiness whatever its termination
/// state; `ready` is `serving` and not terminating.
pub fn endpoint_conditions(readiness_ready: bool, terminating: bool) -> EndpointConditions {
    EndpointConditions {
        ready: readiness_ready && !terminating,
        serving: readiness_ready,
        terminating,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn th(initial: u64, period: u64, success: u32, failure: u32) -> Thresholds {
        Thresholds {
            initial_delay: Duration::from_secs(initial),
            period: Duration::from_secs(period),
            success,
            failure,
        }
    }

    #[test]
    fn not_ready_until_first_success_after_initial_delay() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let mut r = Readiness::new(Some(th(5, 10, 1, 3)));
        r.started(t0);
        assert!(!r.is_ready());
        assert!(!r.due(s(4)));
        assert!(r.due(s(5)));
        r.probe_started(s(5));
        assert!(!r.due(s(6)), "no overlap");
        assert_eq!(r.record(true, s(6)), Some(true));
        assert!(r.is_ready());
        assert_eq!(r.next_due(), Some(s(15)));
    }

    #[test]
    fn thresholds_count_consecutive_results() {
        let t0 = Instant::now();
        let mut r = Readiness::new(Some(th(0, 1, 2, 3)));
        r.started(t0);
        let step = |r: &mut Readiness, ok| {
            r.probe_started(t0);
            r.record(ok, t0)
        };
        assert_eq!(step(&mut r, true), None, "1 of 2 successes");
        assert_eq!(step(&mut r, false), None);
        assert_eq!(step(&mut r, true), None, "count restarted");
        assert_eq!(step(&mut r, true), Some(true));
        assert_eq!(step(&mut r, false), None);
        assert_eq!(step(&mut r, false), None);
        assert_eq!(step(&mut r, true), None, "a success resets failures");
        assert_eq!(step(&mut r, false), None);
        assert_eq!(step(&mut r, false), None);
        assert_eq!(step(&mut r, false), Some(false), "third failure in a row");
    }

    #[test]
    fn no_probe_means_ready_while_running() {
        let mut r = Readiness::new(None);
        assert!(!r.is_ready());
        r.started(Instant::now());
        assert!(r.is_ready());
        r.stopped();
        assert!(!r.is_ready());
    }

    #[test]
    fn conditions_of_a_terminating_pod() {
        // spec: E6 (endpoints of an evicted pod), H3 inputs
        assert_eq!(
            endpoint_conditions(true, true),
            EndpointConditions {
                ready: false,
                serving: true,
                terminating: true
            }
        );
        assert_eq!(
            endpoint_conditions(true, false),
            EndpointConditions {
                ready: true,
                serving: true,
                terminating: false
            }
        );
        assert!(!endpoint_conditions(false, true).serving);
    }
}
