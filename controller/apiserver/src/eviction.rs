//! The Eviction subresource (`POST .../pods/<name>/eviction`, a `policy/v1`
//! Eviction), as kube-apiserver serves it: a pod terminal, pending or
//! already being deleted goes without a budget check; otherwise the
//! PodDisruptionBudgets of its namespace that select it decide — none:
//! allowed; several: 500; one: its status is computed from the pods now
//! (Sluice has no separate disruption controller, so it is never stale)
//! and the eviction spends one disruption (201) or is refused (429, the
//! budget named in `details.causes`). The arithmetic is
//! `sluice_model::policy::disruption`; this file reads and writes.
//!
//! A spent disruption is written to the budget's status (`disruptionsAllowed`
//! one fewer, the pod in `disruptedPods`) against the budget's revision
//! before the pod is deleted, so two concurrent evictions cannot spend one
//! allowance: the loser rereads and decides again. A dry run
//! (`dryRun=All`) runs against a store that writes nothing (`dry_run.rs`).

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s_openapi::api::core::v1::PodStatus;
use sluice_model::k8s_openapi::api::policy::v1::{
    PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ObjectMeta, Preconditions,
};
use sluice_model::policy::disruption::{self as pdb, Budget, PodFacts, Verdict};
use sluice_store::{ListOptions, StoreError};

use super::deletion;
use super::dry_run::{self, Commit};
use super::objects::{key, store_error, Objects};
use super::path::{resolve, Target};
use super::status::ApiError;
use super::write::delete_with;

/// How often an eviction decides again after losing the race for a
/// budget's status to another eviction, before it answers 409.
const ATTEMPTS: usize = 10;

fn internal(message: String) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        format!("Internal error occurred: {message}"),
    );
    e.details = Some(json!({"causes": [{"message": message}]}));
    e
}

fn bad_request(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn decode(what: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| internal(format!("stored {what} unreadable: {e}")))
}

/// What the budget rules need of a stored pod.
fn facts(pod: &Value) -> Result<PodFacts, ApiError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let meta: ObjectMeta =
        serde_json::from_value(pod.get("metadata").cloned().unwrap_or(Value::Null))
            .map_err(|e| internal(format!("pod {name:?}: metadata: {e}")))?;
    let status: Option<PodStatus> = match pod.get("status") {
        None | Some(Value::Null) => None,
        Some(s) => Some(
            serde_json::from_value(s.clone())
                .map_err(|e| internal(format!("pod {name:?}: status: {e}")))?,
        ),
    };
    Ok(PodFacts::of(&meta, status.as_ref()))
}

/// A stored budget, read.
struct StoredBudget {
    name: String,
    key: String,
    mod_rev: i64,
    object: Value,
    spec: PodDisruptionBudgetSpec,
    status: PodDisruptionBudgetStatus,
}

fn read_budget(key: String, mod_rev: i64, object: Value) -> Result<StoredBudget, ApiError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let field = |f: &str| match object.get(f) {
        None | Some(Value::Null) => json!({}),
        Some(v) => v.clone(),
    };
    let spec = serde_json::from_value(field("spec"))
        .map_err(|e| internal(format!("poddisruptionbudget {name:?}: spec: {e}")))?;
    let status = serde_json::from_value(field("status"))
        .map_err(|e| internal(format!("poddisruptionbudget {name:?}: status: {e}")))?;
    Ok(StoredBudget {
        name,
        key,
        mod_rev,
        object,
        spec,
        status,
    })
}

/// Every object under a storage prefix, with its key and revision.
async fn list(o: &Objects, t: &Target, what: &str) -> Result<Vec<(String, i64, Value)>, ApiError> {
    let page = o
        .store
        .list(ListOptions {
            prefix: &key(t, None),
            limit: None,
            start_after: None,
            at_revision: None,
        })
        .await
        .map_err(|e| store_error(t, e))?;
    page.items
        .into_iter()
        .map(|kv| Ok((kv.key, kv.mod_rev, decode(what, &kv.value)?)))
        .collect()
}

fn collection(t: &Target, path: String) -> Result<Target, ApiError> {
    resolve(&path)
        .map_err(|_| internal(format!("{path}: not a served collection")))
        .map(|c| Target {
            namespace: t.namespace.clone(),
            ..c
        })
}

fn refused(budget: &str, status: &pdb::BudgetStatus) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "TooManyRequests",
        pdb::REFUSED_MESSAGE,
    );
    e.details = Some(json!({
        "causes": [{"reason": "DisruptionBudget", "message": pdb::refusal_cause(budget, status)}],
    }));
    e
}

fn success() -> Response {
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        })),
    )
        .into_response()
}

/// Delete the pod as the eviction's options say, answering 201.
async fn evict(o: &Objects, pod: &Target, opts: &DeleteOptions) -> Result<Response, ApiError> {
    match delete_with(o, pod, opts).await {
        Ok(r) if r.status().is_success() => Ok(success()),
        Ok(r) => Ok(r),
        Err(e) => Err(e),
    }
}

