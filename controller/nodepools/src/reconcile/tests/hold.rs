//! A zone whose size an upgrade holds (`Config::held_zones`).

use std::collections::BTreeMap;

use super::*;
use crate::reconcile::ZoneHold;

fn holding(zone: &str, extra: usize) -> Config {
    Config {
        held_zones: BTreeMap::from([(zone.to_owned(), ZoneHold { extra })]),
        ..Config::default()
    }
}

#[test]
fn surge_nodes_of_a_held_zone_are_not_surplus() {
    // spec: U1 — a zone of 2 holding maxSurge = 2 upgraded nodes keeps them;
    // without the hold the two newest would be cut as surplus.
    let have = [
        running("p-a-1", "zone-a", 500),
        running("p-a-2", "zone-a", 500),
        running("p-a-3", "zone-a", 10),
        running("p-a-4", "zone-a", 10),
    ];
    let nodes = ready_nodes(&have);
    let pl = pool(&["zone-a"], 2);
    let free = run(&pl, &have, &nodes);
    assert_eq!(
        deletes(&free),
        [
            ("p-a-3", &DeleteReason::Surplus),
            ("p-a-4", &DeleteReason::Surplus)
        ]
    );
    let held = plan(&pl, &have, &nodes, &holding("zone-a", 2), now()).unwrap();
    assert_eq!(held.actions, []);
    // One over the allowance is still surplus: the newest goes.
    let held = plan(&pl, &have, &nodes, &holding("zone-a", 1), now()).unwrap();
    assert_eq!(deletes(&held), [("p-a-3", &DeleteReason::Surplus)]);
}

#[test]
fn a_held_zone_is_not_refilled_but_failures_are_still_removed() {
    // spec: U2 — a zone recreating a node in place runs one short; the
    // upgrade makes the node of the new version, not the reconciler.
    let have = [
        running("p-a-1", "zone-a", 500),
        inst("p-a-2", "zone-a", InstanceState::Failed("disk".into()), 500),
    ];
    let nodes = ready_nodes(&have[..1]);
    let pl = pool(&["zone-a", "zone-b"], 3);
    let p = plan(&pl, &have, &nodes, &holding("zone-a", 1), now()).unwrap();
    assert_eq!(
        deletes(&p),
        [("p-a-2", &DeleteReason::Failed("disk".into()))]
    );
    // zone-b, not held, is filled as always.
    assert_eq!(creates(&p), ["zone-b", "zone-b", "zone-b"]);
}
