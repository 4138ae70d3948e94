//! Node routes to other nodes' pod ranges, applied with iproute2. Only this
//! module touches the node's routing table for the control side.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::control::routes::PodRoute;

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub fn add_route(r: &PodRoute) -> Result<()> {
    // `replace` makes a restarted agent converge instead of failing on
    // routes it added before.
    ip(&[
        "route",
        "replace",
        &r.dst.to_string(),
        "via",
        &r.via.to_string(),
    ])
}

pub fn del_route(r: &PodRoute) -> Result<()> {
    ip(&["route", "del", &r.dst.to_string(), "via", &r.via.to_string()])
}