/// `POST .../pods/<name>/eviction`; `dry`: the query's `dryRun` values.
/// A dry run (the query's or the `deleteOptions`') decides as a real one
/// and answers the same, spending no disruption and deleting nothing.
pub async fn create(
    o: &Objects,
    t: &Target,
    body: Value,
    dry: Vec<String>,
) -> Result<Response, ApiError> {
    Commit::of("CreateOptions", &dry)?;
    let name = t.name.clone().unwrap_or_default();
    if let Some(n) = body.pointer("/metadata/name").and_then(Value::as_str) {
        if n != name {
            return Err(bad_request(format!(
                "name in URL does not match name in Eviction object: {name:?} and {n:?}"
            )));
        }
    }
    let opts: DeleteOptions = match body.get("deleteOptions") {
        None | Some(Value::Null) => DeleteOptions::default(),
        Some(d) => serde_json::from_value(d.clone())
            .map_err(|e| bad_request(format!("deleteOptions: {e}")))?,
    };
    let dry = dry_run::eviction_values(dry, opts.dry_run.as_ref())?;
    let committed = o.for_request("delete", &dry)?;
    let o = &committed;
    let pod_target = Target {
        subresource: None,
        ..t.clone()
    };
    let ns = t.namespace.clone().unwrap_or_default();
    let pods_t = collection(t, format!("/api/v1/namespaces/{ns}/pods"))?;
    let pdbs_t = collection(
        t,
        format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
    )?;

    for _ in 0..ATTEMPTS {
        let current = o
            .store
            .get(&key(&pod_target, Some(&name)))
            .await
            .map_err(|e| store_error(&pod_target, e))?
            .ok_or_else(|| store_error(&pod_target, StoreError::NotFound { key: name.clone() }))?;
        let pod = facts(&decode("pod", &current.value)?)?;
        if pod.can_ignore_budget() {
            return evict(o, &pod_target, &opts).await;
        }
        let mut guarding = Vec::new();
        for (k, rev, obj) in list(o, &pdbs_t, "poddisruptionbudget").await? {
            let b = read_budget(k, rev, obj)?;
            if pdb::guards(&ns, &b.spec, &pod) {
                guarding.push(b);
            }
        }
        let budget = match guarding.len() {
            0 => return evict(o, &pod_target, &opts).await,
            1 => guarding.remove(0),
            _ => return Err(internal(pdb::SEVERAL_BUDGETS_MESSAGE.to_string())),
        };
        let arithmetic = Budget::of(&budget.spec)
            .map_err(|e| internal(format!("poddisruptionbudget {:?}: {e}", budget.name)))?;
        let mut guarded = Vec::new();
        for (_, _, obj) in list(o, &pods_t, "pod").await? {
            let p = facts(&obj)?;
            if pdb::guards(&ns, &budget.spec, &p) {
                guarded.push(p);
            }
        }
        let now = deletion::now();
        let recorded = budget.status.disrupted_pods.clone().unwrap_or_default();
        let live = pdb::live_disruptions(&recorded, &guarded, now);
        let status = pdb::budget_status(arithmetic, &guarded, &live);
        let policy = pdb::UnhealthyPodEvictionPolicy::of(&budget.spec);
        let healthy = pod.healthy() && !live.contains_key(&name);
        match pdb::decide(healthy, &status, policy) {
            Verdict::Refused => return Err(refused(&budget.name, &status)),
            Verdict::AllowUnhealthy => {
                // Only the pod as judged: one that turned Ready meanwhile
                // is no longer free to go (409, and the client retries).
                let mut o2 = opts.clone();
                let pre = o2.preconditions.get_or_insert_with(Preconditions::default);
                pre.resource_version
                    .get_or_insert_with(|| current.mod_rev.to_string());
                return evict(o, &pod_target, &o2).await;
            }
            Verdict::Spend => {
                if spend(o, &pdbs_t, &budget, &status, live, &name, now).await? {
                    return evict(o, &pod_target, &opts).await;
                }
                // Another eviction changed the budget first: decide again.
            }
        }
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "Conflict",
        format!("Operation cannot be fulfilled on pods/eviction {name:?}: its PodDisruptionBudget kept changing; try again"),
    ))
}

/// Write the budget's status with one disruption spent on `pod`, against
/// the revision it was read at. `false`: it changed meanwhile.
async fn spend(
    o: &Objects,
    pdbs_t: &Target,
    budget: &StoredBudget,
    computed: &pdb::BudgetStatus,
    live: BTreeMap<String, sluice_model::k8s::Time>,
    pod: &str,
    now: Timestamp,
) -> Result<bool, ApiError> {
    let generation = budget
        .object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let status = pdb::spent_status(
        computed,
        live,
        pod,
        now,
        generation,
        budget.status.conditions.clone(),
    );
    let mut object = budget.object.clone();
    object["status"] = serde_json::to_value(&status)
        .map_err(|e| internal(format!("poddisruptionbudget status: {e}")))?;
    let bytes =
        serde_json::to_vec(&object).map_err(|e| internal(format!("poddisruptionbudget: {e}")))?;
    let named = Target {
        name: Some(budget.name.clone()),
        ..pdbs_t.clone()
    };
    match o.store.update(&budget.key, bytes, budget.mod_rev).await {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Ok(false),
        Err(e) => Err(store_error(&named, e)),
    }
}
