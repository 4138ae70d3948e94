//! Pod addresses for this node's pods that have none yet, as the kubelet's
//! CNI host-local IPAM hands them out (pure): one address per family of the
//! node's `spec.podCIDRs`, never the network address nor the first host
//! address (`.1`, `::1`: the node's gateway may take it), never the IPv4
//! broadcast, never an address another pod of the node holds.
//!
//! What a pod's `status.podIPs` gives is its address: after the status
//! writer's round trip, and after an agent restart, the status is the
//! record. Until then the assignment is kept here, so a pod keeps its
//! address across rebuilds; it is released when the pod leaves (deleted,
//! terminal) or shows addresses of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// A pod that wants addresses: its key and what its status already gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub key: String,
    /// `status.podIPs`; empty: the pod needs addresses.
    pub status_ips: Vec<IpAddr>,
}

/// No address left for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeFull {
    pub pod: String,
    pub cidr: IpNet,
}

impl std::fmt::Display for RangeFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no free address in the node's pod CIDR {} for Pod {}: every host address is taken",
            self.cidr, self.pod
        )
    }
}

/// The addresses this agent handed out and no status shows yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipam {
    assigned: BTreeMap<String, Vec<IpAddr>>,
}

/// What [`Ipam::assign`] decided for the pods without status addresses.
pub type Assigned = BTreeMap<String, Result<Vec<IpAddr>, RangeFull>>;

impl Ipam {
    /// Addresses for every claim without status addresses, from `cidrs`
    /// (the first CIDR of each family; none: nothing is assigned, as a
    /// node without pod CIDRs gives its pods no network). `claims` are the
    /// node's non-terminal, non-host-network pods; anything kept for a pod
    /// not among them is released.
    pub fn assign(&mut self, cidrs: &[IpNet], claims: &[Claim]) -> Assigned {
        let mut pools: Vec<IpNet> = Vec::new();
        for c in cidrs {
            if !pools.iter().any(|p| same_family(p, c)) {
                pools.push(*c);
            }
        }
        let wanting: BTreeSet<&str> = claims
            .iter()
            .filter(|c| c.status_ips.is_empty())
            .map(|c| c.key.as_str())
            .collect();
        // A pod whose status now gives addresses (or that left) no longer
        // needs what was kept for it.
        self.assigned.retain(|k, _| wanting.contains(k.as_str()));
        let mut used: BTreeSet<IpAddr> = claims
            .iter()
            .flat_map(|c| c.status_ips.iter().copied())
            .collect();
        // Kept assignments stay while they still fit the node's CIDRs and
        // nobody's status claims them (the status wins: it is the record).
        let mut keep: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for (key, ips) in std::mem::take(&mut self.assigned) {
            let fits = ips.len() == pools.len()
                && pools
                    .iter()
                    .all(|p| ips.iter().any(|ip| p.contains(ip) && usable(p, *ip)))
                && ips.iter().all(|ip| !used.contains(ip));
            if fits {
                used.extend(ips.iter().copied());
                keep.insert(key, ips);
            }
        }
        let mut out = Assigned::new();
        if pools.is_empty() {
            return out;
        }
        let mut claims: Vec<&Claim> = claims.iter().collect();
        claims.sort_by(|a, b| a.key.cmp(&b.key));
        for c in claims.into_iter().filter(|c| c.status_ips.is_empty()) {
            if let Some(ips) = keep.get(&c.key) {
                out.insert(c.key.clone(), Ok(ips.clone()));
                continue;
            }
            let mut ips = Vec::new();
            let mut full = None;
            for p in &pools {
                match first_free(p, &used) {
                    Some(ip) => ips.push(ip),
                    None => {
                        full = Some(RangeFull {
                            pod: c.key.clone(),
                            cidr: *p,
                        });
                        break;
                    }
                }
            }
            if let Some(f) = full {
                out.insert(c.key.clone(), Err(f));
                continue;
            }
            used.extend(ips.iter().copied());
            keep.insert(c.key.clone(), ips.clone());
            out.insert(c.key.clone(), Ok(ips));
        }
        self.assigned = keep;
        out
    }
}

