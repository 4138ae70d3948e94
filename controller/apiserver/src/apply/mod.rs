//! Server-side apply and field ownership, as kube-apiserver's field
//! manager does them over structured-merge-diff, without I/O.
//!
//! Every object tracks in `metadata.managedFields` which manager owns
//! which fields (`FieldsV1`, `fieldset.rs`; entries in `managed.rs`):
//!
//! - An apply (`apply`, `application/apply-patch+yaml`) merges the
//!   configuration into the live object (`merge.rs`; lists by the keys of
//!   `schema.rs`) and makes the applier own exactly the fields the
//!   configuration sets. Fields it owned by its previous apply and sets no
//!   more are removed from the object, unless another manager owns them
//!   too (an element of an associative list goes whole). A field whose
//!   value the apply changes and another manager owns is a conflict: 409,
//!   each conflict a `FieldManagerConflict` cause, unless `force=true`,
//!   which takes the field over. Setting a field to the value it has is no
//!   conflict: both then own it.
//! - Any other write (`record_update`: create, update, patch) makes its
//!   manager (`fieldManager=`, else the User-Agent's product, `kubectl`)
//!   own the fields it changed, in an `Update` entry, and takes them from
//!   the others; fields it removed leave every manager. An object that
//!   has no managedFields and is not being created stays untracked until
//!   its first apply, which hands its fields to `before-first-apply`.
//! - The main resource of a kind with a status subresource never owns
//!   `status`; the status subresource owns only `status`.
//! - As kube-apiserver, an apply by `kubectl` upgrades from client-side
//!   apply: a conflict on a field whose live value is the one the
//!   `last-applied-configuration` annotation holds is no conflict, and the
//!   annotation is kept up to date with the configuration applied.
//!
//! Departures from kube-apiserver: no schema beyond `schema.rs`'s table
//! (a map's entries are taken for struct fields); a create is compared
//! against the Go type's zero value for pods, Deployments and ReplicaSets
//! only (`zero`), so for the other kinds objects a create adds below
//! `spec` or `status` own themselves (`.` in `FieldsV1`) where
//! kube-apiserver's zero value already held them; live managedFields that do not decode are dropped rather than
//! failing the apply with a 500, and a configuration whose associative
//! lists cannot be told apart is a 422 rather than a 500.

pub mod fieldset;
pub mod managed;
pub mod merge;
pub mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::meta::api_version;
use super::path::Target;
use super::resources::RESOURCES;
use super::status::ApiError;
use fieldset::{canonical, path_string, Path, PathElement, Set};
use managed::{Entry, Managed, ManagerId, Operation};
use merge::{compare, field_set, remove};

/// The annotation client-side apply keeps its configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Who owns the fields of an object first applied to without managedFields.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// kube-apiserver's limit on a manager's name.
pub const MAX_MANAGER_LEN: usize = 128;

/// Who writes, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub manager: String,
    /// `force=true`: an apply takes conflicting fields over.
    pub force: bool,
    /// RFC 3339.
    pub now: String,
}

fn printable(c: char) -> bool {
    !c.is_control() && (c == ' ' || !c.is_whitespace())
}

