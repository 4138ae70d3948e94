//! Service allocations on the store: each cluster IP and node port a
//! Service holds is a key of its own (`/sluice/allocations/serviceips/<ip>`,
//! `/sluice/allocations/nodeports/<port>`, the owner's namespace, name and
//! uid as its value), created, and released, in the same store
//! transaction as the Service itself. The store's create-if-absent makes a
//! value held by one Service at most, across concurrent requests and
//! controllers sharing an etcd, and the transaction means a `kill -9`
//! leaves either the Service with its keys or neither. What to hold is
//! decided by `allocate` (pure); this is the I/O around it.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sluice_store::{ListOptions, Revision, Store, StoreError, Write};

use super::allocate::{self, transitions, Alloc, Claim, Config, Pool, Refusal, ServiceView};
use super::objects::{encode, random, store_error, Objects};
use super::path::Target;
use super::status::ApiError;

/// Every allocation key is under this (outside `/registry/`: no API
/// object, not in the watch cache).
pub const PREFIX: &str = "/sluice/allocations/";
const IPS: &str = "/sluice/allocations/serviceips/";
const PORTS: &str = "/sluice/allocations/nodeports/";

/// How often a write chooses again after a chosen value was taken
/// meanwhile (or a released one moved), before it gives up with a 409:
/// each round, every value contended goes to one writer, so many
/// concurrent creates settle in a few rounds.
const ATTEMPTS: usize = 32;

pub fn key_of(a: &Alloc) -> String {
    match a {
        Alloc::Ip(ip) => format!("{IPS}{ip}"),
        Alloc::Port(p) => format!("{PORTS}{p}"),
    }
}

/// The value an allocation key's name holds.
pub fn alloc_of(key: &str) -> Option<Alloc> {
    if let Some(ip) = key.strip_prefix(IPS) {
        return ip.parse().ok().map(Alloc::Ip);
    }
    key.strip_prefix(PORTS)?.parse().ok().map(Alloc::Port)
}

/// Who holds an allocation: the Service's namespace, name and uid.
fn owner(svc: &Value) -> Value {
    let m = |k: &str| svc.pointer(&format!("/metadata/{k}")).cloned();
    json!({"kind": "Service", "namespace": m("namespace"), "name": m("name"), "uid": m("uid")})
}

fn uid(v: &Value) -> Option<&str> {
    v.get("uid")
        .or_else(|| v.pointer("/metadata/uid"))
        .and_then(Value::as_str)
}

/// The keys a Service holds that name it (by uid) as their owner, each at
/// its revision: what its release deletes.
async fn owned(store: &dyn Store, svc: &Value, allocs: &[Alloc]) -> Result<Vec<Write>, StoreError> {
    let mut out = Vec::new();
    for a in allocs {
        let key = key_of(a);
        let Some(kv) = store.get(&key).await? else {
            continue;
        };
        let holder: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
        if uid(&holder).is_some() && uid(&holder) == uid(svc) {
            out.push(Write::Delete {
                key,
                expected_mod_rev: Some(kv.mod_rev),
            });
        }
    }
    Ok(out)
}

/// Every value held now in `pool`'s part of the store.
async fn held_in(store: &dyn Store, pool: Pool) -> Result<BTreeSet<Alloc>, StoreError> {
    let prefix = match pool {
        Pool::Ip(_) => IPS,
        Pool::Port => PORTS,
    };
    let page = store
        .list(ListOptions {
            prefix,
            ..ListOptions::default()
        })
        .await?;
    Ok(page
        .items
        .iter()
        .filter_map(|kv| alloc_of(&kv.key))
        .collect())
}

fn seed() -> u128 {
    u128::from_le_bytes(random::<16>())
}

/// What the Service's own write is, given its final bytes.
pub enum Own {
    Create,
    Update(Revision),
}

