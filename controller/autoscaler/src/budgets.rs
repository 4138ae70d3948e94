//! PodDisruptionBudgets as scale-down counts them: each budget's
//! disruptions allowed now (the model's arithmetic over the snapshot's
//! pods), spent as nodes are found removable, so two nodes never both
//! count on a budget's last disruption.

use std::collections::{BTreeMap, HashMap};

use sluice_model::k8s::{Pod, PodDisruptionBudget};
use sluice_model::policy::disruption::{budget_status, Budget, PodFacts, Selector};

use crate::error::InputError;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

struct Entry {
    name: String,
    namespace: String,
    selector: Selector,
    remaining: i64,
}

/// The budgets of a snapshot with what each still allows.
pub(crate) struct Budgets {
    entries: Vec<Entry>,
    by_namespace: HashMap<String, Vec<usize>>,
}

impl Budgets {
    pub fn build(pdbs: &[PodDisruptionBudget], pods: &[Pod]) -> (Budgets, Vec<InputError>) {
        let mut errors = Vec::new();
        let mut pods_by_ns: HashMap<&str, Vec<&Pod>> = HashMap::new();
        for p in pods {
            pods_by_ns
                .entry(p.metadata.namespace.as_deref().unwrap_or("default"))
                .or_default()
                .push(p);
        }
        let mut entries = Vec::new();
        for pdb in pdbs {
            let name = pdb.metadata.name.clone().unwrap_or_default();
            let namespace = pdb
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let object = format!("poddisruptionbudget {namespace}/{name}");
            let Some(spec) = pdb.spec.as_ref() else {
                continue;
            };
            // A null selector guards nothing (policy/v1).
            let Some(sel) = spec.selector.as_ref() else {
                continue;
            };
            let selector = match Selector::parse(sel) {
                Ok(s) => s,
                Err(e) => {
                    errors.push(InputError::new(
                        &object,
                        format!("spec.selector.{}", e.field()),
                        e.message(),
                    ));
                    continue;
                }
            };
            let budget = match Budget::of(spec) {
                Ok(b) => b,
                Err(e) => {
                    errors.push(InputError::new(&object, e.field(), e.message()));
                    continue;
                }
            };
            let guarded: Vec<PodFacts> = pods_by_ns
                .get(namespace.as_str())
                .into_iter()
                .flatten()
                .filter(|p| {
                    selector.matches(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
                })
                .map(|p| PodFacts::of(&p.metadata, p.status.as_ref()))
                .collect();
            let disrupted = pdb
                .status
                .as_ref()
                .and_then(|s| s.disrupted_pods.clone())
                .unwrap_or_default();
            let status = budget_status(budget, &guarded, &disrupted);
            entries.push(Entry {
                name,
                namespace,
                selector,
                remaining: i64::from(status.disruptions_allowed),
            });
        }
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            by_namespace.entry(e.namespace.clone()).or_default().push(i);
        }
        (
            Budgets {
                entries,
                by_namespace,
            },
            errors,
        )
    }

    fn matching<'s>(&'s self, pod: &'s Pod) -> impl Iterator<Item = usize> + 's {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let labels = pod.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        self.by_namespace
            .get(ns)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |&i| self.entries[i].selector.matches(labels))
    }

    /// Whether any budget guards the pod.
    pub fn guarded(&self, pod: &Pod) -> bool {
        self.matching(pod).next().is_some()
    }

    /// The first guarding budget with no disruption left, by name.
    pub fn exhausted(&self, pod: &Pod) -> Option<String> {
        self.matching(pod)
            .find(|&i| self.entries[i].remaining < 1)
            .map(|i| self.entries[i].name.clone())
    }

    /// Spends one disruption of every budget guarding each pod.
    pub fn spend<'p>(&mut self, pods: impl IntoIterator<Item = &'p Pod>) {
        for p in pods {
            let hit: Vec<usize> = self.matching(p).collect();
            for i in hit {
                self.entries[i].remaining -= 1;
            }
        }
    }

    /// Whether moving all of `pods` stays within every budget.
    pub fn allows<'p>(&self, pods: impl IntoIterator<Item = &'p Pod>) -> Result<(), String> {
        let mut need: HashMap<usize, i64> = HashMap::new();
        for p in pods {
            for i in self.matching(p) {
                *need.entry(i).or_insert(0) += 1;
            }
        }
        let mut over: Vec<&str> = need
            .iter()
            .filter(|(i, n)| self.entries[**i].remaining < **n)
            .map(|(i, _)| self.entries[*i].name.as_str())
            .collect();
        over.sort_unstable();
        match over.first() {
            Some(name) => Err((*name).to_owned()),
            None => Ok(()),
        }
    }
}
