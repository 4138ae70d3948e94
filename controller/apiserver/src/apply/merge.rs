//! Server-side apply's walks over JSON objects, pure, as
//! structured-merge-diff does them on typed values:
//!
//! - `field_set`: the fields a configuration sets (scalars, empty or null
//!   values, atomic lists and maps, each element of an associative or set
//!   list with the element itself);
//! - `merge`: a configuration merged into the live object (objects field
//!   by field, associative and set lists element by element in an order
//!   that keeps both sides' orders, anything else replaced);
//! - `compare`: the fields added, modified and removed between two
//!   objects (an object or list that appears or goes counts itself too);
//! - `remove`: an object without the fields of a set (an element of an
//!   associative list goes whole).
//!
//! Every walk follows the object, whose nesting the decoder bounded, and
//! checks it against `meta::MAX_DEPTH` anyway.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{canonical, path_string, Path, PathElement, Set};
use super::schema::{atomic_map, key_default, list_type, skipped, ListType};
use crate::meta::MAX_DEPTH;

/// Where a walk is: the path from the root, and the field names the
/// schema is asked about (list elements add a path element, no name).
struct At<'a> {
    kind: &'a str,
    path: Path,
    names: Vec<&'a str>,
}

impl<'a> At<'a> {
    fn new(kind: &'a str) -> At<'a> {
        At {
            kind,
            path: Vec::new(),
            names: Vec::new(),
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.path.len() >= MAX_DEPTH {
            return Err(format!(
                "{}: the object nests more than {MAX_DEPTH} levels",
                path_string(&self.path)
            ));
        }
        Ok(())
    }

    fn enter_field(&mut self, k: &'a str) -> Result<(), String> {
        self.check()?;
        self.path.push(PathElement::Field(k.to_string()));
        self.names.push(k);
        Ok(())
    }

    fn leave_field(&mut self) {
        self.path.pop();
        self.names.pop();
    }

    fn enter_item(&mut self, pe: PathElement) -> Result<(), String> {
        self.check()?;
        self.path.push(pe);
        Ok(())
    }

    fn leave_item(&mut self) {
        self.path.pop();
    }

    fn list_type(&self) -> ListType {
        list_type(self.kind, &self.names)
    }

    fn atomic_map(&self) -> bool {
        atomic_map(self.kind, &self.names)
    }

    fn here(&self) -> String {
        path_string(&self.path)
    }
}

/// The path element of a list's element (lists that are not atomic).
fn item_element(lt: &ListType, item: &Value) -> Result<PathElement, String> {
    match lt {
        ListType::Map(keys) => {
            let Value::Object(m) = item else {
                return Err("an element of an associative list must be an object".into());
            };
            let mut key = Map::new();
            for k in keys {
                let v = m
                    .get(*k)
                    .filter(|v| !v.is_null())
                    .cloned()
                    .or_else(|| key_default(k))
                    .ok_or_else(|| format!("an element omits the key field {k:?}"))?;
                key.insert((*k).to_string(), v);
            }
            Ok(PathElement::Key(canonical(&Value::Object(key))))
        }
        ListType::Set | ListType::Atomic => Ok(PathElement::Value(canonical(item))),
    }
}

/// The fields `config` sets (structured-merge-diff's `ToFieldSet`). An
/// element without its key fields, or two elements with one key, are
/// refused with the list's path: a configuration must name each element
/// once.
pub fn field_set(kind: &str, config: &Value) -> Result<Set, String> {
    let mut set = Set::new();
    if let Value::Object(m) = config {
        fields_of_map(&mut At::new(kind), m, &mut set)?;
    }
    Ok(set)
}

fn fields_of_map<'a>(
    at: &mut At<'a>,
    m: &'a Map<String, Value>,
    set: &mut Set,
) -> Result<(), String> {
    for (k, v) in m {
        if skipped(&at.names, k) {
            continue;
        }
        at.enter_field(k)?;
        match v {
            Value::Object(cm) if !cm.is_empty() && !at.atomic_map() => fields_of_map(at, cm, set)?,
            Value::Array(a) => fields_of_list(at, a, set)?,
            _ => set.insert(&at.path),
        }
        at.leave_field();
    }
    Ok(())
}

fn fields_of_list<'a>(at: &mut At<'a>, a: &'a [Value], set: &mut Set) -> Result<(), String> {
    let lt = at.list_type();
    if lt == ListType::Atomic {
        set.insert(&at.path);
        return Ok(());
    }
    let mut seen = HashSet::new();
    for (i, item) in a.iter().enumerate() {
        let pe = item_element(&lt, item).map_err(|e| format!("{}: element {i}: {e}", at.here()))?;
        if !seen.insert(pe.clone()) {
            return Err(format!("{}: duplicate entries for key {pe}", at.here()));
        }
        at.enter_item(pe)?;
        if let Value::Object(m) = item {
            fields_of_map(at, m, set)?;
        }
        set.insert(&at.path);
        at.leave_item();
    }
    Ok(())
}

