//! When a drained node is out of the load balancers: no longer a backend
//! of any NEG (`spec.endpoints[].instance`) or instance group
//! (`spec.instances[].name`), and that for long enough to have reached
//! the load balancers. A node deleted sooner takes the connections the
//! load balancer still sends it down with it.
//!
//! The subsetting loop drops a node from its NEGs and groups as soon as
//! its drain is asked for; the load-balancer loop then programs the
//! balancers. Upgrades and the autoscaler delete a drained node only once
//! it has left them, [`LOAD_BALANCER_DELAY`] after it was seen to leave,
//! and at the latest [`LOAD_BALANCER_PATIENCE`] after its drain began, so
//! a stalled subsetting loop delays a deletion but never holds it for
//! good.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::load_balancer::{InstanceGroup, NetworkEndpointGroup};

/// How long a node is kept after it has left every NEG and instance
/// group (and at least after its drain began): the time for the change
/// to reach the load balancers. The cluster autoscaler waits as long
/// after tainting a node (`--node-delete-delay-after-taint`, 5 s).
pub const LOAD_BALANCER_DELAY: SignedDuration = SignedDuration::from_secs(5);

/// How long after its drain began a node still listed behind a load
/// balancer is waited for before it is deleted anyway: a subsetting loop
/// that is stuck or down must not hold upgrades and scale-downs forever.
pub const LOAD_BALANCER_PATIENCE: SignedDuration = SignedDuration::from_secs(120);

/// The nodes some NEG or instance group lists as a backend.
pub fn behind_balancers<'a>(
    negs: impl IntoIterator<Item = &'a NetworkEndpointGroup>,
    groups: impl IntoIterator<Item = &'a InstanceGroup>,
) -> BTreeSet<String> {
    let in_negs = negs
        .into_iter()
        .flat_map(|n| n.spec.endpoints.iter().map(|e| e.instance.clone()));
    let in_groups = groups
        .into_iter()
        .flat_map(|g| g.spec.instances.iter().map(|i| i.name.clone()));
    in_negs.chain(in_groups).collect()
}

/// Since when each node has been seen out of every load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfBalancers {
    /// `false`: nothing follows the balancers (a simulation, a test of
    /// the upgrade logic alone), and every node counts as released.
    tracking: bool,
    out_since: BTreeMap<String, Timestamp>,
}

impl Default for OutOfBalancers {
    /// Tracking, with nothing observed yet.
    fn default() -> Self {
        OutOfBalancers {
            tracking: true,
            out_since: BTreeMap::new(),
        }
    }
}

impl OutOfBalancers {
    /// Nothing follows the balancers: every node is released.
    pub fn untracked() -> Self {
        OutOfBalancers {
            tracking: false,
            out_since: BTreeMap::new(),
        }
    }

