//! Strategic merge patch (`application/strategic-merge-patch+json`), what
//! client-side `kubectl apply`, `kubectl patch` and `kubectl edit` send
//! for built-in kinds. Like a JSON merge patch, except:
//!
//! - lists the API types mark for merging are merged element by element
//!   by their merge key (`containers` by `name`, `ports` by
//!   `containerPort`, `conditions` by `type`; `keys.rs`), or as a set
//!   for scalar lists (`finalizers`); other lists are replaced whole;
//! - directives: `$patch: replace | delete | merge` on a map or a list
//!   element, `$setElementOrder/<list>` (the order kubectl wants a merged
//!   list in), `$deleteFromPrimitiveList/<list>`, `$retainKeys` (the keys
//!   a map keeps). No directive ever reaches the stored object.
//!
//! Pure; a malformed directive or a list element without its merge key is
//! an error naming where, and the caller then changes nothing.

pub mod keys;

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use keys::{strategy, ListStrategy};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Apply `patch` to `target`, an object of `kind`.
pub fn apply(kind: &str, target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(p) = patch else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    if let Some(t) = target.as_object_mut() {
        if merge_map(kind, &mut path, t, p)? == MapOutcome::Delete {
            return Err("$patch: delete cannot delete the whole object".into());
        }
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum MapOutcome {
    Keep,
    Delete,
}

fn at(path: &[String]) -> String {
    if path.is_empty() {
        "the object".into()
    } else {
        path.join(".")
    }
}

fn directive<'a>(m: &'a Map<String, Value>, path: &[String]) -> Result<Option<&'a str>, String> {
    match m.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s))
        }
        Some(other) => Err(format!(
            "{}: $patch: {other} is not one of replace, delete, merge",
            at(path)
        )),
    }
}

/// A patch value as it is stored when nothing is merged into: directives
/// removed, elements marked for deletion dropped.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(strip_list(a)),
        other => other.clone(),
    }
}

/// `{"$patch": "replace"}` alone in a list: the list is replaced by the
/// patch's other elements.
fn is_list_replace(e: &Value) -> bool {
    e.as_object()
        .is_some_and(|m| m.len() == 1 && m.get(PATCH) == Some(&Value::from("replace")))
}

/// A patch list as stored: markers and elements marked for deletion
/// dropped, directives removed.
fn strip_list(a: &[Value]) -> Vec<Value> {
    a.iter()
        .filter(|e| !is_list_replace(e) && e.get(PATCH) != Some(&Value::from("delete")))
        .map(strip)
        .collect()
}

fn strings(v: &Value, what: &str, path: &[String]) -> Result<Vec<Value>, String> {
    v.as_array()
        .cloned()
        .ok_or_else(|| format!("{}: {what} must be a list", at(path)))
}

fn merge_map(
    kind: &str,
    path: &mut Vec<String>,
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<MapOutcome, String> {
    match directive(patch, path)? {
        Some("delete") => return Ok(MapOutcome::Delete),
        Some("replace") => {
            if let Value::Object(m) = strip(&Value::Object(patch.clone())) {
                *target = m;
            }
            return Ok(MapOutcome::Keep);
        }
        _ => {}
    }
    if let Some(keep) = patch.get(RETAIN_KEYS) {
        let keep = strings(keep, RETAIN_KEYS, path)?;
        let keep: HashSet<&str> = keep.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(k.as_str()));
    }
    let mut orders: Vec<(&str, &Value)> = Vec::new();
    for (k, v) in patch {
        if k == PATCH || k == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            orders.push((field, v));
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_FROM) {
            let gone: HashSet<String> = strings(v, k, path)?.iter().map(Value::to_string).collect();
            if let Some(Value::Array(list)) = target.get_mut(field) {
                list.retain(|e| !gone.contains(&e.to_string()));
            }
            continue;
        }
        if k.starts_with('$') {
            return Err(format!("{}: unknown patch directive {k:?}", at(path)));
        }
        if v.is_null() {
            target.remove(k);
            continue;
        }
        path.push(k.clone());
        let result = merge_field(kind, path, target, k, v);
        path.pop();
        result?;
    }
    for (field, order) in orders {
        path.push(field.to_string());
        let order = strings(order, "$setElementOrder", path)?;
        if let Some(Value::Array(list)) = target.get_mut(field) {
            reorder(kind, path, list, &order);
        }
        path.pop();
    }
    Ok(MapOutcome::Keep)
}

