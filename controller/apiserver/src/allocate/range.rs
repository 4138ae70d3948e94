//! `--service-cluster-ip-range`: one CIDR or two of different families,
//! the addresses a Service may get from each, and where the static block
//! ends (KEP-3070). Pure.
//!
//! As kube-apiserver: the network's first address is never handed out,
//! nor, in IPv4, its last (broadcast); a range holds at most 2^20
//! addresses (`/12` in IPv4, `/108` in IPv6).

use std::fmt;
use std::net::IpAddr;

use super::static_block;

pub const FLAG: &str = "--service-cluster-ip-range";

/// The default: kubeadm's (kube-apiserver's own, 10.0.0.0/24, has 254
/// addresses, and most clusters are set up with kubeadm's).
pub const DEFAULT: &str = "10.96.0.0/12";

/// Host bits a range may have at most (kube-apiserver's limit).
const MAX_HOST_BITS: u32 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The API's spelling (`spec.ipFamilies`).
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        match s {
            "IPv4" => Some(Family::V4),
            "IPv6" => Some(Family::V6),
            _ => None,
        }
    }

    pub fn other(self) -> Family {
        match self {
            Family::V4 => Family::V6,
            Family::V6 => Family::V4,
        }
    }

    fn bits(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// One CIDR of Service addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    family: Family,
    /// The network address, as a number.
    network: u128,
    prefix: u32,
}

impl IpRange {
    /// `198.18.0.0/16`, `fd00:198:18::/108`; the address must be the
    /// network's own (no host bits), as kube-apiserver's parser requires.
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let (addr, len) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a CIDR (address/prefix length)"))?;
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?}: {addr:?} is not an IP address"))?;
        let family = Family::of(&ip);
        let prefix: u32 = len
            .parse()
            .ok()
            .filter(|p| *p <= family.bits())
            .ok_or_else(|| format!("{text:?}: {len:?} is not a prefix length"))?;
        let host_bits = family.bits() - prefix;
        if host_bits > MAX_HOST_BITS {
            return Err(format!(
                "{text} is too large: for {}-bit addresses the prefix length must be at least {}",
                family.bits(),
                family.bits() - MAX_HOST_BITS
            ));
        }
        let network = to_number(&ip);
        if network & ((1u128 << host_bits) - 1) != 0 {
            return Err(format!(
                "{text} has host bits set (the network is {}/{prefix})",
                to_ip(family, network >> host_bits << host_bits)
            ));
        }
        let r = IpRange {
            family,
            network,
            prefix,
        };
        if r.size() == 0 {
            return Err(format!("{text} has no address to hand out"));
        }
        Ok(r)
    }

    pub fn family(&self) -> Family {
        self.family
    }

    /// How many addresses may be handed out.
    pub fn size(&self) -> u128 {
        let all = 1u128 << (self.family.bits() - self.prefix);
        let excluded = match self.family {
            Family::V4 => 2,
            Family::V6 => 1,
        };
        all.saturating_sub(excluded)
    }

    /// The first addresses, reserved for addresses users ask for: chosen
    /// dynamically only once the rest is taken (KEP-3070:
    /// min(max(16, cidr size / 16), 256), none below 17 addresses).
    pub fn static_size(&self) -> u128 {
        let cidr = 1u128 << (self.family.bits() - self.prefix);
        static_block(cidr, 16, 256, 16).min(self.size())
    }

    /// The offset of `ip` among the addresses handed out, if it is one.
    pub fn offset(&self, ip: &IpAddr) -> Option<u128> {
        if Family::of(ip) != self.family {
            return None;
        }
        let n = to_number(ip);
        let first = self.network + 1;
        (n >= first && n - first < self.size()).then(|| n - first)
    }

    /// The address at `offset` (below `size()`).
    pub fn at(&self, offset: u128) -> IpAddr {
        to_ip(self.family, self.network + 1 + offset)
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", to_ip(self.family, self.network), self.prefix)
    }
}

fn to_number(ip: &IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(*v4)),
        IpAddr::V6(v6) => u128::from(*v6),
    }
}

fn to_ip(family: Family, n: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(u32::try_from(n).unwrap_or(u32::MAX).into()),
        Family::V6 => IpAddr::V6(n.into()),
    }
}

/// The flag's value: one CIDR, or two (comma-separated) of different
/// families, the first the cluster's primary family.
pub fn parse_flag(value: &str) -> Result<Vec<IpRange>, String> {
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.len() > 2 {
        return Err(format!(
            "{FLAG}: {value:?} has {} CIDRs; at most two (one IPv4, one IPv6)",
            parts.len()
        ));
    }
    let ranges = parts
        .iter()
        .map(|p| IpRange::parse(p).map_err(|e| format!("{FLAG}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if let [a, b] = ranges.as_slice() {
        if a.family == b.family {
            return Err(format!(
                "{FLAG}: {a} and {b} are both {}; two CIDRs must be one IPv4 and one IPv6 (dual-stack)",
                a.family.as_str()
            ));
        }
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ipv4_skips_the_network_and_broadcast_addresses() {
        let r = IpRange::parse("198.18.0.0/29").expect("range");
        assert_eq!(r.size(), 6);
        assert_eq!(r.at(0), ip("198.18.0.1"));
        assert_eq!(r.at(5), ip("198.18.0.6"));
        assert_eq!(r.offset(&ip("198.18.0.0")), None);
        assert_eq!(r.offset(&ip("198.18.0.7")), None);
        assert_eq!(r.offset(&ip("198.18.0.6")), Some(5));
        assert_eq!(r.offset(&ip("198.18.0.8")), None);
        assert_eq!(r.offset(&ip("fd00::1")), None);
    }

    #[test]
    fn ipv6_skips_only_the_first_address() {
        let r = IpRange::parse("fd00:198:18::/120").expect("range");
        assert_eq!(r.size(), 255);
        assert_eq!(r.at(254), ip("fd00:198:18::ff"));
        assert_eq!(r.offset(&ip("fd00:198:18::")), None);
        assert_eq!(r.to_string(), "fd00:198:18::/120");
    }

    #[test]
    fn the_static_block_follows_kep_3070() {
        let block = |c: &str| IpRange::parse(c).expect("range").static_size();
        assert_eq!(block("198.18.0.0/28"), 0); // 16 addresses: none
        assert_eq!(block("198.18.0.0/27"), 16); // the minimum
        assert_eq!(block("198.18.0.0/20"), 256); // 4096 / 16
        assert_eq!(block("198.18.0.0/21"), 128); // 2048 / 16
        assert_eq!(block("198.18.0.0/16"), 256); // the maximum
    }

    #[test]
    fn the_flag_takes_one_cidr_or_one_of_each_family() {
        let two = parse_flag("198.18.0.0/16,fd00:198:18::/108").expect("dual");
        assert_eq!(
            two.iter().map(|r| r.family()).collect::<Vec<_>>(),
            vec![Family::V4, Family::V6]
        );
        for (bad, words) in [
            ("198.18.0.0/16,198.19.0.0/16", "both IPv4"),
            ("198.18.0.0/16,fd00::/108,fd01::/108", "at most two"),
            ("198.18.0.1/16", "host bits"),
            ("198.18.0.0", "not a CIDR"),
            ("198.18.0.0/33", "prefix length"),
            ("fd00::/64", "too large"),
            ("198.0.0.0/8", "too large"),
            ("x/16", "not an IP"),
            ("198.18.0.0/31", "no address"),
        ] {
            let e = parse_flag(bad).expect_err(bad);
            assert!(e.starts_with(FLAG) && e.contains(words), "{bad}: {e}");
        }
    }
}
