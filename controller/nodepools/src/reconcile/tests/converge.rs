//! Properties over any mix of instances: one plan, applied, reaches every
//! zone's target, and planning again at once asks for nothing more.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

#[derive(Debug, Clone)]
struct Case {
    /// zone-c is left out of `locations` unless this is set.
    with_c: bool,
    per_zone: i32,
    /// (zone index, state, age in seconds, registered, ready).
    instances: Vec<(usize, u8, i64, bool, bool)>,
    previously_registered: Vec<bool>,
}

fn case() -> impl Strategy<Value = Case> {
    let instance = (0..3usize, 0..4u8, 0..1200i64, any::<bool>(), any::<bool>());
    (
        any::<bool>(),
        0..5i32,
        prop::collection::vec(instance, 0..16),
        prop::collection::vec(any::<bool>(), 16),
    )
        .prop_map(
            |(with_c, per_zone, instances, previously_registered)| Case {
                with_c,
                per_zone,
                instances,
                previously_registered,
            },
        )
}

fn state(code: u8) -> InstanceState {
    match code {
        0 => InstanceState::Creating,
        1 => InstanceState::Running,
        2 => InstanceState::Deleting,
        _ => InstanceState::Failed("broken".into()),
    }
}

fn inputs(c: &Case) -> (NodePool, Vec<Instance>, Vec<Node>) {
    let zones: Vec<&str> = if c.with_c {
        ZONES.to_vec()
    } else {
        ZONES[..2].to_vec()
    };
    let mut pl = pool(&zones, c.per_zone);
    let mut instances = Vec::new();
    let mut nodes = Vec::new();
    let mut was = Vec::new();
    for (i, (zone, code, age, registered, ready)) in c.instances.iter().enumerate() {
        let name = format!("p-{i}");
        instances.push(inst(&name, ZONES[*zone], state(*code), *age));
        if *registered {
            nodes.push(node(&name, *ready));
        }
        if c.previously_registered[i] {
            was.push(name);
        }
    }
    pl.status = Some(sluice_model::node_pool::NodePoolStatus {
        nodes: was,
        ..Default::default()
    });
    (pl, instances, nodes)
}

/// The instances after the plan's actions: deleted ones gone, created ones
/// `Creating` as of now.
fn apply(instances: &[Instance], p: &Plan) -> Vec<Instance> {
    let gone: HashSet<&str> = deletes(p).into_iter().map(|(n, _)| n).collect();
    let mut after: Vec<Instance> = instances
        .iter()
        .filter(|i| !gone.contains(i.name.as_str()))
        .cloned()
        .collect();
    for a in &p.actions {
        if let Action::Create(c) = a {
            let mut i = inst(&c.name, &c.zone, InstanceState::Creating, 0);
            i.version = c.version.clone();
            after.push(i);
        }
    }
    after
}

proptest! {
    #[test]
    fn one_plan_reaches_every_target_and_the_next_asks_nothing(c in case()) {
        let (pl, instances, nodes) = inputs(&c);
        let first = run(&pl, &instances, &nodes);
        // Every name created is new.
        let taken: HashSet<&str> = instances.iter().map(|i| i.name.as_str()).collect();
        let created: Vec<&str> = first.actions.iter().filter_map(|a| match a {
            Action::Create(c) => Some(c.name.as_str()),
            Action::Delete { .. } => None,
        }).collect();
        prop_assert_eq!(created.iter().collect::<HashSet<_>>().len(), created.len());
        prop_assert!(created.iter().all(|n| !taken.contains(n)));

        let after = apply(&instances, &first);
        for (z, zone) in ZONES.iter().enumerate() {
            let live = after.iter().filter(|i| {
                i.zone == *zone && matches!(i.state, InstanceState::Creating | InstanceState::Running)
            }).count();
            let target = if z < 2 || c.with_c { c.per_zone as usize } else { 0 };
            prop_assert_eq!(live, target, "zone {}", zone);
        }
        prop_assert!(after.iter().all(|i| !matches!(i.state, InstanceState::Failed(_))));

        let mut again = pl.clone();
        again.status = Some(first.status.clone());
        let second = run(&again, &after, &nodes);
        prop_assert_eq!(second.actions, vec![]);
    }
}
