//! What both engines share: the addressing of a pod's link (pod side and
//! node side), the check of a map content before it is written, and safe
//! names.
//!
//! Pod side (in the pod's namespace, on `pod_ifname`): the pod's addresses
//! as host routes (`/32`, `/128 nodad`), the IPv4 gateway on-link and as the
//! default route, `fe80::1` as the IPv6 default router.
//!
//! Node side (on the link the node routes the pod through — the TAP of the
//! emulated engine, the veth's host end of the kernel engine): the gateway
//! `/32` and `fe80::1/64 nodad` (what the pod resolves as its router), host
//! routes to the pod's addresses, and the per-link sysctls of a link packets
//! are relayed through.
//!
//! Every step is an `ip … replace`, so running it again over a link that is
//! already configured changes nothing (a restarted agent adopting a link).

use anyhow::{bail, Context, Result};
use sluice_datapath::host::ServiceTables;
use sluice_datapath::maps::{v4_mapped, vip_marker_key, LocalKey, LocalLink};

use super::{MapContent, PodLink};
use crate::netlink::{sysctl, Netns};

/// The `SLUICE_LOCAL` keys of a pod: its addresses.
pub fn local_keys(pod: &PodLink) -> Vec<LocalKey> {
    let v4 = pod.ipv4.map(|a| LocalKey {
        addr: v4_mapped(a.octets()),
    });
    let v6 = pod.ipv6.map(|a| LocalKey { addr: a.octets() });
    v4.into_iter().chain(v6).collect()
}

/// What the program needs to hand a pod its packets on its link: `link`
/// (the engine's id of it), the pod interface's MAC (`pod_ifname` in
/// `pod_ns`) and the MAC the node's routing would have sent from
/// (`node_ifname` in `node_side`).
pub fn local_link(
    link: u32,
    pod_ns: &Netns,
    pod: &PodLink,
    node_side: &Netns,
    node_ifname: &str,
) -> Result<LocalLink> {
    Ok(LocalLink {
        ifindex: link,
        pod_mac: pod_ns.link_mac(&pod.pod_ifname)?,
        node_mac: node_side.link_mac(node_ifname)?,
    })
}

/// Keep `[A-Za-z0-9-]`, map the rest to `-`, at most 40 characters.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect()
}

/// Address the pod's end of its link, in the pod's namespace, and set it up.
pub fn configure_pod_side(pod_ns: &Netns, pod: &PodLink) -> Result<()> {
    let peer = pod.pod_ifname.as_str();
    pod_ns.ip(&["link", "set", "dev", "lo", "up"])?;
    pod_ns
        .ip(&["link", "set", "dev", peer, "up"])
        .with_context(|| format!("setting {peer} up in the pod"))?;
    if let Some(v4) = pod.ipv4 {
        pod_ns.ip(&["addr", "replace", &format!("{v4}/32"), "dev", peer])?;
        if let Some(gw) = pod.gateway4 {
            let gw = gw.to_string();
            pod_ns.ip(&["route", "replace", &gw, "dev", peer, "scope", "link"])?;
            pod_ns.ip(&["route", "replace", "default", "via", &gw, "dev", peer])?;
        }
    }
    if let Some(v6) = pod.ipv6 {
        pod_ns.ip(&[
            "addr",
            "replace",
            &format!("{v6}/128"),
            "dev",
            peer,
            "nodad",
        ])?;
        pod_ns.ip(&[
            "-6", "route", "replace", "default", "via", "fe80::1", "dev", peer,
        ])?;
    }
    Ok(())
}

/// Address the node's link towards the pod (`host`, in `node`), set it up
/// and route the pod's addresses through it.
pub fn configure_host_side(node: &Netns, host: &str, pod: &PodLink) -> Result<()> {
    let h = host.to_string();
    node.run(move || sysctl::prepare_link(&h))?
        .with_context(|| format!("setting sysctls of {host}"))?;
    node.ip(&["link", "set", "dev", host, "up"])
        .with_context(|| format!("setting {host} up"))?;
    if let Some(gw) = pod.gateway4 {
        node.ip(&["addr", "replace", &format!("{gw}/32"), "dev", host])?;
    }
    node.ip(&["addr", "replace", "fe80::1/64", "dev", host, "nodad"])?;
    if let Some(v4) = pod.ipv4 {
        node.ip(&["route", "replace", &format!("{v4}/32"), "dev", host])?;
    }
    if let Some(v6) = pod.ipv6 {
        node.ip(&["-6", "route", "replace", &format!("{v6}/128"), "dev", host])?;
    }
    Ok(())
}

/// Check a content's slot and Maglev windows (the program bounds-checks
/// every read anyway; this catches a broken layout at sync time, by name),
/// then add the VIP markers that let it drop port-less fragments.
pub fn checked_tables(content: &MapContent) -> Result<ServiceTables> {
    let t = &content.tables;
    let n_ep = t.endpoints.len() as u64;
    let n_mg = t.maglev.len() as u64;
    for (k, v) in &t.services {
        let ep_end = u64::from(v.ep_base) + u64::from(v.ready) + u64::from(v.terminating);
        if ep_end > n_ep {
            bail!(
                "service {:?}:{} has endpoint slots {}..{} past the {} endpoints",
                k.addr,
                k.port,
                v.ep_base,
                ep_end,
                n_ep
            );
        }
        if v.ready > 0 && u64::from(v.maglev_base) + u64::from(v.maglev_size) > n_mg {
            bail!(
                "service {:?}:{} has a Maglev window past the table ({} entries)",
                k.addr,
                k.port,
                n_mg
            );
        }
    }
    let mut out = t.clone();
    let vips: Vec<_> = t.services.keys().map(|k| k.addr).collect();
    for a in vips {
        out.services.entry(vip_marker_key(&a)).or_default();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_datapath::maps::{v4_mapped, Endpoint, ServiceKey, ServiceValue, PROTO_TCP};

    #[test]
    fn content_windows_are_checked() {
        let key = ServiceKey {
            addr: v4_mapped([198, 18, 100, 1]),
            port: 80,
            proto: PROTO_TCP,
            _pad: 0,
        };
        let mut c = MapContent::default();
        c.tables.services.insert(
            key,
            ServiceValue {
                id: 1,
                ep_base: 0,
                ready: 1,
                maglev_size: 251,
                ..Default::default()
            },
        );
        c.tables.endpoints = vec![Endpoint::default()];
        c.tables.maglev = vec![0; 251];
        let t = checked_tables(&c).unwrap();
        assert_eq!(t.services.len(), 2, "service and its VIP marker");
        c.tables.maglev.truncate(100);
        assert!(checked_tables(&c).is_err());
        c.tables.maglev = vec![0; 251];
        c.tables.endpoints.clear();
        assert!(checked_tables(&c).is_err());
    }

    #[test]
    fn names_are_safe() {
        assert_eq!(sanitize("node/a b.c"), "node-a-b-c");
    }
}
