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
//!
//! `--serve-after-term SECONDS` keeps serving that long after SIGTERM before
//! exiting, as a server behind a load balancer does (a `preStop` sleep): the
//! load balancer needs its unhealthy threshold to stop sending new
//! connections, and those arriving meanwhile are still answered.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sluice_tests::WhoAmI;

fn main() -> Result<()> {
    let mut name = None;
    let mut ips: Vec<IpAddr> = Vec::new();
    let mut tcp: Vec<u16> = Vec::new();
    let mut linger: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--name" => name = Some(value),
            "--ip" => ips.push(value.parse().with_context(|| format!("--ip {value}"))?),
            "--tcp" => tcp.push(value.parse().with_context(|| format!("--tcp {value}"))?),
            "--serve-after-term" => {
                linger = Some(
                    value
                        .parse()
                        .with_context(|| format!("--serve-after-term {value}"))?,
                )
            }
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
    // SIGTERM is blocked before any thread starts (threads inherit the
    // mask), so only the wait below takes it.
    let term = linger.map(|_| block_sigterm()).transpose()?;
    let _server = WhoAmI::start_here(&name, &ips, &tcp, &[])?;
    match (term, linger) {
        (Some(set), Some(secs)) => {
            set.wait().context("waiting for SIGTERM")?;
            std::thread::sleep(Duration::from_secs(secs));
            Ok(())
        }
        // SIGTERM's default action ends the process: a graceful stop for a
        // server with no state to flush.
        _ => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
}

fn block_sigterm() -> Result<nix::sys::signal::SigSet> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)
        .context("blocking SIGTERM")?;
    Ok(set)
}
