//! U7: a change of the nodes' labels or taints alone needs no new node and
//! no surge: each Node's labels and taints are rewritten in place. The
//! pool's labels and taints the new config drops are removed; those a user
//! or another controller put on the node stay.

use k8s_openapi::api::core::v1::Node;
use sluice_model::node_pool::{NodeConfig, NodeTaint};

use std::collections::HashSet;

use crate::action::InPlace;
use crate::observe::Direction;
use crate::strategy::{Outcome, Pass, Strategy};
use crate::Action;

/// U7's pass: every Node of the pool rewritten at once, ungated.
pub(crate) struct InPlacePass;

impl Strategy for InPlacePass {
    fn stage_name(&self, _: Direction) -> &'static str {
        "in-place"
    }

    fn started(&self, _: &Pass<'_>) -> bool {
        false
    }

    fn run(&self, pass: &Pass<'_>) -> Outcome {
        let may_start = pass.gate_open && !pass.cancelled;
        let (fresh, old) = pass.direction.sides(pass.sides);
        let mut out = Outcome {
            cancel_honoured: true,
            ..Outcome::default()
        };
        let names: HashSet<&str> = pass
            .inputs
            .instances
            .iter()
            .filter(|i| i.pool == pass.pool_name)
            .map(|i| i.name.as_str())
            .collect();
        let nodes: Vec<_> = pass
            .inputs
            .nodes
            .iter()
            .filter(|n| {
                n.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| names.contains(n))
            })
            .collect();
        out.total = nodes.len();
        for node in nodes {
            match rewrite(node, &old.config, &fresh.config) {
                Some(r) if may_start => out.actions.push(Action::ApplyInPlace(r)),
                Some(_) => {}
                None => out.upgraded += 1,
            }
        }
        out.done = out.upgraded == out.total;
        out.headline = format!(
            "{} of {} node(s) have the new labels and taints",
            out.upgraded, out.total
        );
        out
    }
}

/// The rewrite `node` needs to go from `old` to `new` (`None`: none).
pub(crate) fn rewrite(node: &Node, old: &NodeConfig, new: &NodeConfig) -> Option<InPlace> {
    let name = node.metadata.name.clone()?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let set_labels = new
        .labels
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<std::collections::BTreeMap<_, _>>();
    let remove_labels: Vec<String> = old
        .labels
        .keys()
        .filter(|k| !new.labels.contains_key(*k) && labels.contains_key(*k))
        .cloned()
        .collect();
    let on_node: Vec<NodeTaint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|ts| ts.iter().filter_map(from_kubernetes).collect())
        .unwrap_or_default();
    let add_taints: Vec<NodeTaint> = new
        .taints
        .iter()
        .filter(|t| !on_node.contains(t))
        .cloned()
        .collect();
    let remove_taints: Vec<NodeTaint> = old
        .taints
        .iter()
        .filter(|t| !new.taints.contains(t) && on_node.contains(t))
        .cloned()
        .collect();
    let nothing = set_labels.is_empty()
        && remove_labels.is_empty()
        && add_taints.is_empty()
        && remove_taints.is_empty();
    (!nothing).then_some(InPlace {
        node: name,
        set_labels,
        remove_labels,
        add_taints,
        remove_taints,
    })
}

/// A Node's taint in the pool's spelling; effects it does not know are
/// not the pool's, so they are left out.
fn from_kubernetes(t: &k8s_openapi::api::core::v1::Taint) -> Option<NodeTaint> {
    use sluice_model::node_pool::TaintEffect::*;
    let effect = [NoSchedule, PreferNoSchedule, NoExecute]
        .into_iter()
        .find(|e| e.kubernetes() == t.effect)?;
    Some(NodeTaint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use sluice_model::node_pool::TaintEffect;
    use std::collections::BTreeMap;

    fn taint(key: &str) -> NodeTaint {
        NodeTaint {
            key: key.into(),
            value: "x".into(),
            effect: TaintEffect::NoSchedule,
        }
    }

    fn config(labels: &[(&str, &str)], taints: &[&str]) -> NodeConfig {
        NodeConfig {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: taints.iter().map(|k| taint(k)).collect(),
            ..Default::default()
        }
    }

    fn node(labels: &[(&str, &str)], taints: &[&str]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("p-a-bcdf".into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n.spec = Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|k| Taint {
                        key: k.to_string(),
                        value: Some("x".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        n
    }

    #[test]
    fn pool_labels_and_taints_change_and_others_stay() {
        // spec: U7 — labels and taints change in place.
        let old = config(&[("tier", "web"), ("team", "a")], &["old"]);
        let new = config(&[("tier", "api")], &["new"]);
        let n = node(
            &[("tier", "web"), ("team", "a"), ("user", "kept")],
            &["old", "users-own"],
        );
        let r = rewrite(&n, &old, &new).unwrap();
        assert_eq!(
            r.set_labels,
            BTreeMap::from([("tier".to_string(), "api".to_string())])
        );
        assert_eq!(r.remove_labels, ["team"]);
        assert_eq!(r.add_taints, [taint("new")]);
        assert_eq!(r.remove_taints, [taint("old")]);
        // A node already rewritten needs nothing.
        let done = node(&[("tier", "api"), ("user", "kept")], &["new", "users-own"]);
        assert_eq!(rewrite(&done, &old, &new), None);
    }
}
