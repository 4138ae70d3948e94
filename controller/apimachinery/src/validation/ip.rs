//! IP addresses and CIDRs as apimachinery's strict checks read them, and
//! the "special" addresses a Service or an EndpointSlice may not name.

use std::net::IpAddr;

use super::field::{Error, ErrorList, Path};

const NOT_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const NOT_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// An IPv4 address Go's lenient parser takes but the strict one refuses:
/// a part with a leading zero.
fn has_leading_zero(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|c| c.is_ascii_digit()))
        && parts.iter().any(|p| p.len() > 1 && p.starts_with('0'))
}

pub fn parse(v: &str) -> Option<IpAddr> {
    v.parse().ok()
}

/// `IsValidIP`: the errors for `v` at `path`.
pub fn valid_ip(path: &Path, v: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(ip) = parse(v) else {
        let msg = if has_leading_zero(v) {
            "must not have leading 0s"
        } else {
            NOT_IP
        };
        errs.push(Error::invalid(path, v, msg));
        return errs;
    };
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            errs.push(Error::invalid(
                path,
                v,
                "must not be an IPv4-mapped IPv6 address",
            ));
            return errs;
        }
    }
    let canon = ip.to_string();
    if canon != v {
        errs.push(Error::invalid(
            path,
            v,
            format!("must be in canonical form ({canon:?})"),
        ));
    }
    errs
}

/// `IsValidCIDR`.
pub fn valid_cidr(path: &Path, v: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let parsed = v.split_once('/').and_then(|(ip, bits)| {
        let ip: IpAddr = ip.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits: u8 = bits.parse().ok().filter(|b| *b <= max)?;
        Some((ip, bits))
    });
    let Some((ip, bits)) = parsed else {
        let leading = v
            .split_once('/')
            .is_some_and(|(ip, b)| has_leading_zero(ip) || (b.len() > 1 && b.starts_with('0')));
        let msg = if leading {
            "must not have leading 0s in IP or prefix length"
        } else {
            NOT_CIDR
        };
        errs.push(Error::invalid(path, v, msg));
        return errs;
    };
    let masked = mask(ip, bits);
    if masked != ip {
        errs.push(Error::invalid(
            path,
            v,
            "must not have bits set beyond the prefix length",
        ));
        return errs;
    }
    let canon = format!("{masked}/{bits}");
    if canon != v {
        errs.push(Error::invalid(
            path,
            v,
            format!("must be in canonical form ({canon:?})"),
        ));
    }
    errs
}

fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// `ValidateNonSpecialIP`: no unspecified, loopback or link-local address.
pub fn non_special(path: &Path, v: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(ip) = parse(v) else {
        errs.push(Error::invalid(path, v, "must be a valid IP address"));
        return errs;
    };
    if ip.is_unspecified() {
        errs.push(Error::invalid(
            path,
            v,
            format!("may not be unspecified ({v})"),
        ));
    }
    if ip.is_loopback() {
        errs.push(Error::invalid(
            path,
            v,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    let (link_local, ll_multicast) = match ip {
        IpAddr::V4(a) => (a.is_link_local(), a.octets()[..3] == [224, 0, 0]),
        IpAddr::V6(a) => {
            let s = a.segments();
            (s[0] & 0xffc0 == 0xfe80, s[0] & 0xff0f == 0xff02)
        }
    };
    if link_local {
        errs.push(Error::invalid(
            path,
            v,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if ll_multicast {
        errs.push(Error::invalid(
            path,
            v,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

pub fn is_v6(v: &str) -> bool {
    matches!(parse(v), Some(IpAddr::V6(_)))
}
