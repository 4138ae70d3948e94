//! `metadata.managedFields` read and written: one entry per manager,
//! operation (`Apply` or `Update`), subresource and, for updates, API
//! version, each with the fields it owns in `FieldsV1` form. Read back
//! the way kube-apiserver decodes them: an entry whose operation is
//! neither `Apply` nor `Update`, without `apiVersion`, with a `fieldsType`
//! other than `FieldsV1` or fields that do not parse makes the whole list
//! unreadable (the caller then falls back, never fails).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::fieldset::Set;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// What tells entries apart (kube-apiserver's manager identifier): an
/// applier's entry is the same whatever the version it applied with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerId {
    pub manager: String,
    pub operation: Operation,
    /// Empty for `Apply`.
    pub api_version: String,
    /// `status`, or empty for the main resource.
    pub subresource: String,
}

impl ManagerId {
    pub fn new(manager: &str, operation: Operation, api_version: &str, sub: &str) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_string(),
            },
            subresource: sub.to_string(),
        }
    }

    /// As a conflict names it: `"kubectl"`, `"x" with subresource
    /// "status"`, `"kubectl-create" using apps/v1` (kube-apiserver's
    /// `printManager`; the identifier carries no time).
    pub fn describe(&self) -> String {
        let mut s = Value::String(self.manager.clone()).to_string();
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                Value::String(self.subresource.clone())
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// One entry's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub api_version: String,
    /// RFC 3339, when the manager last changed the object.
    pub time: Option<String>,
    pub set: Set,
}

pub type Managed = BTreeMap<ManagerId, Entry>;

/// The entries of a `managedFields` value (absent or null: none).
pub fn decode(v: Option<&Value>) -> Result<Managed, String> {
    let mut out = Managed::new();
    let list = match v {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("managedFields: {other} is not a list")),
    };
    for (i, e) in list.iter().enumerate() {
        let at = |m: &str| format!("managedFields[{i}]: {m}");
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
        let operation = match s("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err(at("operation must be `Apply` or `Update`")),
        };
        if s("apiVersion").is_empty() {
            return Err(at("apiVersion must not be empty"));
        }
        match s("fieldsType") {
            "FieldsV1" => {}
            "" => return Err(at("missing fieldsType")),
            other => return Err(at(&format!("invalid fieldsType {other:?}"))),
        }
        let set = match e.get("fieldsV1") {
            None | Some(Value::Null) => Set::new(),
            Some(f) => Set::from_fields_v1(f).map_err(|m| at(&m))?,
        };
        let id = ManagerId::new(s("manager"), operation, s("apiVersion"), s("subresource"));
        let time = e.get("time").and_then(Value::as_str).map(String::from);
        out.insert(
            id,
            Entry {
                api_version: s("apiVersion").to_string(),
                time,
                set,
            },
        );
    }
    Ok(out)
}

/// Whether a written `managedFields` asks for them to be cleared: an
/// empty list, or a list of one empty entry (kube-apiserver's reset).
pub fn is_reset(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => {
            a.is_empty() || (a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
        }
        _ => false,
    }
}

/// The `managedFields` value, `None` when no manager owns anything. In
/// kube-apiserver's order: appliers first, then by time, manager, version
/// and subresource (times compare as text, which orders the server's own
/// `YYYY-MM-DDTHH:MM:SSZ` readings).
pub fn encode(m: &Managed) -> Option<Value> {
    let mut entries: Vec<(&ManagerId, &Entry)> =
        m.iter().filter(|(_, e)| !e.set.is_empty()).collect();
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|(a, ae), (b, be)| {
        (a.operation, ae.time.as_deref().unwrap_or(""), &a.manager)
            .cmp(&(b.operation, be.time.as_deref().unwrap_or(""), &b.manager))
            .then_with(|| ae.api_version.cmp(&be.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    let list = entries
        .into_iter()
        .map(|(id, e)| {
            let mut o = Map::new();
            if !id.manager.is_empty() {
                o.insert("manager".into(), json!(id.manager));
            }
            o.insert("operation".into(), json!(id.operation.as_str()));
            o.insert("apiVersion".into(), json!(e.api_version));
            if let Some(t) = &e.time {
                o.insert("time".into(), json!(t));
            }
            o.insert("fieldsType".into(), json!("FieldsV1"));
            o.insert("fieldsV1".into(), e.set.to_fields_v1());
            if !id.subresource.is_empty() {
                o.insert("subresource".into(), json!(id.subresource));
            }
            Value::Object(o)
        })
        .collect();
    Some(Value::Array(list))
}

/// kube-apiserver keeps at most this many `Update` entries.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest `Update` entries are merged into past the cap.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// Merge the oldest `Update` entries, per API version, into an
/// `ancient-changes` entry until at most `max` remain (kube-apiserver's
/// cap, so that writers with ever new names cannot grow an object
/// without bound).
pub fn cap_updates(m: &mut Managed, max: usize) {
    let mut updaters: Vec<ManagerId> = m
        .keys()
        .filter(|id| id.operation == Operation::Update)
        .cloned()
        .collect();
    if updaters.len() <= max {
        return;
    }
    let time = |id: &ManagerId| m.get(id).and_then(|e| e.time.clone()).unwrap_or_default();
    updaters.sort_by_key(|id| (time(id), id.clone()));
    let mut remaining = updaters.len();
    let mut first_of_version: BTreeMap<String, ManagerId> = BTreeMap::new();
    for id in updaters {
        if remaining <= max {
            break;
        }
        let Some(entry) = m.get(&id).cloned() else {
            continue;
        };
        let bucket = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &entry.api_version, "");
        let Some(first) = first_of_version.get(&entry.api_version).cloned() else {
            first_of_version.insert(entry.api_version.clone(), id);
            continue;
        };
        if id == bucket {
            continue;
        }
        if !m.contains_key(&bucket) {
            if let Some(f) = m.remove(&first) {
                m.insert(bucket.clone(), f);
            }
        }
        if let Some(b) = m.get_mut(&bucket) {
            b.set.union_with(&entry.set);
            b.time = entry.time;
        }
        m.remove(&id);
        remaining -= 1;
    }
}
