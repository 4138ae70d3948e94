//! Sets of field paths, as structured-merge-diff keeps them, and their
//! `FieldsV1` form (what `metadata.managedFields[].fieldsV1` holds).
//!
//! A path is a list of elements from the object's root: `f:<name>` a field
//! of an object, `k:{"name":"c"}` the element of an associative list with
//! these key values, `v:<json>` the element of a set list with that value,
//! `i:<n>` a list element by index (never made here, accepted from
//! clients). In `FieldsV1` each element is an object key; `{}` marks a
//! leaf member, and `".": {}` inside an element that has children marks
//! the element itself a member as well.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::meta::MAX_DEPTH;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// `f:<name>`.
    Field(String),
    /// `k:<json object>`: the key fields' values, as canonical JSON (keys
    /// sorted, no spaces), so equal keys compare equal.
    Key(String),
    /// `v:<json>`: a set list's element, as canonical JSON.
    Value(String),
    /// `i:<n>`.
    Index(usize),
}

pub type Path = Vec<PathElement>;

/// `v` as canonical JSON: object keys sorted, nothing between tokens.
/// Recursive over `v`'s depth, which the JSON decoder bounded.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = m.get(k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

impl PathElement {
    /// The `FieldsV1` key.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// A `FieldsV1` key read back; malformed keys are refused.
    pub fn decode(s: &str) -> Result<PathElement, String> {
        let json =
            |rest: &str| serde_json::from_str::<Value>(rest).map_err(|e| format!("{s:?}: {e}"));
        match s.split_at_checked(2) {
            Some(("f:", name)) => Ok(PathElement::Field(name.to_string())),
            Some(("k:", rest)) => match json(rest)? {
                key @ Value::Object(_) => Ok(PathElement::Key(canonical(&key))),
                _ => Err(format!("{s:?}: a key must be a JSON object")),
            },
            Some(("v:", rest)) => Ok(PathElement::Value(canonical(&json(rest)?))),
            Some(("i:", rest)) => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| format!("{s:?}: not an index")),
            _ => Err(format!("{s:?} is not a path element (f:, k:, v: or i:)")),
        }
    }
}

impl std::fmt::Display for PathElement {
    /// As kube-apiserver prints a path in a conflict: `.spec.replicas`,
    /// `[name="c"]`, `[containerPort=80,protocol="TCP"]`, `[=value]`, `[3]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(k) => {
                let fields = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m
                        .iter()
                        .map(|(name, v)| format!("{name}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => k.clone(),
                };
                write!(f, "[{fields}]")
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path as kube-apiserver prints it.
pub fn path_string(p: &[PathElement]) -> String {
    p.iter().map(ToString::to_string).collect()
}

/// A set of paths, as a tree: `members` are the paths that end here,
/// `children` the subsets below an element (never empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn new() -> Set {
        Set::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Add `path` (the root itself is never a member).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, init)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for pe in init {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, init)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for pe in init {
            match node.children.get(pe) {
                Some(c) => node = c,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// The paths below `pe`, relative to it.
    pub fn child(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe)
    }

    pub fn is_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// Add every path of `other`.
    pub fn union_with(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            self.children.entry(pe.clone()).or_default().union_with(c);
        }
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut s = self.clone();
        s.union_with(other);
        s
    }

    /// The paths of `self` that are not paths of `other` (a path of
    /// `other` takes away only itself, not what lies below it).
    pub fn difference(&self, other: &Set) -> Set {
        self.minus(other, false)
    }

    /// The paths of `self` neither in `other` nor below one of its paths.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        self.minus(other, true)
    }

    fn minus(&self, other: &Set, below_too: bool) -> Set {
        let mut out = Set {
            members: self.members.difference(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if below_too && other.members.contains(pe) {
                continue;
            }
            let d = match other.children.get(pe) {
                Some(oc) => c.minus(oc, below_too),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            members: self.members.intersection(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(oc) = other.children.get(pe) {
                let i = c.intersection(oc);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Only `pe` and what lies below it.
    pub fn only(&self, pe: &PathElement) -> Set {
        let mut out = Set::new();
        if self.members.contains(pe) {
            out.members.insert(pe.clone());
        }
        if let Some(c) = self.children.get(pe) {
            out.children.insert(pe.clone(), c.clone());
        }
        out
    }

    /// `self`, and every object field with paths below it a member too
    /// (structured-merge-diff's `EnsureNamedFieldsAreMembers`: a field
    /// that holds owned fields counts as owned when deciding what to
    /// remove).
    pub fn with_named_fields(&self) -> Set {
        let mut out = Set {
            members: self.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if matches!(pe, PathElement::Field(_)) {
                out.members.insert(pe.clone());
            }
            out.children.insert(pe.clone(), c.with_named_fields());
        }
        out
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out.sort();
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            let mut p = prefix.clone();
            p.push(pe.clone());
            out.push(p);
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` form.
    pub fn to_fields_v1(&self) -> Value {
        let mut elements: BTreeSet<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys());
        let mut m = Map::new();
        for pe in elements {
            let v = match self.children.get(pe) {
                Some(c) => {
                    let mut inner = Map::new();
                    if self.members.contains(pe) {
                        inner.insert(".".into(), Value::Object(Map::new()));
                    }
                    if let Value::Object(cm) = c.to_fields_v1() {
                        inner.extend(cm);
                    }
                    Value::Object(inner)
                }
                None => Value::Object(Map::new()),
            };
            m.insert(pe.encode(), v);
        }
        Value::Object(m)
    }

    /// A `FieldsV1` value read back. Client input: anything but objects
    /// of path-element keys, or nesting past the store's depth, is refused.
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        Set::decode_level(v, 0).map(|(s, _)| s)
    }

    /// The set below one element, and whether the element itself is a
    /// member (`.` or an empty object).
    fn decode_level(v: &Value, depth: usize) -> Result<(Set, bool), String> {
        if depth > MAX_DEPTH {
            return Err(format!("fieldsV1 nests more than {MAX_DEPTH} levels"));
        }
        let Value::Object(m) = v else {
            return Err(format!("fieldsV1: {v} is not an object"));
        };
        let mut out = Set::new();
        let mut member = m.is_empty();
        for (k, child) in m {
            if k == "." {
                member = true;
                continue;
            }
            let pe = PathElement::decode(k)?;
            let (sub, is_member) = Set::decode_level(child, depth + 1)?;
            if is_member {
                out.members.insert(pe.clone());
            }
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok((out, member))
    }
}