    /// Record that at `now`, of `nodes` (every Node there is), those in
    /// `behind` are backends of some balancer. A node that left is out
    /// since the first observation that missed it; one that came back
    /// starts again; nodes that are gone are forgotten.
    pub fn observe<'a>(
        &mut self,
        behind: &BTreeSet<String>,
        nodes: impl IntoIterator<Item = &'a str>,
        now: Timestamp,
    ) {
        let nodes: BTreeSet<&str> = nodes.into_iter().collect();
        self.out_since
            .retain(|n, _| nodes.contains(n.as_str()) && !behind.contains(n));
        for n in nodes.into_iter().filter(|n| !behind.contains(*n)) {
            self.out_since.entry(n.to_owned()).or_insert(now);
        }
    }

    /// When `node` is released, as far as its leaving the balancers goes:
    /// [`LOAD_BALANCER_DELAY`] after it was first seen out. `None`: still
    /// behind one (or never observed).
    pub fn released_at(&self, node: &str) -> Option<Timestamp> {
        let since = self.out_since.get(node)?;
        Some(
            since
                .checked_add(LOAD_BALANCER_DELAY)
                .unwrap_or(Timestamp::MAX),
        )
    }

    /// May `node`, whose drain began at `started`, be deleted at `now`?
    /// `Err(when)`: not yet, and when it may at the latest (its release,
    /// or the end of [`LOAD_BALANCER_PATIENCE`]).
    pub fn may_delete(
        &self,
        node: &str,
        started: Timestamp,
        now: Timestamp,
    ) -> Result<(), Option<Timestamp>> {
        if !self.tracking {
            return Ok(());
        }
        let patience = started
            .checked_add(LOAD_BALANCER_PATIENCE)
            .unwrap_or(Timestamp::MAX);
        let by = self.released_at(node).map_or(patience, |r| r.min(patience));
        if now >= by {
            Ok(())
        } else {
            Err(Some(by))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_balancer::{
        GroupInstance, InstanceGroupSpec, NetworkEndpoint, NetworkEndpointGroupSpec,
        NetworkEndpointType,
    };

    fn t(s: i64) -> Timestamp {
        let t0: Timestamp = "2026-12-02T10:00:00Z".parse().unwrap();
        t0 + SignedDuration::from_secs(s)
    }

    fn neg(nodes: &[&str]) -> NetworkEndpointGroup {
        NetworkEndpointGroup::new(
            "web.zone-a",
            NetworkEndpointGroupSpec {
                network_endpoint_type: NetworkEndpointType::GceVmIp,
                service: "default/web".into(),
                zone: "zone-a".into(),
                endpoints: nodes
                    .iter()
                    .map(|n| NetworkEndpoint {
                        instance: (*n).into(),
                        ip_address: "198.18.0.1".into(),
                        ipv6_address: None,
                    })
                    .collect(),
            },
        )
    }

    fn group(nodes: &[&str]) -> InstanceGroup {
        InstanceGroup::new(
            "k8s-ig--zone-a",
            InstanceGroupSpec {
                zone: "zone-a".into(),
                instances: nodes
                    .iter()
                    .map(|n| GroupInstance {
                        name: (*n).into(),
                        ip_address: "198.18.0.2".into(),
                        ipv6_address: None,
                    })
                    .collect(),
            },
        )
    }

    #[test]
    fn the_backends_are_the_negs_endpoints_and_the_groups_instances() {
        let behind = behind_balancers(&[neg(&["a", "b"])], &[group(&["b", "c"])]);
        let want: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        assert_eq!(behind, want);
        assert!(behind_balancers([], []).is_empty());
    }

    #[test]
    fn a_node_is_released_a_delay_after_it_leaves_the_last_balancer() {
        // spec: U1, C4 — a drained node is deleted only once the load
        // balancers have stopped sending it new connections.
        let mut o = OutOfBalancers::default();
        let all = ["a", "b"];
        o.observe(
            &behind_balancers(&[neg(&["a"])], &[group(&["a"])]),
            all,
            t(0),
        );
        assert_eq!(o.released_at("a"), None);
        assert_eq!(o.may_delete("a", t(0), t(10)), Err(Some(t(120))));
        // Out of the NEG, still in the group: not released.
        o.observe(&behind_balancers([], &[group(&["a"])]), all, t(20));
        assert_eq!(o.released_at("a"), None);
        // Out of both at 30 s: released at 35 s.
        o.observe(&BTreeSet::new(), all, t(30));
        o.observe(&BTreeSet::new(), all, t(33));
        assert_eq!(o.released_at("a"), Some(t(35)));
        assert_eq!(o.may_delete("a", t(0), t(34)), Err(Some(t(35))));
        assert_eq!(o.may_delete("a", t(0), t(35)), Ok(()));
    }

    #[test]
    fn a_node_that_comes_back_waits_again_and_a_gone_one_is_forgotten() {
        let mut o = OutOfBalancers::default();
        o.observe(&BTreeSet::new(), ["a"], t(0));
        assert_eq!(o.released_at("a"), Some(t(5)));
        o.observe(&behind_balancers(&[neg(&["a"])], []), ["a"], t(10));
        assert_eq!(o.released_at("a"), None);
        o.observe(&BTreeSet::new(), ["a"], t(20));
        assert_eq!(o.released_at("a"), Some(t(25)));
        o.observe(&BTreeSet::new(), [], t(30));
        assert_eq!(o.released_at("a"), None);
    }

    #[test]
    fn a_node_held_behind_a_balancer_goes_after_the_patience() {
        // A subsetting loop that never drops the node delays, never holds.
        let mut o = OutOfBalancers::default();
        o.observe(&behind_balancers(&[neg(&["a"])], []), ["a"], t(0));
        assert_eq!(o.may_delete("a", t(0), t(119)), Err(Some(t(120))));
        assert_eq!(o.may_delete("a", t(0), t(120)), Ok(()));
        // Released late: the patience still bounds it.
        o.observe(&BTreeSet::new(), ["a"], t(118));
        assert_eq!(o.may_delete("a", t(0), t(119)), Err(Some(t(120))));
        // Huge times do not overflow.
        assert_eq!(o.may_delete("a", Timestamp::MAX, Timestamp::MAX), Ok(()));
    }

    #[test]
    fn untracked_releases_every_node_at_once() {
        let o = OutOfBalancers::untracked();
        assert_eq!(o.may_delete("a", t(0), t(0)), Ok(()));
    }
}
