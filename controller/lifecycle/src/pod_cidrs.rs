//! The range allocator: each Node gets `spec.podCIDRs`, one block of the
//! per-node mask size from each cluster CIDR (one IPv4 and/or one IPv6),
//! as kube-controller-manager's `RangeAllocator` hands them out.
//!
//! The allocator holds which blocks are used; it is rebuilt from the
//! Nodes after a restart ([`Allocator::rebuild`]), so what the Nodes say
//! is the truth. A node's podCIDRs, once set, are never changed here. The
//! lowest free block is given, so a cluster's addresses fill in order.

use std::collections::BTreeSet;

use ipnet::IpNet;
use sluice_model::k8s::Node;

use crate::LifecycleError;

/// Per-node mask size for IPv4 cluster CIDRs by default.
pub const DEFAULT_IPV4_MASK: u8 = 24;
/// Per-node mask size for IPv6 cluster CIDRs by default.
pub const DEFAULT_IPV6_MASK: u8 = 64;
/// A cluster CIDR holds at most 2^16 node blocks (upstream's limit: the
/// used set stays small).
pub const MAX_MASK_DIFF: u8 = 16;

const CIDR_FLAG: &str = "--cluster-cidr";
const MASK_FLAG: &str = "--node-cidr-mask-size";

/// One cluster CIDR and its used node blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    cidr: IpNet,
    mask: u8,
    /// Indices of the used blocks, counted from the CIDR's start.
    used: BTreeSet<u128>,
}

fn number(net: &IpNet) -> u128 {
    match net {
        IpNet::V4(n) => u128::from(u32::from(n.network())),
        IpNet::V6(n) => u128::from(n.network()),
    }
}

impl Range {
    fn blocks(&self) -> u128 {
        1u128 << (self.mask - self.cidr.prefix_len())
    }

    fn host_bits(&self) -> u8 {
        self.cidr.max_prefix_len() - self.mask
    }

    /// The block indices `net` covers in this range, if it lies in it.
    fn covered(&self, net: &IpNet) -> Option<std::ops::Range<u128>> {
        let inside = self.cidr.contains(net) || net.contains(&self.cidr);
        if !inside || self.cidr.max_prefix_len() != net.max_prefix_len() {
            return None;
        }
        let net = net.trunc();
        if net.prefix_len() <= self.cidr.prefix_len() {
            return Some(0..self.blocks());
        }
        let first = (number(&net) - number(&self.cidr)) >> self.host_bits();
        let count = 1u128 << self.mask.saturating_sub(net.prefix_len());
        Some(first..first + count)
    }

    fn block(&self, index: u128) -> IpNet {
        let start = number(&self.cidr) + (index << self.host_bits());
        let addr: std::net::IpAddr = match self.cidr {
            IpNet::V4(_) => {
                std::net::Ipv4Addr::from(u32::try_from(start).unwrap_or(u32::MAX)).into()
            }
            IpNet::V6(_) => std::net::Ipv6Addr::from(start).into(),
        };
        // The mask was checked against the family when the range was made.
        IpNet::new(addr, self.mask).unwrap_or(self.cidr)
    }

    fn lowest_free(&self) -> Option<u128> {
        (0..self.blocks()).find(|i| !self.used.contains(i))
    }
}

/// Pod CIDRs for Nodes, from one or two cluster CIDRs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocator {
    ranges: Vec<Range>,
}

