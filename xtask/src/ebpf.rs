//! `cargo xtask build-ebpf`: build `ebpf/programs` for `bpfel-unknown-none`
//! with the machine's stable toolchain.
//!
//! `core` is rebuilt for the BPF target (`-Z build-std=core`, allowed on
//! stable by `RUSTC_BOOTSTRAP=1`, for this child cargo only) and linked by
//! `bpf-linker` (installed by `cargo xtask setup`), which also emits BTF.
//! The output goes to `target/bpf`, a target directory of its own, so the
//! BPF build never waits on the host workspace's build lock.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

pub const TARGET: &str = "bpfel-unknown-none";
/// The `[[bin]]` of `ebpf/programs`: the ELF object the agent loads.
pub const OBJECT_NAME: &str = "sluice";
/// The other `[[bin]]`: the load balancer's object (`sluice-lb` loads it),
/// built by the same `cargo build` next to the agent's.
pub const LB_OBJECT_NAME: &str = "sluice-lb";

#[derive(Debug, Clone, Default, clap::Args)]
pub struct BuildEbpfOpts {
    /// Release profile (what the agent and the benchmarks load).
    #[arg(long)]
    pub release: bool,
    /// Extra arguments passed to `cargo build`.
    #[arg(last = true)]
    pub rest: Vec<String>,
}

pub fn run(opts: BuildEbpfOpts) -> Result<()> {
    let obj = build_with(opts.release, &opts.rest)?;
    println!("{}", obj.display());
    println!("{}", obj.with_file_name(LB_OBJECT_NAME).display());
    Ok(())
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repository root")
        .to_path_buf()
}

/// Where `build` puts the object for a profile.
pub fn object_path(release: bool) -> PathBuf {
    root()
        .join("target/bpf")
        .join(TARGET)
        .join(if release { "release" } else { "debug" })
        .join(OBJECT_NAME)
}

/// Flags for the BPF target: debug info lets bpf-linker emit BTF
/// (`--btf`: verifier logs with source lines). `SLUICE_BPF_RUSTFLAGS` adds
/// more, e.g. `-C link-arg=--llvm-args=-bpf-stack-size=4096` to get an
/// object past LLVM's 512-byte stack check and see what the verifier says.
fn rustflags() -> String {
    let mut f = String::from("-C debuginfo=2 -C link-arg=--btf");
    if let Ok(extra) = std::env::var("SLUICE_BPF_RUSTFLAGS") {
        f.push(' ');
        f.push_str(&extra);
    }
    f
}

/// Build the programs; the path of the ELF object (for `test`, `bench`).
#[allow(dead_code)]
pub fn build(release: bool) -> Result<PathBuf> {
    build_with(release, &[])
}

fn build_with(release: bool, extra: &[String]) -> Result<PathBuf> {
    let linker = crate::setup::bpf_linker_path()
        .context("bpf-linker does not run here; install it with `cargo xtask setup`")?;
    let rust_src = crate::setup::sysroot()?.join("lib/rustlib/src/rust/library/core");
    if !rust_src.exists() {
        bail!("rust-src is missing; install it with `cargo xtask setup`");
    }

    let root = root();
    let dir = root.join("ebpf/programs");
    let target_dir = root.join("target/bpf");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&dir)
        .args(["build", "--target", TARGET, "-Z", "build-std=core"])
        .arg("--target-dir")
        .arg(&target_dir);
    if release {
        cmd.arg("--release");
    }
    cmd.args(extra)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_BPFEL_UNKNOWN_NONE_LINKER", &linker)
        .env("CARGO_TARGET_BPFEL_UNKNOWN_NONE_RUSTFLAGS", rustflags())
        // Host-wide flags must not leak into the BPF build.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    println!(
        "build-ebpf: RUSTC_BOOTSTRAP=1 cargo build --target {TARGET} -Z build-std=core{} \
         --target-dir {} (in {}, linker {})",
        if release { " --release" } else { "" },
        target_dir.display(),
        dir.display(),
        linker.display()
    );
    let status = cmd.status().context("could not start cargo")?;
    if !status.success() {
        bail!("building ebpf/programs for {TARGET} failed with {status}");
    }
    let obj = object_path(release);
    for o in [obj.clone(), obj.with_file_name(LB_OBJECT_NAME)] {
        if !o.exists() {
            bail!("the build succeeded but {} is missing", o.display());
        }
    }
    Ok(obj)
}
