//! `spec.nodeSelector` and node affinity: the required terms filter
//! (NodeAffinity's Filter), the preferred ones score.
//!
//! Terms are ORed, the expressions of a term ANDed; a term with no
//! expression and no field matches no node, as upstream.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};

use crate::error::InputError;

/// One operator of a `NodeSelectorRequirement`, with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeOp {
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

impl NodeOp {
    fn holds(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (NodeOp::In(vs), Some(v)) => vs.contains(v),
            (NodeOp::NotIn(vs), Some(v)) => !vs.contains(v),
            (NodeOp::NotIn(_), None) => true,
            (NodeOp::Exists, v) => v.is_some(),
            (NodeOp::DoesNotExist, v) => v.is_none(),
            // A label that is no integer satisfies neither Gt nor Lt.
            (NodeOp::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (NodeOp::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (NodeOp::In(_) | NodeOp::Gt(_) | NodeOp::Lt(_), None) => false,
        }
    }
}

/// A `nodeSelectorTerm`: label expressions and `metadata.name` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    labels: Vec<(String, NodeOp)>,
    names: Vec<NodeOp>,
}

impl Term {
    fn parse(t: &NodeSelectorTerm, object: &str, field: &str) -> Result<Self, InputError> {
        let mut labels = Vec::new();
        for (i, r) in t.match_expressions.iter().flatten().enumerate() {
            let f = format!("{field}.matchExpressions[{i}]");
            labels.push((r.key.clone(), parse_op(r, object, &f)?));
        }
        let mut names = Vec::new();
        for (i, r) in t.match_fields.iter().flatten().enumerate() {
            let f = format!("{field}.matchFields[{i}]");
            if r.key != "metadata.name" {
                let why = format!("{:?} is not a supported field; only metadata.name", r.key);
                return Err(InputError::new(object, format!("{f}.key"), why));
            }
            names.push(parse_op(r, object, &f)?);
        }
        Ok(Term { labels, names })
    }

    fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.labels.is_empty() && self.names.is_empty() {
            return false;
        }
        self.labels
            .iter()
            .all(|(k, op)| op.holds(labels.get(k).map(String::as_str)))
            && self.names.iter().all(|op| op.holds(Some(name)))
    }
}

fn parse_op(r: &NodeSelectorRequirement, object: &str, field: &str) -> Result<NodeOp, InputError> {
    let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
    let err = |f: &str, why: String| InputError::new(object, format!("{field}.{f}"), why);
    let int = || -> Result<i64, InputError> {
        match r.values.as_deref() {
            Some([v]) => v
                .parse()
                .map_err(|_| err("values", format!("{v:?} is not an integer"))),
            _ => Err(err(
                "values",
                format!("{} takes exactly one integer", r.operator),
            )),
        }
    };
    Ok(match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            return Err(err("values", format!("required for {}", r.operator)))
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return Err(err("values", format!("must be empty for {}", r.operator)))
        }
        "In" => NodeOp::In(values),
        "NotIn" => NodeOp::NotIn(values),
        "Exists" => NodeOp::Exists,
        "DoesNotExist" => NodeOp::DoesNotExist,
        "Gt" => NodeOp::Gt(int()?),
        "Lt" => NodeOp::Lt(int()?),
        other => {
            let why = format!("{other:?} is not In, NotIn, Exists, DoesNotExist, Gt or Lt");
            return Err(err("operator", why));
        }
    })
}

/// What a node must satisfy: every `nodeSelector` pair, and one of the
/// required affinity terms when there are any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequiredNodeAffinity {
    selector: BTreeMap<String, String>,
    terms: Option<Vec<Term>>,
}

impl RequiredNodeAffinity {
    pub(crate) fn parse(pod: &Pod, object: &str) -> Result<Self, InputError> {
        let spec = pod.spec.as_ref();
        let selector = spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        let terms = match required {
            None => None,
            Some(ns) => {
                let base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
                let mut terms = Vec::new();
                for (i, t) in ns.node_selector_terms.iter().enumerate() {
                    terms.push(Term::parse(t, object, &format!("{base}[{i}]"))?);
                }
                Some(terms)
            }
        };
        Ok(RequiredNodeAffinity { selector, terms })
    }

    /// Whether every node passes (no selector, no required terms), so
    /// callers can skip the check.
    pub(crate) fn is_empty(&self) -> bool {
        self.selector.is_empty() && self.terms.is_none()
    }

    pub(crate) fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self
                .terms
                .as_ref()
                .is_none_or(|ts| ts.iter().any(|t| t.matches(name, labels)))
    }
}

/// `preferredDuringSchedulingIgnoredDuringExecution`: weighted terms whose
/// weights add up on the nodes they match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PreferredNodeAffinity {
    terms: Vec<(i64, Term)>,
}

impl PreferredNodeAffinity {
    pub(crate) fn parse(pod: &Pod, object: &str) -> Result<Self, InputError> {
        let preferred = pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        let base = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
        let mut terms = Vec::new();
        for (i, p) in preferred.into_iter().flatten().enumerate() {
            let f = format!("{base}[{i}]");
            if !(1..=100).contains(&p.weight) {
                let why = format!("{} is not in 1..100", p.weight);
                return Err(InputError::new(object, format!("{f}.weight"), why));
            }
            let term = Term::parse(&p.preference, object, &format!("{f}.preference"))?;
            terms.push((i64::from(p.weight), term));
        }
        Ok(PreferredNodeAffinity { terms })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The sum of the weights of the terms the node matches.
    pub(crate) fn score(&self, name: &str, labels: &BTreeMap<String, String>) -> i64 {
        self.terms
            .iter()
            .filter(|(_, t)| t.matches(name, labels))
            .map(|(w, _)| w)
            .sum()
    }
}