impl Allocator {
    /// The cluster CIDRs (`--cluster-cidr`, one, or one IPv4 and one IPv6)
    /// with their per-node mask sizes (`--node-cidr-mask-size-ipv4/6`);
    /// a missing mask is the family's default.
    pub fn new(cidrs: &[&str], masks: &[Option<u8>]) -> Result<Self, LifecycleError> {
        let bad = |message: String| LifecycleError::Config {
            flag: CIDR_FLAG,
            message,
        };
        if cidrs.is_empty() || cidrs.len() > 2 {
            return Err(bad(format!(
                "{} CIDRs given; one, or one IPv4 and one IPv6",
                cidrs.len()
            )));
        }
        let mut ranges: Vec<Range> = Vec::new();
        for (i, text) in cidrs.iter().enumerate() {
            let cidr: IpNet = text
                .trim()
                .parse()
                .map_err(|_| bad(format!("{text:?} is not a CIDR")))?;
            if cidr.trunc() != cidr {
                return Err(bad(format!(
                    "{text} has host bits set (the network is {})",
                    cidr.trunc()
                )));
            }
            if ranges
                .iter()
                .any(|r| r.cidr.max_prefix_len() == cidr.max_prefix_len())
            {
                return Err(bad(format!(
                    "{text}: two CIDRs of one family; dual-stack takes one IPv4 and one IPv6"
                )));
            }
            let default = if cidr.max_prefix_len() == 32 {
                DEFAULT_IPV4_MASK
            } else {
                DEFAULT_IPV6_MASK
            };
            let mask = masks.get(i).copied().flatten().unwrap_or(default);
            let mask_error = |message: String| LifecycleError::Config {
                flag: MASK_FLAG,
                message,
            };
            if mask < cidr.prefix_len() || mask > cidr.max_prefix_len() {
                return Err(mask_error(format!(
                    "/{mask} does not fit in {cidr}: it must be between /{} and /{}",
                    cidr.prefix_len(),
                    cidr.max_prefix_len()
                )));
            }
            if mask - cidr.prefix_len() > MAX_MASK_DIFF {
                return Err(mask_error(format!(
                    "/{mask} splits {cidr} into more than 2^{MAX_MASK_DIFF} blocks; use a mask of at most /{}",
                    cidr.prefix_len() + MAX_MASK_DIFF
                )));
            }
            ranges.push(Range {
                cidr,
                mask,
                used: BTreeSet::new(),
            });
        }
        Ok(Allocator { ranges })
    }

    /// Forget what was used and take it again from the Nodes' podCIDRs
    /// (after a restart). CIDRs that do not parse are returned, naming the
    /// node and field; CIDRs outside every cluster CIDR are not ours and
    /// are skipped.
    pub fn rebuild(&mut self, nodes: &[Node]) -> Vec<LifecycleError> {
        for r in &mut self.ranges {
            r.used.clear();
        }
        let mut problems = Vec::new();
        for node in nodes {
            for (i, text) in node_cidrs(node).iter().enumerate() {
                match text.parse::<IpNet>() {
                    Ok(net) => self.mark(&net, true),
                    Err(_) => problems.push(LifecycleError::Invalid {
                        kind: "Node",
                        object: node.metadata.name.clone().unwrap_or_default(),
                        field: format!("spec.podCIDRs[{i}]"),
                        message: format!("{text:?} is not a CIDR"),
                    }),
                }
            }
        }
        problems
    }

    /// The podCIDRs to set on `node`: the lowest free block of each
    /// cluster CIDR, in the cluster CIDRs' order. `None` if the node has
    /// podCIDRs already (they are never changed). Nothing is taken if one
    /// of the ranges is full.
    pub fn allocate(&mut self, node: &Node) -> Result<Option<Vec<String>>, LifecycleError> {
        if !node_cidrs(node).is_empty() {
            return Ok(None);
        }
        let mut picks = Vec::new();
        for r in &self.ranges {
            let index = r
                .lowest_free()
                .ok_or_else(|| LifecycleError::CidrExhausted {
                    cidr: r.cidr.to_string(),
                    mask: r.mask,
                })?;
            picks.push(index);
        }
        let mut out = Vec::new();
        for (r, index) in self.ranges.iter_mut().zip(picks) {
            r.used.insert(index);
            out.push(r.block(index).to_string());
        }
        Ok(Some(out))
    }

    /// Free the blocks of a deleted node.
    pub fn release(&mut self, node: &Node) {
        for net in node_cidrs(node)
            .iter()
            .filter_map(|t| t.parse::<IpNet>().ok())
        {
            self.mark(&net, false);
        }
    }

    /// How many node blocks are in use, per cluster CIDR.
    pub fn used(&self) -> Vec<(String, usize)> {
        self.ranges
            .iter()
            .map(|r| (r.cidr.to_string(), r.used.len()))
            .collect()
    }

    fn mark(&mut self, net: &IpNet, used: bool) {
        for r in &mut self.ranges {
            let Some(blocks) = r.covered(net) else {
                continue;
            };
            for i in blocks {
                if used {
                    r.used.insert(i);
                } else {
                    r.used.remove(&i);
                }
            }
        }
    }
}

/// `spec.podCIDRs`, or the older single `spec.podCIDR`.
fn node_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    match spec.pod_cidrs.as_deref() {
        Some(list) if !list.is_empty() => list.to_vec(),
        _ => spec.pod_cidr.iter().cloned().collect(),
    }
}

#[cfg(test)]
mod tests;
