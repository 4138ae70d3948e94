//! Pod CIDRs across a controller's `kill -9`: the allocator must know
//! every Node's blocks before it hands one out, or a Node made after the
//! restart gets a block a Node already routes (found by the upgrade scene:
//! two nodes with 198.19.0.0/24, and connections to one's pod routed to
//! the other). Both stores.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{ok, wait_for, write, Backend, Server};

const WAIT: Duration = Duration::from_secs(30);

fn node(name: &str) -> String {
    format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n")
}

/// The Node's `spec.podCIDRs`, once set.
fn cidrs(s: &Server, name: &str) -> Option<Vec<String>> {
    let out = ok(
        s,
        "admin",
        &["get", "node", name, "-o", "jsonpath={.spec.podCIDRs}"],
    );
    let v: Vec<String> = serde_json::from_str(out.trim()).ok()?;
    (!v.is_empty()).then_some(v)
}

fn blocks_stay_unique_across_a_restart(backend: Backend) {
    let mut s = Server::start_on(
        &format!("podcidrs-{backend:?}").to_lowercase(),
        backend,
        &[
            "--controllers=true",
            "--cluster-cidr",
            "198.19.0.0/16,fd00:19::/48",
            "--node-cidr-mask-size",
            "24,64",
        ],
    );
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for name in ["n-a", "n-b"] {
        let f = write(&s, &format!("{name}.yaml"), &node(name));
        ok(&s, "admin", &["apply", "-f", &f]);
        let c = wait_for(WAIT, &format!("{name}'s podCIDRs"), || cidrs(&s, name));
        seen.extend(c);
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    // kill -9, the same serve again; new Nodes at once, as a pool's
    // replacements come while the controller starts.
    s.restart();
    for name in ["n-c", "n-d"] {
        let f = write(&s, &format!("{name}.yaml"), &node(name));
        ok(&s, "admin", &["apply", "-f", &f]);
    }
    for name in ["n-c", "n-d"] {
        let c = wait_for(WAIT, &format!("{name}'s podCIDRs"), || cidrs(&s, name));
        for block in c {
            assert!(
                seen.insert(block.clone()),
                "{name} got {block}, a block another Node holds: {seen:?}"
            );
        }
    }
}

#[test]
fn pod_cidr_blocks_stay_unique_across_a_restart_embedded() {
    // spec: the node IPAM's rule — a block is one Node's.
    blocks_stay_unique_across_a_restart(Backend::Embedded);
}

#[test]
fn pod_cidr_blocks_stay_unique_across_a_restart_etcd() {
    blocks_stay_unique_across_a_restart(Backend::Etcd);
}