/// Write `svc` (planned over `old`, `None` for a create) at `key` with
/// its allocations in one transaction: the Service as stored and its
/// revision, `None` when an update changes nothing (no new revision, as
/// kube-apiserver). An asked-for value held elsewhere is a 422, a full
/// range a 500, as kube-apiserver answers.
pub async fn write(
    o: &Objects,
    t: &Target,
    key: &str,
    old: Option<&Value>,
    mut svc: Value,
    own: Own,
) -> Result<(Value, Option<Revision>), ApiError> {
    let cfg: &Config = &o.services;
    let name = svc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let refuse = |r: Refusal| r.status(&name);
    let (plan, view) = transitions::plan(cfg, old, &mut svc).map_err(refuse)?;
    if plan == allocate::Plan::default() && old == Some(&svc) {
        return Ok((svc, None));
    }
    let old_held: Vec<Alloc> = old
        .map(|o| transitions::held(&ServiceView::read(o)).unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.alloc)
        .collect();
    let mut taken: BTreeSet<Alloc> = plan.claims.iter().map(|c| c.alloc).collect();
    taken.extend(&old_held);
    let store = o.store.as_ref();
    let holder = encode(&owner(&svc));
    for _ in 0..ATTEMPTS {
        let mut view = view.clone();
        // What this round chose is taken for this round only: a round
        // refused for another key leaves its choices free for the next.
        let mut round = taken.clone();
        let mut chosen: Vec<Alloc> = Vec::new();
        for need in &plan.needs {
            let mut pick = cfg.choose(need.pool, &round, seed());
            if pick.is_none() {
                // Full as far as known: the pool as it is now.
                let now = held_in(store, need.pool)
                    .await
                    .map_err(|e| store_error(t, e))?;
                taken.extend(&now);
                round.extend(now);
                pick = cfg.choose(need.pool, &round, seed());
            }
            let a = pick.ok_or_else(|| refuse(need.full()))?;
            round.insert(a);
            chosen.push(a);
            allocate::fill(&mut view, &need.slot, a);
        }
        view.write(&mut svc);
        let value = encode(&svc);
        let mut writes = vec![match own {
            Own::Create => Write::Create {
                key: key.to_string(),
                value,
            },
            Own::Update(rev) => Write::Update {
                key: key.to_string(),
                value,
                expected_mod_rev: rev,
            },
        }];
        for a in plan.claims.iter().map(|c| &c.alloc).chain(&chosen) {
            writes.push(Write::Create {
                key: key_of(a),
                value: holder.clone(),
            });
        }
        if let Some(old) = old {
            writes.extend(
                owned(store, old, &plan.releases)
                    .await
                    .map_err(|e| store_error(t, e))?,
            );
        }
        match store.txn(writes).await {
            Ok(revs) => return Ok((svc, revs.first().copied())),
            Err(e) if e_key(&e) == Some(key) => return Err(store_error(t, e)),
            Err(StoreError::AlreadyExists { key: k }) => {
                if let Some(c) = claim_at(&plan.claims, &k) {
                    return Err(refuse(c.taken()));
                }
                // A chosen value went to another Service meanwhile: the
                // next round knows its pool as it is now.
                if let Some(a) = alloc_of(&k) {
                    taken.insert(a);
                    let pool = match a {
                        Alloc::Ip(ip) => Pool::Ip(allocate::Family::of(&ip)),
                        Alloc::Port(_) => Pool::Port,
                    };
                    taken.extend(held_in(store, pool).await.map_err(|e| store_error(t, e))?);
                }
            }
            // A released key moved meanwhile: read them again.
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {}
            Err(e) => return Err(store_error(t, e)),
        }
    }
    Err(store_error(
        t,
        StoreError::Conflict {
            key: key.to_string(),
            expected: 0,
            current: 0,
        },
    ))
}

fn e_key(e: &StoreError) -> Option<&str> {
    match e {
        StoreError::AlreadyExists { key }
        | StoreError::NotFound { key }
        | StoreError::Conflict { key, .. } => Some(key),
        _ => None,
    }
}

fn claim_at<'a>(claims: &'a [Claim], key: &str) -> Option<&'a Claim> {
    claims.iter().find(|c| key_of(&c.alloc) == key)
}

/// Remove the Service `svc` stored at `key` (at `rev`) and release what it
/// holds, in one transaction; the deletion's revision. `Conflict` when
/// the Service moved (the caller reads it again).
pub async fn remove(
    store: &dyn Store,
    key: &str,
    svc: &Value,
    rev: Revision,
) -> Result<Revision, StoreError> {
    let held: Vec<Alloc> = transitions::held(&ServiceView::read(svc))
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.alloc)
        .collect();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let mut writes = vec![Write::Delete {
            key: key.to_string(),
            expected_mod_rev: Some(rev),
        }];
        writes.extend(owned(store, svc, &held).await?);
        match store.txn(writes).await {
            Ok(revs) => return Ok(revs[0]),
            Err(e) if e_key(&e) == Some(key) => return Err(e),
            // An allocation key moved between the read and the write.
            Err(e @ (StoreError::Conflict { .. } | StoreError::NotFound { .. })) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| StoreError::Conflict {
        key: key.to_string(),
        expected: rev,
        current: 0,
    }))
}