fn merge_field(
    kind: &str,
    path: &mut Vec<String>,
    target: &mut Map<String, Value>,
    k: &str,
    v: &Value,
) -> Result<(), String> {
    match (target.get_mut(k), v) {
        (Some(Value::Object(t)), Value::Object(p)) => {
            if merge_map(kind, path, t, p)? == MapOutcome::Delete {
                target.remove(k);
            }
        }
        (Some(Value::Array(t)), Value::Array(p)) => merge_list(kind, path, t, p)?,
        (_, Value::Object(p)) if directive(p, path)? == Some("delete") => {
            target.remove(k);
        }
        (_, v) => {
            target.insert(k.to_string(), strip(v));
        }
    }
    Ok(())
}

fn merge_list(
    kind: &str,
    path: &mut Vec<String>,
    target: &mut Vec<Value>,
    patch: &[Value],
) -> Result<(), String> {
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    let replace_all = patch.iter().any(is_list_replace);
    match strategy(kind, &names) {
        ListStrategy::Replace => *target = strip_list(patch),
        _ if replace_all => *target = strip_list(patch),
        ListStrategy::MergeScalars => {
            // Sets by their JSON text: linear in both lists, however long
            // a hostile patch makes them.
            let mut have: HashSet<String> = target.iter().map(Value::to_string).collect();
            for e in patch {
                if e.is_object() || e.is_array() {
                    return Err(format!("{}: a list of values, not of objects", at(path)));
                }
                if have.insert(e.to_string()) {
                    target.push(e.clone());
                }
            }
        }
        ListStrategy::MergeBy(key) => {
            let mut slots: Vec<Option<Value>> = target.drain(..).map(Some).collect();
            let mut index: HashMap<String, usize> = HashMap::new();
            for (i, t) in slots.iter().enumerate() {
                if let Some(id) = t.as_ref().and_then(|t| t.get(key)) {
                    index.entry(id.to_string()).or_insert(i);
                }
            }
            let result = merge_by_key(kind, path, key, &mut slots, &mut index, patch);
            // Whatever happened, the list is put back (the caller discards
            // the object on error).
            target.extend(slots.into_iter().flatten());
            result?;
        }
    }
    Ok(())
}

/// Merge `patch`'s elements into `slots` by `key` (`index`: key text →
/// slot; a deleted element leaves an empty slot so the index stays true).
fn merge_by_key(
    kind: &str,
    path: &mut Vec<String>,
    key: &str,
    slots: &mut Vec<Option<Value>>,
    index: &mut HashMap<String, usize>,
    patch: &[Value],
) -> Result<(), String> {
    for e in patch {
        let Value::Object(pm) = e else {
            return Err(format!("{}: elements must be objects", at(path)));
        };
        let id = pm
            .get(key)
            .ok_or_else(|| format!("{}: an element has no merge key {key:?}", at(path)))?
            .to_string();
        let found = index.get(&id).copied();
        match (directive(pm, path)?, found) {
            (Some("delete"), Some(i)) => {
                slots[i] = None;
                index.remove(&id);
            }
            (Some("delete"), None) => {}
            (Some("replace"), Some(i)) => slots[i] = Some(strip(e)),
            (_, Some(i)) => match slots[i].as_mut().and_then(Value::as_object_mut) {
                Some(t) => {
                    merge_map(kind, path, t, pm)?;
                }
                None => slots[i] = Some(strip(e)),
            },
            (_, None) => {
                index.insert(id, slots.len());
                slots.push(Some(strip(e)));
            }
        }
    }
    Ok(())
}

/// Put `list` in the order `$setElementOrder` gives (merge-key values or
/// `{key: value}` maps); elements it does not name (added by someone
/// else) keep their order after those it names.
fn reorder(kind: &str, path: &[String], list: &mut [Value], order: &[Value]) {
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    let key_of = |v: &Value| -> Value {
        match strategy(kind, &names) {
            ListStrategy::MergeBy(k) => v.get(k).cloned().unwrap_or(Value::Null),
            _ => v.clone(),
        }
    };
    let mut wanted: HashMap<String, usize> = HashMap::new();
    for (i, o) in order.iter().enumerate() {
        wanted.entry(key_of(o).to_string()).or_insert(i);
    }
    list.sort_by_cached_key(|e| {
        wanted
            .get(&key_of(e).to_string())
            .copied()
            .unwrap_or(usize::MAX)
    });
}

#[cfg(test)]
mod tests;