fn same_family(a: &IpNet, b: &IpNet) -> bool {
    matches!(
        (a, b),
        (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
    )
}

/// The offsets of `net` a pod may get: from 2 (after the network address
/// and the gateway's `.1`) to the last, or the one before it for IPv4
/// (the broadcast). `None`: too small to hold any.
fn offsets(net: &IpNet) -> Option<(u128, u128)> {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    let size: u128 = if host_bits >= 128 {
        u128::MAX
    } else {
        1u128 << host_bits
    };
    let last = match net {
        IpNet::V4(_) => size.checked_sub(2)?,
        IpNet::V6(_) => size - 1,
    };
    (last >= 2).then_some((2, last))
}

fn base(net: &IpNet) -> u128 {
    match net.network() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn at(net: &IpNet, offset: u128) -> IpAddr {
    let n = base(net).wrapping_add(offset);
    match net {
        // The offset is below the IPv4 range's size, so this fits in 32 bits.
        IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(n as u32)),
        IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

fn offset_of(net: &IpNet, ip: IpAddr) -> Option<u128> {
    let n = match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    net.contains(&ip).then(|| n.wrapping_sub(base(net)))
}

/// Whether a pod may hold `ip` of `net`.
fn usable(net: &IpNet, ip: IpAddr) -> bool {
    match (offsets(net), offset_of(net, ip)) {
        (Some((lo, hi)), Some(o)) => o >= lo && o <= hi,
        _ => false,
    }
}

/// The lowest usable address of `net` not in `used`. At most
/// `used.len() + 1` candidates are looked at, so a /64 costs no more than
/// a /24.
fn first_free(net: &IpNet, used: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    let (lo, hi) = offsets(net)?;
    let mut o = lo;
    loop {
        let ip = at(net, o);
        if !used.contains(&ip) {
            return Some(ip);
        }
        if o >= hi {
            return None;
        }
        o += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("test CIDR")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn claim(key: &str, ips: &[&str]) -> Claim {
        Claim {
            key: key.into(),
            status_ips: ips.iter().map(|s| ip(s)).collect(),
        }
    }

    fn ok(a: &Assigned, key: &str) -> Vec<IpAddr> {
        match a.get(key) {
            Some(Ok(ips)) => ips.clone(),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn one_address_per_family_skipping_the_network_and_gateway_addresses() {
        let mut ipam = Ipam::default();
        let cidrs = [net("198.19.3.0/24"), net("fd00:19:3::/64")];
        let a = ipam.assign(&cidrs, &[claim("default/a", &[]), claim("default/b", &[])]);
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.2"), ip("fd00:19:3::2")]);
        assert_eq!(ok(&a, "default/b"), [ip("198.19.3.3"), ip("fd00:19:3::3")]);
    }

    #[test]
    fn addresses_other_pods_hold_in_their_status_are_skipped_and_theirs_kept() {
        let mut ipam = Ipam::default();
        let cidrs = [net("198.19.3.0/24")];
        let a = ipam.assign(
            &cidrs,
            &[claim("default/a", &[]), claim("default/z", &["198.19.3.2"])],
        );
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.3")]);
        assert!(
            !a.contains_key("default/z"),
            "a status address is kept as is"
        );
    }

    #[test]
    fn a_pod_keeps_its_address_across_rebuilds_and_releases_it_when_it_leaves() {
        let mut ipam = Ipam::default();
        let cidrs = [net("198.19.3.0/24")];
        let a = ipam.assign(&cidrs, &[claim("default/b", &[])]);
        assert_eq!(ok(&a, "default/b"), [ip("198.19.3.2")]);
        // A pod named earlier arrives: b keeps its address.
        let a = ipam.assign(&cidrs, &[claim("default/a", &[]), claim("default/b", &[])]);
        assert_eq!(ok(&a, "default/b"), [ip("198.19.3.2")]);
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.3")]);
        // b leaves: its address is free again.
        let a = ipam.assign(&cidrs, &[claim("default/a", &[]), claim("default/c", &[])]);
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.3")]);
        assert_eq!(ok(&a, "default/c"), [ip("198.19.3.2")]);
    }

    #[test]
    fn once_the_status_shows_the_address_it_is_the_record() {
        let mut ipam = Ipam::default();
        let cidrs = [net("198.19.3.0/24")];
        ipam.assign(&cidrs, &[claim("default/a", &[])]);
        let a = ipam.assign(&cidrs, &[claim("default/a", &["198.19.3.2"])]);
        assert!(a.is_empty());
        assert_eq!(ipam, Ipam::default(), "nothing kept once written back");
    }

    #[test]
    fn a_full_range_is_a_fault_naming_the_pod_and_the_cidr() {
        let mut ipam = Ipam::default();
        // A /30 has 4 addresses: network, .1 (gateway), .2, broadcast.
        let cidrs = [net("198.19.3.0/30")];
        let a = ipam.assign(&cidrs, &[claim("default/a", &[]), claim("default/b", &[])]);
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.2")]);
        let e = a.get("default/b").cloned().expect("b decided");
        let e = e.expect_err("no room for b");
        assert_eq!(e.cidr, cidrs[0]);
        let msg = e.to_string();
        assert!(
            msg.contains("default/b") && msg.contains("198.19.3.0/30"),
            "{msg}"
        );
        // Too small to hold any pod at all.
        let a = ipam.assign(&[net("198.19.3.0/31")], &[claim("default/a", &[])]);
        assert!(a.get("default/a").is_some_and(Result::is_err));
    }

    #[test]
    fn no_pod_cidrs_no_addresses() {
        let mut ipam = Ipam::default();
        assert!(ipam.assign(&[], &[claim("default/a", &[])]).is_empty());
    }

    #[test]
    fn a_kept_address_another_pods_status_now_claims_is_replaced() {
        let mut ipam = Ipam::default();
        let cidrs = [net("198.19.3.0/24")];
        ipam.assign(&cidrs, &[claim("default/a", &[])]);
        let a = ipam.assign(
            &cidrs,
            &[claim("default/a", &[]), claim("default/x", &["198.19.3.2"])],
        );
        assert_eq!(ok(&a, "default/a"), [ip("198.19.3.3")]);
    }

    #[test]
    fn a_kept_address_outside_a_changed_cidr_is_replaced() {
        let mut ipam = Ipam::default();
        ipam.assign(&[net("198.19.3.0/24")], &[claim("default/a", &[])]);
        let a = ipam.assign(&[net("198.19.4.0/24")], &[claim("default/a", &[])]);
        assert_eq!(ok(&a, "default/a"), [ip("198.19.4.2")]);
    }

    #[test]
    fn ipv6_ranges_use_their_last_address_too() {
        let mut ipam = Ipam::default();
        // fd00::/126: ::0 network, ::1 gateway, ::2 and ::3 for pods.
        let cidrs = [net("fd00::/126")];
        let claims = [
            claim("default/a", &[]),
            claim("default/b", &[]),
            claim("default/c", &[]),
        ];
        let a = ipam.assign(&cidrs, &claims);
        assert_eq!(ok(&a, "default/b"), [ip("fd00::3")]);
        assert!(a.get("default/c").is_some_and(Result::is_err));
    }
}