/// The product name of a User-Agent (`kubectl/v1.37.1 (linux/amd64) ...`
/// → `kubectl`), printable characters only, at most 128 bytes: the
/// manager of a write that names none.
pub fn manager_from_user_agent(ua: &str) -> String {
    let mut out = String::new();
    for c in ua
        .split('/')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| printable(*c))
    {
        if out.len() + c.len_utf8() > MAX_MANAGER_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// The writer of a `create`, `update` or `patch` (`apply` for a
/// server-side apply) from its query and User-Agent, with
/// kube-apiserver's checks of the options: an apply must name its
/// manager, only an apply may `force`, a manager's name is at most 128
/// printable bytes.
pub fn writer(
    verb: &str,
    apply: bool,
    q: &HashMap<String, String>,
    user_agent: &str,
    now: String,
) -> Result<Writer, ApiError> {
    let options = match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        _ => "PatchOptions",
    };
    let sent = q.get("fieldManager").map_or("", String::as_str);
    let mut causes: Vec<(&str, &str, String)> = Vec::new();
    if apply && sent.is_empty() {
        causes.push((
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch".into(),
        ));
    }
    if !apply && verb == "patch" && q.contains_key("force") {
        causes.push((
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch".into(),
        ));
    }
    if sent.len() > MAX_MANAGER_LEN {
        causes.push((
            "fieldManager",
            "FieldValueTooLong",
            format!("Too long: may not be more than {MAX_MANAGER_LEN} bytes"),
        ));
    }
    if let Some((i, c)) = sent.char_indices().find(|(_, c)| !printable(*c)) {
        causes.push((
            "fieldManager",
            "FieldValueInvalid",
            format!(
                "Invalid value: {sent:?}: invalid character U+{:04X} (at position {i})",
                c as u32
            ),
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid_options(options, &causes));
    }
    let manager = if sent.is_empty() {
        manager_from_user_agent(user_agent)
    } else {
        sent.to_string()
    };
    // Go's strconv.ParseBool, as kube-apiserver decodes the parameter;
    // anything else is a 400, not a quiet "no".
    let force = match q.get("force").map(String::as_str) {
        None | Some("") => false,
        Some("true" | "True" | "TRUE" | "t" | "T" | "1") => true,
        Some("false" | "False" | "FALSE" | "f" | "F" | "0") => false,
        Some(other) => {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("force: {other:?} is not a boolean (true or false)"),
            ))
        }
    };
    Ok(Writer {
        manager,
        force,
        now,
    })
}

/// Which part of the object a request writes; fields outside it are
/// never owned by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource; `status_reset` for kinds with a status
    /// subresource, whose main resource leaves `status` alone.
    Main { status_reset: bool },
    /// The status subresource: `status` only.
    Status,
    /// The scale subresource of a Deployment or ReplicaSet: the parent's
    /// `spec.replicas` only (kube-apiserver's scale handler maps the
    /// Scale's `spec.replicas` to it).
    Scale,
}

impl Scope {
    pub fn of(t: &Target, status_only: bool) -> Scope {
        if status_only {
            return Scope::Status;
        }
        let status = format!("{}/status", t.resource.name);
        Scope::Main {
            status_reset: RESOURCES
                .iter()
                .any(|r| r.group == t.resource.group && r.name == status),
        }
    }

    fn subresource(self) -> &'static str {
        match self {
            Scope::Status => "status",
            Scope::Scale => "scale",
            Scope::Main { .. } => "",
        }
    }

    fn filter(self, s: &Set) -> Set {
        let status = PathElement::Field("status".into());
        match self {
            Scope::Main {
                status_reset: false,
            } => s.clone(),
            Scope::Main { status_reset: true } => {
                let mut ignored = Set::new();
                ignored.insert(&[status]);
                s.recursive_difference(&ignored)
            }
            Scope::Status => s.only(&status),
            Scope::Scale => {
                let mut replicas = Set::new();
                replicas.insert(&[
                    PathElement::Field("spec".into()),
                    PathElement::Field("replicas".into()),
                ]);
                s.intersection(&replicas)
            }
        }
    }
}

/// One write, as the field manager sees it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub kind: &'static str,
    pub api_version: String,
    /// The name and namespace on the URL.
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub scope: Scope,
    pub writer: &'a Writer,
}

impl<'a> Request<'a> {
    pub fn new(t: &'a Target, status_only: bool, writer: &'a Writer) -> Request<'a> {
        Request {
            kind: t.resource.kind,
            api_version: api_version(t),
            name: t.name.as_deref().unwrap_or_default(),
            namespace: t.namespace.as_deref(),
            scope: Scope::of(t, status_only),
            writer,
        }
    }

    /// A write of the parent `t` through its scale subresource.
    pub fn scale(t: &'a Target, writer: &'a Writer) -> Request<'a> {
        Request {
            scope: Scope::Scale,
            ..Request::new(t, false, writer)
        }
    }

    fn id(&self, manager: &str, operation: Operation) -> ManagerId {
        ManagerId::new(
            manager,
            operation,
            &self.api_version,
            self.scope.subresource(),
        )
    }

    fn entry(&self, time: Option<String>, set: Set) -> Entry {
        Entry {
            api_version: self.api_version.clone(),
            time,
            set,
        }
    }
}

