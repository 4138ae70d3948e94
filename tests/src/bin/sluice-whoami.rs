//! The who-am-I server as a program, for pods the agent itself runs: serves
//! TCP on every `--ip` × `--tcp` until it is signalled.
//!
//! `sluice-whoami --name web-1 --ip 198.19.1.10 --ip fd00:19:1::10 --tcp 8080`
//!
//! Without `--ip` it serves on every address of both families (0.0.0.0
//! and ::, one socket each), for a pod
//! that does not know its address in advance; without `--name` it answers
//! with `$HOSTNAME`, the pod's name as the agent (a container runtime)
//! sets it.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sluice_tests::WhoAmI;

fn main() -> Result<()> {
    let mut name = None;
    let mut ips: Vec<IpAddr> = Vec::new();
    let mut tcp: Vec<u16> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--name" => name = Some(value),
            "--ip" => ips.push(value.parse().with_context(|| format!("--ip {value}"))?),
            "--tcp" => tcp.push(value.parse().with_context(|| format!("--tcp {value}"))?),
            other => bail!("unknown flag {other}"),
        }
    }
    let name = match name {
        Some(n) => n,
        None => std::env::var("HOSTNAME").context("--name, or HOSTNAME, is required")?,
    };
    if ips.is_empty() {
        // Each family on its own socket (the IPv6 one is v6-only), so an
        // IPv4 client is seen as itself, not as a mapped IPv6 address.
        ips.push(IpAddr::from([0, 0, 0, 0]));
        ips.push(IpAddr::from([0u16; 8]));
    }
    if tcp.is_empty() {
        bail!("at least one --tcp is required");
    }
    let _server = WhoAmI::start_here(&name, &ips, &tcp, &[])?;
    // SIGTERM's default action ends the process: a graceful stop for a
    // server with no state to flush.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
