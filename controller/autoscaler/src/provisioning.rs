//! Scale-ups in flight (C3): done once their nodes registered; rolled back
//! when they have not after the provisioning time (15 minutes) or when the
//! pool reports a failed creation (quota, IP space), the pool then backing
//! off so that the next decision tries another.

use sluice_model::k8s::jiff::Timestamp;

use crate::backoff::{self, Backoff};
use crate::events::{self, Event};
use crate::options::Options;
use crate::scale_up::group_id;
use crate::snapshot::Index;
use crate::state::State;

/// A zone's size set back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub pool: String,
    pub zone: String,
    pub from: i32,
    pub to: i32,
}

pub(crate) struct Provisioning {
    pub rollbacks: Vec<Rollback>,
    pub events: Vec<Event>,
}

/// The error code of a pool's creation failure.
fn error_code(quota: bool, message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if quota {
        "QUOTA_EXCEEDED"
    } else if m.contains("ip space") || m.contains("pod cidr") {
        "IP_SPACE_EXHAUSTED"
    } else {
        "OTHER"
    }
}

/// Settles the requests in `state` against the index, and sets the
/// index's sizes to what they are after any rollback.
pub(crate) fn settle(
    idx: &mut Index<'_>,
    state: &mut State,
    opts: &Options,
    now: Timestamp,
) -> Provisioning {
    let mut out = Provisioning {
        rollbacks: Vec::new(),
        events: Vec::new(),
    };
    state.backoff.retain(|_, b| !b.expired(now));
    let mut failures: Vec<(String, String, String)> = Vec::new();
    // Creations the pool reconciler reports as failed, each counted once.
    for pool in &idx.pools {
        let Some(b) = pool
            .pool
            .status
            .as_ref()
            .and_then(|s| s.create_backoff.as_ref())
        else {
            continue;
        };
        let at = b.last_failure_time.0;
        if state
            .seen_failures
            .get(&pool.name)
            .is_some_and(|seen| *seen >= at)
        {
            continue;
        }
        state.seen_failures.insert(pool.name.clone(), at);
        let code = error_code(b.quota_exceeded, &b.message);
        failures.push((pool.name.clone(), code.to_owned(), b.message.clone()));
    }
    let failed: Vec<String> = failures.iter().map(|f| f.0.clone()).collect();
    let mut keep = Vec::new();
    for req in std::mem::take(&mut state.scale_ups) {
        let Some(&p) = idx.pool_by_name.get(&req.pool) else {
            continue;
        };
        let pool = &mut idx.pools[p];
        let Some(z) = pool.zone_index(&req.zone) else {
            continue;
        };
        let registered = i32::try_from(pool.registered[z].len()).unwrap_or(i32::MAX);
        let size = pool.sizes[z];
        if registered >= req.to.min(size) {
            continue;
        }
        let timed_out = now >= req.requested_at + opts.max_node_provision_time;
        let pool_failed = failed.contains(&req.pool);
        if !timed_out && !pool_failed {
            keep.push(req);
            continue;
        }
        let missing = (size - registered).min(req.to - req.from).max(0);
        let to = size - missing;
        let id = group_id(&req.pool, &req.zone);
        if timed_out && !pool_failed {
            out.events.push(events::scale_up_timed_out(
                &req.pool,
                &id,
                opts.max_node_provision_time.as_secs() / 60,
            ));
            failures.push((
                req.pool.clone(),
                backoff::TIMEOUT_CODE.into(),
                format!(
                    "Nodes added to group {id} failed to register within {}",
                    opts.max_node_provision_time
                ),
            ));
        }
        pool.sizes[z] = to;
        out.rollbacks.push(Rollback {
            pool: req.pool.clone(),
            zone: req.zone.clone(),
            from: size,
            to,
        });
    }
    state.scale_ups = keep;
    for (pool, code, message) in failures {
        let id = pool.clone();
        if code != backoff::TIMEOUT_CODE {
            out.events.push(events::failed_to_scale_up_group(
                &pool,
                &id,
                &format!("{code}: {message}"),
            ));
        }
        let next = Backoff::after_failure(state.backoff.get(&pool), now, &code, &message);
        state.backoff.insert(pool, next);
    }
    out
}