/// The fields no manager ever owns: the object's identity and what the
/// server keeps (kube-apiserver's strip set); never removed by an apply.
fn server_owned() -> Set {
    let mut s = Set::new();
    let f = |n: &str| PathElement::Field(n.to_string());
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("managedFields")
}

fn set_managed_fields(obj: &mut Value, m: &Managed) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match managed::encode(m) {
        Some(v) => {
            meta.insert("managedFields".into(), v);
        }
        None => {
            meta.remove("managedFields");
        }
    }
}

/// What a create is compared against: the object before it existed, as
/// kube-apiserver's Go zero value serializes (its structs are there,
/// empty, so a create owns what it puts in them but not the structs
/// themselves); `{metadata, spec, status}` for kinds not spelled out.
fn zero(kind: &str) -> Value {
    let pod_template = json!({"metadata": {}, "spec": {"containers": null}});
    match kind {
        "Pod" => json!({"metadata": {}, "spec": {"containers": null}, "status": {}}),
        "Deployment" => json!({"metadata": {}, "spec": {"selector": null,
            "template": pod_template, "strategy": {}}, "status": {}}),
        "ReplicaSet" => json!({"metadata": {}, "spec": {"selector": null,
            "template": pod_template}, "status": {}}),
        _ => json!({"metadata": {}, "spec": {}, "status": {}}),
    }
}

/// Record a write other than an apply: `new` (as it will be stored,
/// defaults filled in) replaces `live` (`None` for a create). `new`'s own
/// managedFields are taken if they decode (how clients edit them; `[]` or
/// `[{}]` clears them), else the live ones, as kube-apiserver does; the
/// status subresource always takes the live ones. Never fails: bookkeeping
/// that cannot be done leaves the entries as they were.
pub fn record_update(req: &Request, live: Option<&Value>, new: &mut Value) {
    let live_managed = || {
        live.and_then(|l| managed::decode(managed_fields(l)).ok())
            .unwrap_or_default()
    };
    let sent = managed_fields(new);
    let managed = if matches!(req.scope, Scope::Status | Scope::Scale) {
        live_managed()
    } else if managed::is_reset(sent) {
        Managed::new()
    } else {
        match managed::decode(sent) {
            Ok(m) if !m.is_empty() => m,
            _ => live_managed(),
        }
    };
    if managed.is_empty() && live.is_some() {
        // Untracked until the first apply.
        set_managed_fields(new, &managed);
        return;
    }
    let zero = zero(req.kind);
    let old = live.unwrap_or(&zero);
    let updated = updated_managed(req, old, new, managed.clone()).unwrap_or(managed);
    set_managed_fields(new, &updated);
}

/// The entries after `old` became `new` by `manager`'s `Update`; `None`
/// if the objects cannot be compared.
fn updated_managed(req: &Request, old: &Value, new: &Value, managed: Managed) -> Option<Managed> {
    let cmp = compare(req.kind, old, new)
        .ok()?
        .map(|s| req.scope.filter(s));
    let mut managed = managed;
    let changed = cmp.changed();
    for e in managed.values_mut() {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let current = changed.difference(&server_owned());
    if !current.is_empty() {
        let e = managed
            .entry(req.id(&req.writer.manager, Operation::Update))
            .or_insert_with(|| req.entry(None, Set::new()));
        e.set.union_with(&current);
        e.time = Some(req.writer.now.clone());
    }
    managed.retain(|_, e| !e.set.is_empty());
    managed::cap_updates(&mut managed, managed::MAX_UPDATE_MANAGERS);
    Some(managed)
}

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    pub manager: ManagerId,
    pub path: Path,
}

/// Why an apply did not go through.
#[derive(Debug)]
enum Failure {
    Conflicts(Vec<Conflict>),
    Refused(ApiError),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::Refused(e)
    }
}

