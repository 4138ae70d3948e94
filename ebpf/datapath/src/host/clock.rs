//! Clocks for the host engines and the tests.

use crate::env::Clock;
use std::sync::OnceLock;
use std::time::Instant;

/// xorshift64*: small, fast, good enough for SNAT port picks.
#[inline]
fn xorshift(state: &mut u64) -> u32 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
}

fn process_epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Monotonic time since a process-wide epoch, so every engine thread's clock
/// agrees on conntrack expiry.
#[derive(Clone, Debug)]
pub struct SystemClock {
    rng: u64,
}

impl SystemClock {
    pub fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        let tid = std::thread::current().id();
        let salt = format!("{tid:?}").len() as u64;
        Self {
            rng: (seed ^ salt.rotate_left(32)) | 1,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemClock {
    /// A pseudo-random number (the program itself uses none).
    pub fn random(&mut self) -> u32 {
        xorshift(&mut self.rng)
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        // Offset by a second so "expires at 0" entries are already expired.
        process_epoch().elapsed().as_nanos() as u64 + 1_000_000_000
    }
}

/// Settable time and seeded randomness, for deterministic tests.
#[derive(Clone, Debug)]
pub struct TestClock {
    pub now: u64,
    rng: u64,
}

impl TestClock {
    pub fn new(seed: u64) -> Self {
        Self {
            now: 1_000_000_000,
            rng: seed | 1,
        }
    }

    pub fn set(&mut self, now_ns: u64) {
        self.now = now_ns;
    }

    pub fn advance_ns(&mut self, ns: u64) {
        self.now += ns;
    }

    pub fn advance_s(&mut self, s: u64) {
        self.now += s * 1_000_000_000;
    }
}

impl Default for TestClock {
    fn default() -> Self {
        Self::new(0x5eed)
    }
}

impl TestClock {
    /// A seeded pseudo-random number (the program itself uses none).
    pub fn random(&mut self) -> u32 {
        xorshift(&mut self.rng)
    }
}

impl Clock for TestClock {
    fn now_ns(&self) -> u64 {
        self.now
    }
}
