//! The collector's rules, one case each, with the facts of upstream's
//! garbage collector tests (owners in other namespaces, a cluster-scoped
//! child of a namespaced owner, an owner recreated under the same name,
//! foreground owners waiting on blocking children, orphaning).

use super::*;

fn id(kind: &str, ns: Option<&str>, name: &str, uid: &str) -> ObjectRef {
    let api_version = match kind {
        "Deployment" | "ReplicaSet" => "apps/v1",
        _ => "v1",
    };
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: ns.map(str::to_string),
        name: name.into(),
        uid: uid.into(),
    }
}

fn node(id: ObjectRef) -> Node {
    Node {
        id,
        owners: Vec::new(),
        being_deleted: false,
        finalizers: Vec::new(),
    }
}

fn owned_by(mut n: Node, owner: &ObjectRef, block: bool) -> Node {
    n.owners.push(OwnerRef {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        controller: true,
        block_owner_deletion: block,
    });
    n
}

fn deleting(mut n: Node, finalizer: Option<&str>) -> Node {
    n.being_deleted = true;
    n.finalizers.extend(finalizer.map(str::to_string));
    n
}

fn with_finalizer(mut n: Node, f: &str) -> Node {
    n.finalizers.push(f.into());
    n
}

/// Namespaces, Nodes and Namespaces' kinds are cluster-scoped; the rest of
/// the test's kinds are namespaced; `Widget` is served by nobody.
fn namespaced(_: &str, kind: &str) -> Option<bool> {
    match kind {
        "Namespace" | "Node" | "PersistentVolume" => Some(false),
        "Widget" => None,
        _ => Some(true),
    }
}

fn delete(object: &ObjectRef, policy: Policy) -> Action {
    Action::Delete {
        object: object.clone(),
        policy,
    }
}

fn drop_refs(object: &ObjectRef, owners: &[&ObjectRef]) -> Action {
    Action::RemoveOwnerReferences {
        object: object.clone(),
        owners: owners.iter().map(|o| o.uid.clone()).collect(),
    }
}

fn drop_finalizer(object: &ObjectRef, finalizer: &'static str) -> Action {
    Action::RemoveFinalizer {
        object: object.clone(),
        finalizer,
    }
}