fn bad_request(m: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", m)
}

fn invalid(req: &Request, m: String) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("{} {:?} is invalid: {m}", req.kind, req.name),
    );
    e.details = Some(json!({"name": req.name, "kind": req.kind, "causes": [
        {"reason": "FieldValueInvalid", "message": m, "field": "<body>"}]}));
    e
}

/// kube-apiserver's 409 for apply conflicts: one cause per field, the
/// message grouped by manager.
pub fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let mut sorted = conflicts.to_vec();
    sorted.sort();
    let causes: Vec<Value> = sorted
        .iter()
        .map(|c| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", c.manager.describe()),
                "field": path_string(&c.path),
            })
        })
        .collect();
    let message = match sorted.as_slice() {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager.describe(),
            path_string(&one.path)
        ),
        many => {
            let mut lines = Vec::new();
            let mut last: Option<&ManagerId> = None;
            for c in many {
                if last != Some(&c.manager) {
                    lines.push(format!("conflicts with {}:", c.manager.describe()));
                    last = Some(&c.manager);
                }
                lines.push(format!("- {}", path_string(&c.path)));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                many.len(),
                lines.join("\n")
            )
        }
    };
    let mut e = ApiError::new(StatusCode::CONFLICT, "Conflict", message);
    e.details = Some(json!({ "causes": causes }));
    e
}

/// The group/version/kind a configuration names, as kube-apiserver prints
/// one (`apps/v1, Kind=Deployment`, `/v1, Kind=Pod`).
fn gvk_of(config: &Value) -> String {
    let s = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    let (group, version) = s("apiVersion")
        .rsplit_once('/')
        .unwrap_or(("", s("apiVersion")));
    format!("{group}/{version}, Kind={}", s("kind"))
}

/// A server-side apply of `config` to `live` (`None`: the apply creates
/// the object): the object to write, managedFields included, before the
/// update's checks and defaults. 400 for a configuration of another kind
/// or version, with managedFields, or naming another object; 422 for one
/// whose associative lists cannot be told apart; 409 for conflicts.
pub fn apply(req: &Request, live: Option<&Value>, config: &Value) -> Result<Value, ApiError> {
    if !config.is_object() {
        return Err(bad_request(format!(
            "the applied configuration must be a {} object",
            req.kind
        )));
    }
    let s = |k: &str| config.get(k).and_then(Value::as_str);
    if s("apiVersion") != Some(req.api_version.as_str()) || s("kind") != Some(req.kind) {
        return Err(bad_request(format!(
            "invalid object type: {}",
            gvk_of(config)
        )));
    }
    if managed_fields(config).is_some_and(|m| !m.is_null()) {
        return Err(bad_request("metadata.managedFields must be nil".into()));
    }
    let meta = |k: &str| {
        config
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
    };
    if let (Some(ns), Some(want)) = (meta("namespace"), req.namespace) {
        if !ns.is_empty() && ns != want {
            return Err(bad_request(format!(
                "the namespace of the object ({ns}) does not match the namespace on the URL ({want})"
            )));
        }
    }
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    let mut managed = managed::decode(managed_fields(live_obj)).unwrap_or_default();
    if managed.is_empty() && live.is_some() {
        before_first_apply(req, live_obj, &mut managed);
    }
    let force = req.writer.force;
    let (mut obj, managed) = match apply_once(req, live_obj, config, managed.clone(), force) {
        Ok(done) => done,
        Err(Failure::Refused(e)) => return Err(e),
        Err(Failure::Conflicts(conflicts)) => {
            let allowed = match req.writer.manager.as_str() {
                "kubectl" => allowed_by_last_applied(req, live_obj),
                _ => None,
            };
            let remaining: Vec<Conflict> = conflicts
                .into_iter()
                .filter(|c| !allowed.as_ref().is_some_and(|a| a.has(&c.path)))
                .collect();
            if !remaining.is_empty() {
                return Err(conflict_error(&remaining));
            }
            match apply_once(req, live_obj, config, managed, true) {
                Ok(done) => done,
                Err(Failure::Refused(e)) => return Err(e),
                Err(Failure::Conflicts(c)) => return Err(conflict_error(&c)),
            }
        }
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != req.name {
        return Err(bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            req.name
        )));
    }
    if req.writer.manager == "kubectl" {
        update_last_applied(&mut obj, config);
    }
    set_managed_fields(&mut obj, &managed);
    Ok(obj)
}