/// Where Services are stored.
const SERVICES: &str = "/registry/core/services/";
/// How often the repair pass runs (kube-apiserver's repair controllers
/// run every 3 minutes).
pub const REPAIR_EVERY: std::time::Duration = std::time::Duration::from_secs(180);

/// What one repair pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    pub freed: usize,
    pub taken: usize,
    pub reports: Vec<String>,
}

/// One repair pass over the Services and the allocation keys as they were
/// at one revision (`allocate::repair` decides): keys no Service holds are
/// deleted (at their revision, so one taken meanwhile stays), values
/// Services hold without a key get one, values held twice are reported.
/// Every write here is conditional, so any number of controllers may
/// repair at once.
pub async fn repair(store: &dyn Store) -> Result<Repaired, StoreError> {
    use allocate::repair::{self as decide, Holder, Key};
    let services = store
        .list(ListOptions {
            prefix: SERVICES,
            ..ListOptions::default()
        })
        .await?;
    let keys = store
        .list(ListOptions {
            prefix: PREFIX,
            at_revision: Some(services.revision),
            ..ListOptions::default()
        })
        .await?;
    let objects: Vec<Value> = services
        .items
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect();
    let holders: Vec<Holder> = objects
        .iter()
        .map(|svc| Holder {
            name: format!(
                "{}/{}",
                svc.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                svc.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            ),
            uid: uid(svc).unwrap_or_default().to_string(),
            held: transitions::held(&ServiceView::read(svc))
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.alloc)
                .collect(),
        })
        .collect();
    let keys: Vec<Key> = keys
        .items
        .iter()
        .filter_map(|kv| {
            let owner: Value = serde_json::from_slice(&kv.value).unwrap_or_default();
            Some(Key {
                alloc: alloc_of(&kv.key)?,
                owner: uid(&owner).unwrap_or_default().to_string(),
                mod_rev: kv.mod_rev,
            })
        })
        .collect();
    let plan = decide::plan(&holders, &keys);
    let mut done = Repaired {
        reports: plan.reports,
        ..Repaired::default()
    };
    for k in plan.free {
        // Moved meanwhile (taken again): not an orphan any more.
        if store
            .delete(&key_of(&k.alloc), Some(k.mod_rev))
            .await
            .is_ok()
        {
            done.freed += 1;
        }
    }
    for (a, i) in plan.take {
        match store.create(&key_of(&a), encode(&owner(&objects[i]))).await {
            Ok(_) => done.taken += 1,
            Err(StoreError::AlreadyExists { .. }) => done.reports.push(format!(
                "{a} of Service {} is held by another Service",
                holders[i].name
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// One repair pass, what it mended and reports logged.
pub async fn repair_logged(store: &dyn Store) {
    match repair(store).await {
        Ok(r) => {
            if r.freed > 0 || r.taken > 0 {
                tracing::info!(
                    freed = r.freed,
                    taken = r.taken,
                    "Service allocations repaired"
                );
            }
            for report in r.reports {
                tracing::warn!("Service allocations: {report}");
            }
        }
        Err(e) => tracing::warn!(error = %e, "repairing Service allocations"),
    }
}

/// Repair every [`REPAIR_EVERY`] from now on.
pub fn spawn_repair(store: std::sync::Arc<dyn Store>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REPAIR_EVERY).await;
            repair_logged(store.as_ref()).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_value_they_hold() {
        for a in [
            Alloc::Ip("198.18.0.9".parse().expect("v4")),
            Alloc::Ip("fd00:198:18::9".parse().expect("v6")),
            Alloc::Port(30080),
        ] {
            assert_eq!(alloc_of(&key_of(&a)), Some(a));
            assert!(key_of(&a).starts_with(PREFIX));
        }
        assert_eq!(alloc_of("/registry/core/services/default/web"), None);
        assert_eq!(alloc_of("/sluice/allocations/nodeports/x"), None);
    }
}