/// What changed from `lhs` to `rhs`; no path is in two of the sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// The fields whose values the change set: added or modified.
    pub fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }

    /// Each of the three sets passed through `f`.
    pub fn map(&self, f: impl Fn(&Set) -> Set) -> Comparison {
        Comparison {
            added: f(&self.added),
            modified: f(&self.modified),
            removed: f(&self.removed),
        }
    }
}

/// The fields added, modified and removed from `lhs` to `rhs`
/// (structured-merge-diff's `Compare`). Elements of an associative list
/// without their keys cannot be told apart and are passed over.
pub fn compare(kind: &str, lhs: &Value, rhs: &Value) -> Result<Comparison, String> {
    let mut c = Comparison::default();
    compare_value(&mut At::new(kind), Some(lhs), Some(rhs), &mut c)?;
    Ok(c)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Map,
    List,
    Leaf,
}

/// What a value is walked as (`None` for none or null, which take the
/// other side's shape).
fn shape(v: Option<&Value>) -> Option<Shape> {
    match v? {
        Value::Null => None,
        Value::Object(_) => Some(Shape::Map),
        Value::Array(_) => Some(Shape::List),
        _ => Some(Shape::Leaf),
    }
}

fn walked_as(lhs: Option<&Value>, rhs: Option<&Value>) -> Shape {
    match (shape(lhs), shape(rhs)) {
        (Some(a), Some(b)) if a != b => Shape::Leaf,
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => Shape::Leaf,
    }
}

fn leaf(at: &At, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(&at.path),
        (Some(_), None) => c.removed.insert(&at.path),
        (Some(l), Some(r)) if l != r => c.modified.insert(&at.path),
        _ => {}
    }
}

fn compare_value<'a>(
    at: &mut At<'a>,
    lhs: Option<&'a Value>,
    rhs: Option<&'a Value>,
    c: &mut Comparison,
) -> Result<(), String> {
    match walked_as(lhs, rhs) {
        Shape::Map => {
            let (lm, rm) = (
                lhs.and_then(Value::as_object),
                rhs.and_then(Value::as_object),
            );
            let empty = |m: Option<&Map<String, Value>>| m.is_none_or(Map::is_empty);
            if at.atomic_map() || (empty(lm) && empty(rm)) {
                leaf(at, lhs, rhs, c);
                return Ok(());
            }
            for (k, lv) in lm.into_iter().flatten() {
                if !skipped(&at.names, k) {
                    at.enter_field(k)?;
                    compare_value(at, Some(lv), rm.and_then(|m| m.get(k)), c)?;
                    at.leave_field();
                }
            }
            for (k, rv) in rm.into_iter().flatten() {
                if !skipped(&at.names, k) && !lm.is_some_and(|m| m.contains_key(k)) {
                    at.enter_field(k)?;
                    compare_value(at, None, Some(rv), c)?;
                    at.leave_field();
                }
            }
        }
        Shape::List => {
            let (la, ra) = (lhs.and_then(Value::as_array), rhs.and_then(Value::as_array));
            let lt = at.list_type();
            let empty = |a: Option<&Vec<Value>>| a.is_none_or(Vec::is_empty);
            if lt == ListType::Atomic || (empty(la) && empty(ra)) {
                leaf(at, lhs, rhs, c);
                return Ok(());
            }
            compare_items(
                at,
                &lt,
                la.map_or(&[], Vec::as_slice),
                ra.map_or(&[], Vec::as_slice),
                c,
            )?;
        }
        Shape::Leaf => {
            leaf(at, lhs, rhs, c);
            return Ok(());
        }
    }
    // An object or list that appears or goes counts itself.
    if !at.path.is_empty() {
        match (lhs, rhs) {
            (None, Some(_)) => c.added.insert(&at.path),
            (Some(_), None) => c.removed.insert(&at.path),
            _ => {}
        }
    }
    Ok(())
}

