//! How soon a broken watch is started again. kube-rs's default waits
//! 800 ms (doubling to 30 s) before the first retry; a watch that breaks
//! because the API server restarted has missed the changes written just
//! before the crash, and gets them only when it watches again from its
//! last resourceVersion. An evicted pod's SIGTERM waits for the other
//! nodes to stop routing to it ([`crate::state::advertised`]); the sooner
//! every agent is back, the smaller the window in which a node still
//! routes by a slice the others have moved past (found by killing the
//! controller mid-drain). So: 100 ms first, doubling to 30 s, each with up
//! to half again at random so thousands of agents do not come back in step.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use kube::runtime::utils::Backoff;

use crate::backoff::doubling;

const FIRST: Duration = Duration::from_millis(100);
const CAP: Duration = Duration::from_secs(30);

/// The delays before each retry of one watch; back to [`FIRST`] after any
/// event the watch delivers (kube-rs resets it then).
#[derive(Debug, Default)]
pub struct Rewatch {
    failures: u32,
}

impl Iterator for Rewatch {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = doubling(FIRST, CAP, self.failures);
        self.failures = self.failures.saturating_add(1);
        Some(base + jitter(base / 2))
    }
}

impl Backoff for Rewatch {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Uniform-ish in `[0, max]`: the standard library's per-process random
/// hasher keys are randomness enough to spread retries.
fn jitter(max: Duration) -> Duration {
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(r % nanos.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_retry_is_quick_then_doubles_to_the_cap_and_resets() {
        let mut b = Rewatch::default();
        let first = b.next().expect("a delay");
        assert!(first >= FIRST && first <= FIRST * 3 / 2, "{first:?}");
        let second = b.next().expect("a delay");
        assert!(second >= 2 * FIRST && second <= 3 * FIRST, "{second:?}");
        for _ in 0..40 {
            let d = b.next().expect("a delay");
            assert!(d <= CAP * 3 / 2, "{d:?}");
        }
        assert!(b.next().expect("a delay") >= CAP);
        b.reset();
        assert!(b.next().expect("a delay") <= FIRST * 3 / 2);
    }
}
