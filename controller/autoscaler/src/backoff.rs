//! A pool's backoff after a failed scale-up, as upstream's exponential
//! node-group backoff: 5 minutes after the first failure, doubled by each
//! failure that comes after the previous backoff ran out, at most 30
//! minutes; a failure during a backoff pushes its end out without
//! doubling; everything is forgotten 3 hours after the last failure.

use serde::{Deserialize, Serialize};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};

pub const INITIAL: SignedDuration = SignedDuration::from_secs(5 * 60);
pub const MAX: SignedDuration = SignedDuration::from_secs(30 * 60);
pub const RESET: SignedDuration = SignedDuration::from_secs(3 * 3600);

/// The status' error code of a scale-up that timed out.
pub const TIMEOUT_CODE: &str = "timeout";

/// One pool's backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backoff {
    pub duration: SignedDuration,
    pub until: Timestamp,
    pub last_failure: Timestamp,
    /// `QUOTA_EXCEEDED`, `IP_SPACE_EXHAUSTED`, `timeout`, `OTHER`.
    pub error_code: String,
    pub error_message: String,
    /// The GKE visibility id of the error (`scale.up.error.quota.exceeded`).
    pub message_id: String,
}

impl Backoff {
    /// The backoff after a failure at `now`, given the one before it.
    pub fn after_failure(
        previous: Option<&Backoff>,
        now: Timestamp,
        error_code: &str,
        error_message: &str,
    ) -> Backoff {
        let duration = match previous {
            Some(p) if now.duration_since(p.last_failure) < RESET => {
                if now >= p.until {
                    (p.duration * 2).min(MAX)
                } else {
                    p.duration
                }
            }
            _ => INITIAL,
        };
        Backoff {
            duration,
            until: now + duration,
            last_failure: now,
            error_code: error_code.to_owned(),
            error_message: error_message.to_owned(),
            message_id: message_id(error_code).to_owned(),
        }
    }

    /// Whether the pool may not grow at `now`.
    pub fn active(&self, now: Timestamp) -> bool {
        now < self.until
    }

    /// Whether the backoff is to be forgotten at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        now.duration_since(self.last_failure) >= RESET
    }
}

/// GKE's visibility message id for an error code (`scale.up.error.*`).
pub fn message_id(error_code: &str) -> &'static str {
    match error_code {
        c if c.contains("QUOTA") => "scale.up.error.quota.exceeded",
        "IP_SPACE_EXHAUSTED" => "scale.up.error.ip.space.exhausted",
        "RESOURCE_POOL_EXHAUSTED" | "INSUFFICIENT_CAPACITY" => "scale.up.error.out.of.resources",
        TIMEOUT_CODE => "scale.up.error.waiting.for.instances.timeout",
        _ => "scale.up.error.other",
    }
}
