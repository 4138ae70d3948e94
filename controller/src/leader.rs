//! Which controller runs the decision loops. With etcd, controllers
//! campaign for one leader key (`sluice_store::leader`): exactly one holds
//! it, the others serve the API and wait; when the leader dies its lease
//! expires and another takes over. With the embedded store there is one
//! controller, the leader.
//!
//! The decision loops arrive in later issues; today's loop is the proof:
//! the leader renews a `coordination.k8s.io/v1` Lease
//! `kube-system/sluice-controller` (holderIdentity, renewTime,
//! leaseTransitions) every second, each write fenced by the leader key so
//! a deposed leader's write is refused by etcd.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Txn, TxnOp};
use serde_json::{json, Value};
use sluice_store::leader::Candidate;
use sluice_store::Store;
use tracing::{info, warn};

/// The leader key in etcd (outside `/registry/`: not an API object).
pub const LEADER_KEY: &str = "/sluice/controller/leader";
/// The Lease object the leader renews, as the API serves it.
pub const LEASE_KEY: &str = "/registry/coordination.k8s.io/leases/kube-system/sluice-controller";
/// The leader key's lease: a dead leader is replaced about this long after
/// it stopped (the bound is 15 s).
const TTL_SECS: i64 = 5;
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The Lease as this holder writes it, continuing `previous`.
pub fn lease(previous: Option<&Value>, holder: &str, now: &str) -> Value {
    let prev_holder = previous
        .and_then(|p| p.pointer("/spec/holderIdentity"))
        .and_then(Value::as_str);
    let transitions = previous
        .and_then(|p| p.pointer("/spec/leaseTransitions"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
        + i64::from(prev_holder.is_some_and(|h| h != holder));
    let acquired = match previous {
        Some(p) if prev_holder == Some(holder) => p
            .pointer("/spec/acquireTime")
            .cloned()
            .unwrap_or(json!(now)),
        _ => json!(now),
    };
    let metadata = previous
        .and_then(|p| p.get("metadata").cloned())
        .unwrap_or_else(|| json!({"name": "sluice-controller", "namespace": "kube-system", "creationTimestamp": now}));
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": TTL_SECS,
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        },
    })
}

fn stored(v: &Value) -> Vec<u8> {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The decision loops a leader runs (`None`: only the election, as the
/// election tests run it).
#[derive(Clone)]
pub struct Loops {
    pub client: kube::Client,
    pub config: crate::loops::LoopConfig,
}

fn start(loops: Option<&Loops>) -> Option<tokio::task::JoinSet<()>> {
    loops.map(|l| crate::loops::run(l.client.clone(), &l.config))
}

/// Campaign on etcd forever; while leader, run the loops and renew the
/// Lease, fenced. A deposed leader's loops are stopped before it
/// campaigns again.
pub async fn run_on_etcd(client: Client, identity: String, loops: Option<Loops>) {
    loop {
        let candidate = Candidate::new(client.clone(), LEADER_KEY, &identity, TTL_SECS);
        let lead = match candidate.campaign().await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "campaign failed; retrying");
                tokio::time::sleep(RENEW_EVERY).await;
                continue;
            }
        };
        info!(
            identity,
            since = lead.revision(),
            "leader: running the decision loops"
        );
        let mut kv = client.clone();
        // Dropped (every task aborted) when this leadership ends.
        let _running = start(loops.as_ref());
        loop {
            let previous = kv.get(LEASE_KEY, None).await.ok().and_then(|r| {
                r.kvs()
                    .first()
                    .and_then(|k| serde_json::from_slice::<Value>(k.value()).ok())
            });
            let next = lease(previous.as_ref(), &identity, &crate::clock::now_rfc3339());
            let txn = Txn::new().when([lead.fence()]).and_then([TxnOp::put(
                LEASE_KEY,
                stored(&next),
                None,
            )]);
            match kv.txn(txn).await {
                Ok(r) if r.succeeded() => {}
                Ok(_) => {
                    warn!(identity, "no longer the leader (fenced write refused)");
                    break;
                }
                Err(e) => warn!(error = %e, "renewing the Lease"),
            }
            tokio::select! {
                _ = lead.lost() => {
                    warn!(identity, "leader lease lost");
                    break;
                }
                _ = tokio::time::sleep(RENEW_EVERY) => {}
            }
        }
    }
}

/// The embedded store has one controller: it leads, unfenced.
pub async fn run_alone(store: Arc<dyn Store>, identity: String, loops: Option<Loops>) {
    info!(identity, "leader (embedded store: the only controller)");
    let _running = start(loops.as_ref());
    loop {
        let result = async {
            match store.get(LEASE_KEY).await? {
                Some(kv) => {
                    let prev = serde_json::from_slice::<Value>(&kv.value).ok();
                    let next = lease(prev.as_ref(), &identity, &crate::clock::now_rfc3339());
                    store
                        .update(LEASE_KEY, stored(&next), kv.mod_rev)
                        .await
                        .map(|_| ())
                }
                None => store
                    .create(
                        LEASE_KEY,
                        stored(&lease(None, &identity, &crate::clock::now_rfc3339())),
                    )
                    .await
                    .map(|_| ()),
            }
        }
        .await;
        if let Err(e) = result {
            warn!(error = %e, "renewing the Lease");
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
}

/// Run the election for `store` in the background.
pub fn spawn(store: Arc<dyn Store>, etcd: Option<Client>, identity: String, loops: Option<Loops>) {
    match etcd {
        Some(c) => tokio::spawn(run_on_etcd(c, identity, loops)),
        None => tokio::spawn(run_alone(store, identity, loops)),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_holder_counts_a_transition_the_same_holder_does_not() {
        let a = lease(None, "a", "t0");
        assert_eq!(a["spec"]["leaseTransitions"], 0);
        assert_eq!(a["metadata"]["namespace"], "kube-system");
        let a2 = lease(Some(&a), "a", "t1");
        assert_eq!(a2["spec"]["leaseTransitions"], 0);
        assert_eq!(a2["spec"]["acquireTime"], "t0");
        assert_eq!(a2["spec"]["renewTime"], "t1");
        let b = lease(Some(&a2), "b", "t2");
        assert_eq!(b["spec"]["leaseTransitions"], 1);
        assert_eq!(b["spec"]["acquireTime"], "t2");
        assert_eq!(b["spec"]["holderIdentity"], "b");
    }
}
