//! Pod label selectors scoped to namespaces, as inter-pod affinity terms
//! and topology spread constraints use them, compiled once per pod.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};
use sluice_model::k8s::LabelSelector;
use sluice_model::policy::disruption::{PolicyError, Selector, SelectorOp};

use crate::error::InputError;

/// The namespaces a term looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Namespaces {
    /// `namespaceSelector: {}`: every namespace.
    All,
    Only(BTreeSet<String>),
}

/// Pods of some namespaces whose labels a selector matches. A missing
/// (`null`) selector matches no pod, as upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodMatcher {
    pub namespaces: Namespaces,
    pub selector: Option<Selector>,
}

impl PodMatcher {
    pub(crate) fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        let in_scope = match &self.namespaces {
            Namespaces::All => true,
            Namespaces::Only(set) => set.contains(namespace),
        };
        in_scope && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// A text naming this matcher exactly, for the per-selector counters
    /// (`Debug` of ordered maps and sets is deterministic).
    pub(crate) fn key(&self) -> String {
        format!("{:?}|{:?}", self.namespaces, self.selector)
    }

    /// One label pair every matched pod must carry, if the selector has
    /// one, so counters can be found by a pod's labels without trying
    /// every selector.
    pub(crate) fn pin(&self) -> Option<(&str, &str)> {
        let sel = self.selector.as_ref()?;
        sel.match_labels
            .iter()
            .next()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// A required pod (anti-)affinity term: pods matched, and the node label
/// whose values are the domains (`kubernetes.io/hostname`: one node each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodTerm {
    pub matcher: PodMatcher,
    pub topology_key: String,
}

/// Compiles `sel` for `field`, naming the failing expression under it.
pub(crate) fn compile_selector(
    sel: &LabelSelector,
    object: &str,
    field: &str,
) -> Result<Selector, InputError> {
    Selector::parse(sel).map_err(|e: PolicyError| {
        let inner = e.field();
        let suffix = inner.strip_prefix("spec.selector").unwrap_or(&inner);
        InputError::new(object, format!("{field}{suffix}"), e.message())
    })
}

/// Adds `key In (pod's value)` for each of `keys` the pod carries (or
/// `NotIn` when `mismatch`), as `matchLabelKeys` / `mismatchLabelKeys` ask.
pub(crate) fn add_label_keys(
    sel: &mut Selector,
    keys: Option<&Vec<String>>,
    labels: &BTreeMap<String, String>,
    mismatch: bool,
) {
    for key in keys.into_iter().flatten() {
        if let Some(v) = labels.get(key) {
            let values = BTreeSet::from([v.clone()]);
            let op = if mismatch {
                SelectorOp::NotIn(values)
            } else {
                SelectorOp::In(values)
            };
            sel.match_expressions.push((key.clone(), op));
        }
    }
}

fn parse_term(
    t: &PodAffinityTerm,
    pod_namespace: &str,
    labels: &BTreeMap<String, String>,
    object: &str,
    field: &str,
) -> Result<PodTerm, InputError> {
    if t.topology_key.is_empty() {
        return Err(InputError::new(
            object,
            format!("{field}.topologyKey"),
            "required",
        ));
    }
    let mut selector = match t.label_selector.as_ref() {
        Some(s) => Some(compile_selector(
            s,
            object,
            &format!("{field}.labelSelector"),
        )?),
        None => None,
    };
    if let Some(sel) = selector.as_mut() {
        add_label_keys(sel, t.match_label_keys.as_ref(), labels, false);
        add_label_keys(sel, t.mismatch_label_keys.as_ref(), labels, true);
    }
    let listed: BTreeSet<String> = t.namespaces.iter().flatten().cloned().collect();
    let namespaces = match t.namespace_selector.as_ref() {
        // Sluice keeps no Namespace labels, so only the empty selector
        // (every namespace) can be honoured.
        Some(ns)
            if ns.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                || ns.match_expressions.as_ref().is_some_and(|e| !e.is_empty()) =>
        {
            let why = "only an empty selector (every namespace) is supported";
            return Err(InputError::new(
                object,
                format!("{field}.namespaceSelector"),
                why,
            ));
        }
        Some(_) => Namespaces::All,
        None if listed.is_empty() => Namespaces::Only(BTreeSet::from([pod_namespace.to_owned()])),
        None => Namespaces::Only(listed),
    };
    Ok(PodTerm {
        matcher: PodMatcher {
            namespaces,
            selector,
        },
        topology_key: t.topology_key.clone(),
    })
}

/// Which required terms of the pod to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TermKind {
    Affinity,
    AntiAffinity,
}

/// The required and the preferred terms of the pod's `podAffinity` or
/// `podAntiAffinity`, and that field's path.
struct Stanza<'p> {
    required: Option<&'p Vec<PodAffinityTerm>>,
    preferred: Option<&'p Vec<WeightedPodAffinityTerm>>,
    base: &'static str,
    namespace: &'p str,
    labels: BTreeMap<String, String>,
}

/// `PodAffinity` and `PodAntiAffinity` are distinct types with the same
/// two term lists; this reads them from either.
macro_rules! term_lists {
    ($a:expr) => {{
        let a = $a;
        (
            a.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            a.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        )
    }};
}

fn stanza(pod: &Pod, kind: TermKind) -> Stanza<'_> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let ((required, preferred), base) = match kind {
        TermKind::Affinity => (
            term_lists!(affinity.and_then(|a| a.pod_affinity.as_ref())),
            "spec.affinity.podAffinity",
        ),
        TermKind::AntiAffinity => (
            term_lists!(affinity.and_then(|a| a.pod_anti_affinity.as_ref())),
            "spec.affinity.podAntiAffinity",
        ),
    };
    Stanza {
        required,
        preferred,
        base,
        namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
    }
}

/// The pod's required `podAffinity` or `podAntiAffinity` terms.
pub(crate) fn required_terms(
    pod: &Pod,
    kind: TermKind,
    object: &str,
) -> Result<Vec<PodTerm>, InputError> {
    let s = stanza(pod, kind);
    let base = format!("{}.requiredDuringSchedulingIgnoredDuringExecution", s.base);
    s.required
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| parse_term(t, s.namespace, &s.labels, object, &format!("{base}[{i}]")))
        .collect()
}

/// The pod's preferred `podAffinity` or `podAntiAffinity` terms, with
/// their weights.
pub(crate) fn preferred_terms(
    pod: &Pod,
    kind: TermKind,
    object: &str,
) -> Result<Vec<(i64, PodTerm)>, InputError> {
    let s = stanza(pod, kind);
    let base = format!("{}.preferredDuringSchedulingIgnoredDuringExecution", s.base);
    let mut out = Vec::new();
    for (i, w) in s.preferred.into_iter().flatten().enumerate() {
        let field = format!("{base}[{i}]");
        if !(1..=100).contains(&w.weight) {
            let why = format!("{} is not in 1..100", w.weight);
            return Err(InputError::new(object, format!("{field}.weight"), why));
        }
        let term_field = format!("{field}.podAffinityTerm");
        let term = parse_term(
            &w.pod_affinity_term,
            s.namespace,
            &s.labels,
            object,
            &term_field,
        )?;
        out.push((i64::from(w.weight), term));
    }
    Ok(out)
}
