//! Backends' link-layer addresses, from the neighbour table of the load
//! balancer's namespace. The probes' connections make the kernel resolve
//! each backend (ARP), so a backend that answers a probe has an entry; the
//! table is read with `ip -j neigh` the project's way (the agent's
//! netlink helpers).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

/// Resolved addresses by IP.
pub type Macs = BTreeMap<IpAddr, [u8; 6]>;

#[derive(Deserialize)]
struct Entry {
    dst: String,
    lladdr: Option<String>,
    #[serde(default)]
    state: Vec<String>,
}

/// Entries of `ip -j neigh show dev IFACE` with a usable link-layer
/// address. `STALE`, `DELAY` and `PROBE` entries still name the right
/// node (the kernel is only re-checking); `FAILED` and `INCOMPLETE` do
/// not, and a `NOARP` entry is not a resolved neighbour.
pub fn parse(json: &str) -> Result<Macs, serde_json::Error> {
    if json.trim().is_empty() {
        return Ok(Macs::new());
    }
    let entries: Vec<Entry> = serde_json::from_str(json)?;
    let mut out = Macs::new();
    for e in entries {
        let unusable = e
            .state
            .iter()
            .any(|s| matches!(s.as_str(), "FAILED" | "INCOMPLETE" | "NOARP"));
        let (Some(ll), false) = (e.lladdr.as_deref(), unusable) else {
            continue;
        };
        let (Ok(ip), Some(mac)) = (e.dst.parse::<IpAddr>(), parse_mac(ll)) else {
            continue;
        };
        if mac != [0; 6] {
            out.insert(ip, mac);
        }
    }
    Ok(out)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The neighbours on `iface` in the calling thread's namespace.
pub fn read(iface: &str) -> anyhow::Result<Macs> {
    let out = sluice_agent::netlink::ip(&["-j", "neigh", "show", "dev", iface])?;
    Ok(parse(&out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_entries_are_kept_and_failed_ones_left_out() {
        let json = r#"[
          {"dst":"198.18.0.2","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]},
          {"dst":"198.18.0.3","lladdr":"02:00:00:00:00:03","state":["STALE"]},
          {"dst":"198.18.0.4","state":["FAILED"]},
          {"dst":"198.18.0.5","lladdr":"02:00:00:00:00:05","state":["INCOMPLETE"]},
          {"dst":"fd00::2","lladdr":"02:00:00:00:00:06","state":["DELAY"]},
          {"dst":"198.18.0.7","lladdr":"zz:00:00:00:00:07","state":["REACHABLE"]},
          {"dst":"198.18.0.8","lladdr":"00:00:00:00:00:00","state":["PERMANENT"]}
        ]"#;
        let m = parse(json).expect("parses");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(m.get(&ip("198.18.0.2")), Some(&[2, 0, 0, 0, 0, 2]));
        assert_eq!(m.get(&ip("198.18.0.3")), Some(&[2, 0, 0, 0, 0, 3]));
        assert_eq!(m.get(&ip("fd00::2")), Some(&[2, 0, 0, 0, 0, 6]));
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(parse("").expect("empty").is_empty());
        assert!(parse("{").is_err());
    }

    #[test]
    fn macs_are_six_hex_pairs() {
        assert_eq!(
            parse_mac("aa:BB:0c:d:ee:ff"),
            Some([0xaa, 0xbb, 0x0c, 0x0d, 0xee, 0xff])
        );
        assert_eq!(parse_mac("aa:bb:cc:dd:ee"), None);
        assert_eq!(parse_mac("aa:bb:cc:dd:ee:ff:00"), None);
        assert_eq!(parse_mac("aa:bb:cc:dd:ee:fff"), None);
        assert_eq!(parse_mac("aa::cc:dd:ee:ff"), None);
    }
}