#[test]
fn the_collectors_rules() {
    let ns = Some("ns1");
    let deploy = id("Deployment", ns, "web", "d-1");
    let rs = id("ReplicaSet", ns, "web-7f", "rs-1");
    let pod = id("Pod", ns, "web-7f-a", "p-1");
    let pod2 = id("Pod", ns, "web-7f-b", "p-2");
    let pv = id("PersistentVolume", None, "pv-1", "pv-1");
    let cm = id("ConfigMap", ns, "cfg", "cm-1");
    let other_ns_owner = id("ConfigMap", Some("ns2"), "cfg", "cm-2");
    let recreated = id("ReplicaSet", ns, "web-7f", "rs-2");
    let widget = id("Widget", ns, "w", "w-1");
    let cluster_child = id("Node", None, "n-1", "n-1");

    // (rule, snapshot, actions)
    let cases: Vec<(&str, Vec<Node>, Vec<Action>)> = vec![
        (
            "an object without owners is never collected",
            vec![node(pod.clone())],
            vec![],
        ),
        (
            "a dependent of a live owner stays",
            vec![node(rs.clone()), owned_by(node(pod.clone()), &rs, true)],
            vec![],
        ),
        (
            "background: a dependent whose owner uid is gone is deleted in the background",
            vec![owned_by(node(pod.clone()), &rs, true)],
            vec![delete(&pod, Policy::Background)],
        ),
        (
            "the cascade goes one level per pass: a gone deployment's replicaset goes, its pods wait for it",
            vec![owned_by(node(rs.clone()), &deploy, true), owned_by(node(pod.clone()), &rs, true)],
            vec![delete(&rs, Policy::Background)],
        ),
        (
            "an owner recreated under the same name is another object: the old uid dangles",
            vec![node(recreated.clone()), owned_by(node(pod.clone()), &rs, true)],
            vec![delete(&pod, Policy::Background)],
        ),
        (
            "a namespaced owner is looked up in the dependent's namespace: one in another namespace is absent",
            vec![node(other_ns_owner.clone()), owned_by(node(pod.clone()), &other_ns_owner, false)],
            vec![delete(&pod, Policy::Background)],
        ),
        (
            "a namespaced dependent may have a cluster-scoped owner",
            vec![node(pv.clone()), owned_by(node(pod.clone()), &pv, false)],
            vec![],
        ),
        (
            "a cluster-scoped dependent of a namespaced owner is never collected",
            vec![owned_by(node(cluster_child.clone()), &cm, false)],
            vec![],
        ),
        (
            "a dangling reference beside a live owner is only removed",
            vec![node(cm.clone()), owned_by(owned_by(node(pod.clone()), &rs, true), &cm, false)],
            vec![drop_refs(&pod, &[&rs])],
        ),
        (
            "a dependent keeps its own finalizer's policy: orphan",
            vec![with_finalizer(owned_by(node(rs.clone()), &deploy, true), ORPHAN)],
            vec![delete(&rs, Policy::Orphan)],
        ),
        (
            "foreground: the owner waits while a blocking dependent exists, and the dependent is deleted",
            vec![deleting(node(rs.clone()), Some(FOREGROUND)), owned_by(node(pod.clone()), &rs, true)],
            vec![delete(&pod, Policy::Background)],
        ),
        (
            "foreground: a dependent being deleted still blocks (a pod in its grace period)",
            vec![deleting(node(rs.clone()), Some(FOREGROUND)),
                 deleting(owned_by(node(pod.clone()), &rs, true), None)],
            vec![],
        ),
        (
            "foreground: no blocking dependent left, the finalizer goes",
            vec![deleting(node(rs.clone()), Some(FOREGROUND))],
            vec![drop_finalizer(&rs, FOREGROUND)],
        ),
        (
            "foreground: dependents without blockOwnerDeletion do not hold the owner",
            vec![deleting(node(rs.clone()), Some(FOREGROUND)), owned_by(node(pod.clone()), &rs, false)],
            vec![drop_finalizer(&rs, FOREGROUND), delete(&pod, Policy::Background)],
        ),
        (
            "foreground: a waiting owner's dependent with dependents of its own is deleted in the foreground",
            vec![deleting(node(deploy.clone()), Some(FOREGROUND)),
                 owned_by(node(rs.clone()), &deploy, true), owned_by(node(pod.clone()), &rs, true)],
            vec![delete(&rs, Policy::Foreground)],
        ),
        (
            "foreground: a dependent with another live owner only drops the waiting reference",
            vec![deleting(node(rs.clone()), Some(FOREGROUND)), node(cm.clone()),
                 owned_by(owned_by(node(pod.clone()), &rs, true), &cm, false)],
            vec![drop_refs(&pod, &[&rs])],
        ),
        (
            "foreground cycle: a dependent whose own dependent waits too is unblocked before its delete",
            vec![deleting(node(deploy.clone()), Some(FOREGROUND)),
                 owned_by(node(rs.clone()), &deploy, true),
                 deleting(owned_by(node(pod.clone()), &rs, true), Some(FOREGROUND))],
            vec![
                Action::UnblockOwnerReferences { object: rs.clone(), owners: vec![deploy.uid.clone()] },
                delete(&rs, Policy::Foreground),
                // The pod has no dependents: its own wait is over.
                drop_finalizer(&pod, FOREGROUND),
            ],
        ),
        (
            "orphan: every dependent's reference to the owner is removed first",
            vec![deleting(node(rs.clone()), Some(ORPHAN)), owned_by(node(pod.clone()), &rs, true),
                 owned_by(node(pod2.clone()), &rs, true)],
            vec![drop_refs(&pod, &[&rs]), drop_refs(&pod2, &[&rs])],
        ),
        (
            "orphan: with no dependent naming it, the finalizer goes",
            vec![deleting(node(rs.clone()), Some(ORPHAN)), node(pod.clone())],
            vec![drop_finalizer(&rs, ORPHAN)],
        ),
        (
            "an object being deleted in the background is not decided again",
            vec![deleting(owned_by(node(pod.clone()), &rs, true), None)],
            vec![],
        ),
        (
            "an owner of a kind nobody serves leaves its dependent alone",
            vec![owned_by(node(pod.clone()), &widget, true)],
            vec![],
        ),
    ];
    for (rule, snapshot, want) in cases {
        assert_eq!(plan(&snapshot, namespaced), want, "{rule}");
    }
}

#[test]
fn nodes_are_read_from_object_metadata() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    let meta = ObjectMeta {
        name: Some("web-7f-a".into()),
        namespace: Some("ns1".into()),
        uid: Some("p-1".into()),
        deletion_timestamp: Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).expect("ts"),
        )),
        finalizers: Some(vec![FOREGROUND.into()]),
        owner_references: Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-7f".into(),
            uid: "rs-1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        ..Default::default()
    };
    let n = Node::from_meta("v1", "Pod", &meta);
    assert_eq!(n.id, id("Pod", Some("ns1"), "web-7f-a", "p-1"));
    assert!(n.deleting_dependents());
    assert!(n.owners[0].controller);
    assert!(!n.owners[0].block_owner_deletion);
    assert_eq!(Policy::Foreground.as_str(), "Foreground");
}
