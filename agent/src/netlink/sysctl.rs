//! Network sysctls. `/proc/sys/net` shows the namespace of the thread that
//! opens it, so these act on the calling thread's namespace; use
//! [`super::Netns::run`] to target another one.

use anyhow::{Context, Result};

/// Write one sysctl given as path components below `/proc/sys`
/// (components, not a dotted key, so interface names with dots work).
pub fn set(parts: &[&str], value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", parts.join("/"));
    std::fs::write(&path, value).with_context(|| format!("writing {value} to {path}"))
}

pub fn get(parts: &[&str]) -> Result<String> {
    let path = format!("/proc/sys/{}", parts.join("/"));
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {path}"))?
        .trim()
        .to_string())
}

/// What the packet path needs of the node namespace, for either engine:
/// rewritten packets are routed by the node kernel (forwarding on), may
/// arrive on an interface their source is not routed through (`rp_filter`
/// off) and must not trigger ICMP redirects.
pub fn prepare_node() -> Result<()> {
    set(&["net", "ipv4", "ip_forward"], "1")?;
    set(&["net", "ipv6", "conf", "all", "forwarding"], "1")?;
    for scope in ["all", "default"] {
        set(&["net", "ipv4", "conf", scope, "rp_filter"], "0")?;
        set(&["net", "ipv4", "conf", scope, "send_redirects"], "0")?;
    }
    Ok(())
}

/// Per-interface settings for a link packets are relayed through.
pub fn prepare_link(ifname: &str) -> Result<()> {
    set(&["net", "ipv4", "conf", ifname, "rp_filter"], "0")?;
    set(&["net", "ipv4", "conf", ifname, "send_redirects"], "0")?;
    Ok(())
}

/// For the node's uplink: a `Cluster` flow is SNATed to the node address
/// before the node kernel sees it, so the kernel must accept packets whose
/// source is one of its own addresses arriving on that link.
pub fn prepare_uplink(ifname: &str) -> Result<()> {
    prepare_link(ifname)?;
    set(&["net", "ipv4", "conf", ifname, "accept_local"], "1")
}

/// Silence IPv6 on a link (no link-local address, no RS/ND/MLD).
pub fn disable_ipv6(ifname: &str, disable: bool) -> Result<()> {
    set(
        &["net", "ipv6", "conf", ifname, "disable_ipv6"],
        if disable { "1" } else { "0" },
    )
}
