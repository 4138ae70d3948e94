//! Project tasks: `cargo xtask <command>`. A thin dispatcher; each command
//! lives in its own module.

use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench;
mod ebpf;
mod fuzz;
mod kubectl;
mod lab;
mod propagation;
mod setup;
mod signals;
mod state_bench;
mod test;

#[derive(Parser)]
#[command(name = "xtask", about = "Sluice project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what building and testing need (Debian packages, rust-src,
    /// bpf-linker); idempotent, run as root on a fresh machine.
    Setup(setup::SetupOpts),
    /// Build the eBPF programs (ebpf/programs) for bpfel-unknown-none and
    /// print the object's path.
    BuildEbpf(ebpf::BuildEbpfOpts),
    /// A two-node cluster in network namespaces, real traffic through
    /// LoadBalancer VIPs, what happened, then teardown.
    Lab(lab::LabOpts),
    /// Every test of the workspace, then each fuzz target for a minute, as
    /// CI runs it (root; runs setup first).
    Test(test::TestOpts),
    /// The controller's fuzz targets (controller/fuzz), each for a bounded
    /// time; crash inputs are kept under the target directory.
    Fuzz(fuzz::FuzzOpts),
    /// Whole-path benchmark: kernel routing, iptables, nftables and both
    /// Sluice engines on one veth topology; writes docs/benchmarks.md.
    Bench(bench::BenchOpts),
    /// Agent memory at 10 000 Services x 10 endpoints and after shrinking,
    /// BPF map memory, apply time, idle CPU with a 50 MB state file;
    /// writes docs/benchmarks.md.
    BenchState(state_bench::StateBenchOpts),
    /// Endpoint changes from `kubectl apply` to every agent's datapath,
    /// with 20 agents on a controller-run cluster (p50, p99).
    BenchPropagation(propagation::PropagationOpts),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Setup(o) => setup::run_with(o),
        Cmd::BuildEbpf(o) => ebpf::run(o),
        Cmd::Lab(o) => {
            // The lab must work on a fresh machine too.
            setup::run()?;
            lab::run(o)
        }
        Cmd::Test(o) => test::run(o),
        Cmd::Fuzz(o) => fuzz::run(o),
        Cmd::Bench(o) => {
            setup::run()?;
            bench::run(o)
        }
        Cmd::BenchState(o) => {
            setup::run()?;
            state_bench::run(o)
        }
        Cmd::BenchPropagation(o) => {
            setup::run()?;
            propagation::run(o)
        }
    }
}
