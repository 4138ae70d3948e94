//! The one doubling back-off the agent's retries share: `first`, doubled
//! `doublings` times, at most `cap` (no overflow however many).

use std::time::Duration;

pub fn doubling(first: Duration, cap: Duration, doublings: u32) -> Duration {
    first.saturating_mul(1u32 << doublings.min(16)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_without_overflow() {
        let s = Duration::from_secs(1);
        assert_eq!(doubling(s, 30 * s, 0), s);
        assert_eq!(doubling(s, 30 * s, 3), 8 * s);
        assert_eq!(doubling(s, 30 * s, 5), 30 * s);
        assert_eq!(doubling(s, 30 * s, u32::MAX), 30 * s);
    }
}
