//! `cargo xtask test`: the one command that runs every test, as CI does.
//!
//! Installs what the tests need (idempotent), builds the agent binary the
//! end-to-end tests drive, then runs the whole workspace's tests. The netns
//! tests need root; they are not optional and are never skipped here.

use std::process::Command;

use anyhow::{bail, Context, Result};

#[derive(Debug, Clone, clap::Args)]
pub struct TestOpts {
    /// Skip `xtask setup` (the machine is known to be ready).
    #[arg(long)]
    pub no_setup: bool,
    /// Extra arguments passed to `cargo test` after `--`.
    #[arg(last = true)]
    pub rest: Vec<String>,
}

fn cargo(args: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("+ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed with {status}", args.join(" "));
    }
    Ok(())
}

pub fn run(opts: TestOpts) -> Result<()> {
    if !nix_is_root() {
        bail!("the test suite creates network namespaces and must run as root");
    }
    if !opts.no_setup {
        crate::setup::run()?;
    }
    // The end-to-end tests drive the agent binary; it must be current.
    cargo(&["build", "-p", "sluice-agent"])?;
    let mut args = vec!["test", "--workspace"];
    let rest: Vec<&str> = opts.rest.iter().map(String::as_str).collect();
    if !rest.is_empty() {
        args.push("--");
        args.extend(rest);
    }
    cargo(&args)
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