/// A list's elements by path element, in first-seen order, with every
/// element of each (several: duplicates in a live object).
type Indexed<'a> = (Vec<PathElement>, HashMap<PathElement, Vec<&'a Value>>);

fn index_items<'a>(lt: &ListType, a: &'a [Value]) -> Indexed<'a> {
    let mut order = Vec::new();
    let mut by: HashMap<PathElement, Vec<&Value>> = HashMap::new();
    for item in a {
        if let Ok(pe) = item_element(lt, item) {
            let e = by.entry(pe.clone()).or_default();
            if e.is_empty() {
                order.push(pe);
            }
            e.push(item);
        }
    }
    (order, by)
}

fn compare_items<'a>(
    at: &mut At<'a>,
    lt: &ListType,
    la: &'a [Value],
    ra: &'a [Value],
    c: &mut Comparison,
) -> Result<(), String> {
    let (lorder, lby) = index_items(lt, la);
    let (rorder, rby) = index_items(lt, ra);
    let rest = rorder.iter().filter(|pe| !lby.contains_key(*pe));
    for pe in lorder.iter().chain(rest) {
        let l = lby.get(pe).map_or(&[][..], Vec::as_slice);
        let r = rby.get(pe).map_or(&[][..], Vec::as_slice);
        at.enter_item(pe.clone())?;
        match (l.len(), r.len()) {
            (0..=1, 0..=1) => compare_value(at, l.first().copied(), r.first().copied(), c)?,
            // Duplicates on both sides are compared as one value.
            (2.., 2..) => {
                if l != r {
                    c.modified.insert(&at.path)
                }
            }
            (2.., _) => {
                if let Some(r0) = r.first() {
                    compare_value(at, None, Some(r0), c)?;
                }
                c.removed.insert(&at.path);
            }
            (_, _) => {
                if let Some(l0) = l.first() {
                    compare_value(at, Some(l0), None, c)?;
                }
                c.added.insert(&at.path);
            }
        }
        at.leave_item();
    }
    Ok(())
}

/// `config` merged into `live` (structured-merge-diff's `Merge`): objects
/// field by field, associative and set lists element by element, anything
/// else (scalars, atomic lists and maps) taken from `config`. A field the
/// configuration sets to null is left out, as decoding into the API type
/// would drop it.
pub fn merge(kind: &str, live: &Value, config: &Value) -> Result<Value, String> {
    Ok(merge_value(&mut At::new(kind), Some(live), Some(config))?.unwrap_or(Value::Null))
}

fn merge_value<'a>(
    at: &mut At<'a>,
    lhs: Option<&'a Value>,
    rhs: Option<&'a Value>,
) -> Result<Option<Value>, String> {
    let Some(r) = rhs else {
        return Ok(lhs.cloned());
    };
    match r {
        Value::Null => Ok(None),
        Value::Object(rm) if !at.atomic_map() => {
            let lm = lhs.and_then(Value::as_object);
            if rm.is_empty() && lm.is_none_or(Map::is_empty) {
                return Ok(Some(r.clone()));
            }
            let mut out = Map::new();
            for (k, lv) in lm.into_iter().flatten() {
                at.enter_field(k)?;
                if let Some(v) = merge_value(at, Some(lv), rm.get(k))? {
                    out.insert(k.clone(), v);
                }
                at.leave_field();
            }
            for (k, rv) in rm {
                if !lm.is_some_and(|m| m.contains_key(k)) {
                    at.enter_field(k)?;
                    if let Some(v) = merge_value(at, None, Some(rv))? {
                        out.insert(k.clone(), v);
                    }
                    at.leave_field();
                }
            }
            Ok(Some(Value::Object(out)))
        }
        Value::Array(ra) => {
            let lt = at.list_type();
            let la = lhs.and_then(Value::as_array);
            if lt == ListType::Atomic || (ra.is_empty() && la.is_none_or(Vec::is_empty)) {
                return Ok(Some(r.clone()));
            }
            merge_items(at, &lt, la.map_or(&[], Vec::as_slice), ra).map(Some)
        }
        _ => Ok(Some(r.clone())),
    }
}