/// kube-apiserver's `before-first-apply`: the fields of an object that
/// was never tracked belong to someone, so an apply that changes them
/// conflicts.
fn before_first_apply(req: &Request, live: &Value, managed: &mut Managed) {
    let Ok(cmp) = compare(req.kind, &zero(req.kind), live) else {
        return;
    };
    let set = req.scope.filter(&cmp.changed()).difference(&server_owned());
    if !set.is_empty() {
        managed.insert(
            req.id(BEFORE_FIRST_APPLY, Operation::Update),
            req.entry(Some(req.writer.now.clone()), set),
        );
    }
}

/// One attempt at an apply: merged, pruned, ownership moved; conflicts
/// when `force` is off.
fn apply_once(
    req: &Request,
    live: &Value,
    config: &Value,
    mut managed: Managed,
    force: bool,
) -> Result<(Value, Managed), Failure> {
    let set = req
        .scope
        .filter(&field_set(req.kind, config).map_err(|m| invalid(req, m))?);
    let merged = merge::merge(req.kind, live, config).map_err(|m| invalid(req, m))?;
    let id = req.id(&req.writer.manager, Operation::Apply);
    let last = managed.get(&id).map(|e| e.set.clone()).unwrap_or_default();
    let time = managed.get(&id).and_then(|e| e.time.clone());
    managed.insert(id.clone(), req.entry(time, set));
    let merged = if last.is_empty() {
        merged
    } else {
        // What the applier owned, applies no more and nobody else owns
        // goes (structured-merge-diff's prune).
        let mut owned = Set::new();
        for e in managed.values() {
            owned.union_with(&e.set);
        }
        let gone = last
            .with_named_fields()
            .difference(&owned.with_named_fields())
            .difference(&server_owned());
        remove(req.kind, &merged, &gone)
    };
    let raw = compare(req.kind, live, &merged).map_err(|m| invalid(req, m))?;
    let cmp = raw.map(|s| req.scope.filter(s));
    let changed = cmp.changed();
    let conflicts: Vec<Conflict> = managed
        .iter()
        .filter(|(other, _)| **other != id)
        .flat_map(|(other, e)| {
            e.set
                .intersection(&changed)
                .paths()
                .into_iter()
                .map(|path| Conflict {
                    manager: other.clone(),
                    path,
                })
        })
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(Failure::Conflicts(conflicts));
    }
    for (other, e) in managed.iter_mut() {
        if *other != id {
            e.set = e.set.difference(&changed).difference(&cmp.removed);
        }
    }
    if let Some(e) = managed.get_mut(&id) {
        e.set = e.set.difference(&server_owned());
        if !raw.is_empty() {
            e.time = Some(req.writer.now.clone());
        }
    }
    managed.retain(|_, e| !e.set.is_empty());
    Ok((merged, managed))
}

/// The fields of the `last-applied-configuration` annotation whose live
/// values are the annotation's: client-side apply's, for kubectl's
/// server-side apply to take over without conflicts.
fn allowed_by_last_applied(req: &Request, live: &Value) -> Option<Set> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion")?.as_str()? != req.api_version {
        return None;
    }
    let set = field_set(req.kind, &last).ok()?;
    let cmp = compare(req.kind, &last, live).ok()?;
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// kubectl's server-side apply keeps an existing `last-applied-
/// configuration` annotation at the configuration applied (without the
/// annotation), so a later client-side apply computes from it.
fn update_last_applied(obj: &mut Value, config: &Value) {
    let has = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !has {
        return;
    }
    let mut last = config.clone();
    if let Some(a) = last
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    let text = format!("{}\n", canonical(&last));
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.insert(LAST_APPLIED.into(), Value::String(text));
    }
}
