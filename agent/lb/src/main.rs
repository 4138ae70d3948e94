//! `sluice-lb`: the load-balancer process (see the crate documentation).

fn main() -> anyhow::Result<()> {
    anyhow::bail!("sluice-lb: not wired yet (issue 11)")
}