/// Two lists merged by element: the configuration's elements in its
/// order, each merged with the live element of its key; live elements the
/// configuration does not name stay where they were relative to the
/// shared ones. A live key held by several elements is replaced by the
/// configuration's one element.
fn merge_items<'a>(
    at: &mut At<'a>,
    lt: &ListType,
    la: &'a [Value],
    ra: &'a [Value],
) -> Result<Value, String> {
    let rpes = ra
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item_element(lt, item).map_err(|e| format!("{}: element {i}: {e}", at.here()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let in_rhs: HashSet<&PathElement> = rpes.iter().collect();
    let lpes: Vec<Option<PathElement>> = la.iter().map(|i| item_element(lt, i).ok()).collect();
    let mut lfirst: HashMap<&PathElement, usize> = HashMap::new();
    let mut ldup: HashSet<&PathElement> = HashSet::new();
    for (i, pe) in lpes.iter().enumerate() {
        if let Some(pe) = pe {
            if lfirst.insert(pe, i).is_some() {
                ldup.insert(pe);
            }
        }
    }
    let live_of = |pe: &PathElement| match ldup.contains(pe) {
        true => None,
        false => lfirst.get(pe).map(|&i| &la[i]),
    };
    // The elements both sides hold, in the configuration's order: a live
    // one waits for its turn there.
    let shared: Vec<&PathElement> = rpes.iter().filter(|pe| lfirst.contains_key(pe)).collect();
    let mut next = 0;
    let mut done: HashSet<&PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(la.len().max(ra.len()));
    let (mut li, mut ri) = (0, 0);
    while li < la.len() || ri < ra.len() {
        let before = (li, ri);
        if li < la.len() {
            match lpes[li].as_ref() {
                Some(pe) if ri < ra.len() && rpes[ri] == *pe => li += 1,
                Some(pe) if in_rhs.contains(pe) => {
                    if shared.get(next).is_some_and(|n| *n != pe) {
                        li += 1;
                        continue;
                    }
                    if done.contains(pe) {
                        li += 1;
                    }
                }
                _ => {
                    out.push(la[li].clone());
                    li += 1;
                    continue;
                }
            }
        }
        if ri < ra.len() {
            let pe = &rpes[ri];
            at.enter_item(pe.clone())?;
            if let Some(v) = merge_value(at, live_of(pe), Some(&ra[ri]))? {
                out.push(v);
            }
            at.leave_item();
            done.insert(pe);
            ri += 1;
            while shared.get(next).is_some_and(|n| done.contains(n)) {
                next += 1;
            }
        }
        if (li, ri) == before {
            // Not expected: a walk that cannot move on ends.
            li += 1;
        }
    }
    Ok(Value::Array(out))
}

/// `v` without the paths of `set`: a field or element that is a member
/// goes with everything below it; an object or list emptied that way goes
/// too (decoded into the API type it would be unset).
pub fn remove(kind: &str, v: &Value, set: &Set) -> Value {
    remove_value(&mut At::new(kind), v, set)
}

fn emptied(before: &Value, after: &Value) -> bool {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => !b.is_empty() && a.is_empty(),
        (Value::Array(b), Value::Array(a)) => !b.is_empty() && a.is_empty(),
        _ => false,
    }
}

fn remove_value<'a>(at: &mut At<'a>, v: &'a Value, set: &Set) -> Value {
    if at.check().is_err() {
        return v.clone();
    }
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, cv) in m {
                let pe = PathElement::Field(k.clone());
                if set.is_member(&pe) {
                    continue;
                }
                let Some(sub) = set.child(&pe) else {
                    out.insert(k.clone(), cv.clone());
                    continue;
                };
                at.path.push(pe);
                at.names.push(k);
                let nv = remove_value(at, cv, sub);
                at.leave_field();
                if !emptied(cv, &nv) {
                    out.insert(k.clone(), nv);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            let lt = at.list_type();
            if lt == ListType::Atomic {
                return v.clone();
            }
            let mut out = Vec::with_capacity(a.len());
            for item in a {
                let pe = item_element(&lt, item).ok();
                match pe {
                    Some(pe) if set.is_member(&pe) => {}
                    Some(pe) => match set.child(&pe) {
                        Some(sub) => {
                            at.path.push(pe);
                            out.push(remove_value(at, item, sub));
                            at.leave_item();
                        }
                        None => out.push(item.clone()),
                    },
                    None => out.push(item.clone()),
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}
