//! `cargo xtask test`: the one command that runs every test, as CI does.
//!
//! Installs what the tests need (idempotent), checks the formatting
//! (`cargo fmt --check`), builds the BPF object and the
//! tests (with them the binaries the end-to-end tests drive), then runs the
//! whole workspace's test binaries a few at a time, the long ones in shards
//! (see [`lanes`]; the fuzz targets build beside them, at the lowest
//! priority), then each of the controller's fuzz targets for
//! [`crate::fuzz::CI_SECONDS`]. The netns tests need root; they are not
//! optional and are never skipped here.

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

mod lanes;
mod leftovers;

#[derive(Debug, Clone, clap::Args)]
pub struct TestOpts {
    /// Skip `xtask setup` (the machine is known to be ready).
    #[arg(long)]
    pub no_setup: bool,
    /// Skip the fuzz targets (CI never does).
    #[arg(long)]
    pub no_fuzz: bool,
    /// Extra arguments for every test binary (libtest filters, `--nocapture`);
    /// with them the long binaries run whole, not in shards.
    #[arg(last = true)]
    pub rest: Vec<String>,
}

/// A cargo command for the test build. Incremental caches pay only on a
/// rebuild; CI builds once from a clean clone, and the caches were about a
/// fifth of the target directory (a full disk failed a CI run). A caller
/// who sets `CARGO_INCREMENTAL` keeps their choice.
fn cargo_command(args: &[&str]) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("+ cargo {}", args.join(" "));
    let mut cmd = Command::new(cargo);
    cmd.args(args);
    cmd.envs(cargo_env());
    cmd
}

/// What every cargo the suite starts is given: the test build and the
/// doc-test pass must agree on `CARGO_INCREMENTAL`, which is part of each
/// workspace crate's fingerprint. When only the build had it, the doc-test
/// pass rebuilt every workspace crate (4 min in CI, beside the tests).
fn cargo_env() -> Vec<(String, String)> {
    match std::env::var_os("CARGO_INCREMENTAL") {
        Some(_) => Vec::new(),
        None => vec![("CARGO_INCREMENTAL".to_string(), "0".to_string())],
    }
}

pub fn run(opts: TestOpts) -> Result<()> {
    if !nix_is_root() {
        bail!("the test suite creates network namespaces and must run as root");
    }
    if !opts.no_setup {
        crate::setup::run()?;
    }
    warn_if_disk_is_short();
    // Formatting first: seconds, and a red suite for a missed `cargo fmt`
    // rather than a review's remark.
    let fmt = cargo_command(&["fmt", "--all", "--", "--check"])
        .status()
        .context("running cargo fmt --check")?;
    if !fmt.success() {
        bail!("cargo fmt --all -- --check found unformatted code (run `cargo fmt --all`)");
    }
    // The kernel engine's end-to-end tests and the differential test load
    // the release BPF object (the agent finds it in target/bpf).
    crate::ebpf::build(true)?;
    // The end-to-end tests drive the agent, load-balancer, controller and
    // `sluice` CLI binaries. The test build below makes them (each package
    // has integration tests, for which cargo builds and places its
    // binaries), with the test build's features: a `cargo build -p` of them
    // first resolved other features for rustls, kube and their dependants
    // and built those twice.
    // The tests' build first, alone: both cores. Cargo's JSON messages name
    // every test binary it built, which the lanes then run.
    let listing = cargo_output(&[
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ])?;
    let binaries = lanes::jobs_from_cargo_json(&listing, &opts.rest)?;
    let mut jobs = lanes::shard(binaries, &opts.rest);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = std::env::current_dir().context("the working directory")?;
    jobs.push(lanes::doc_tests(
        &cargo,
        &workspace,
        &opts.rest,
        cargo_env(),
    ));
    let lanes = lanes::lanes_from_env()?;
    let limit = lanes::limit_from_env()?;
    // The fuzz targets' build goes on beside the test run, at the lowest
    // priority.
    let fuzz_build = if opts.no_fuzz {
        None
    } else {
        Some(crate::fuzz::BackgroundBuild::start()?)
    };
    let before = leftovers::Snapshot::take();
    let report = lanes::run(jobs, lanes, limit);
    let swept = leftovers::sweep(&before, &report.pids);
    let totals = report.verdict()?;
    swept?;
    if let Some(build) = fuzz_build {
        crate::fuzz::run_after(build, crate::fuzz::CI_SECONDS)?;
        // The tests' sum again, as the closing line (the fuzzers print
        // theirs above it).
        println!("{}", totals.line());
    }
    Ok(())
}

/// Run cargo with its stdout kept (its diagnostics still reach stderr).
fn cargo_output(args: &[&str]) -> Result<String> {
    let out = cargo_command(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("cargo {} failed with {}", args.join(" "), out.status);
    }
    String::from_utf8(out.stdout).context("cargo's JSON output is not UTF-8")
}

/// Totals over every `test result:` line of a cargo test run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Totals {
    pub fn line(&self) -> String {
        format!(
            "tests: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.ignored
        )
    }

    /// `test result: ok. 47 passed; 0 failed; 2 ignored; 0 measured; ...`
    pub fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match label {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// What a clean build of the suite and the fuzz targets takes, with room
/// for the tests' own data directories (measured on a fresh clone:
/// 6.1 GB of target directory without incremental caches, 9.9 with).
const DISK_NEEDED: u64 = 14 << 30;

/// A warning, before a long build, when the target directory's disk is
/// short: a build that runs out fails late and names a link or a write,
/// not the disk.
fn warn_if_disk_is_short() {
    let dir = std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| ".".into());
    let Ok(stat) = nix::sys::statvfs::statvfs(std::path::Path::new(&dir)) else {
        return;
    };
    let free = stat.blocks_available().saturating_mul(stat.fragment_size());
    if let Some(warning) = disk_warning(free) {
        eprintln!("{warning}");
    }
}

fn disk_warning(free: u64) -> Option<String> {
    (free < DISK_NEEDED).then(|| {
        format!(
            "warning: {:.1} GiB free where the build writes; a clean build of the tests and \
             fuzz targets needs about {} GiB",
            free as f64 / f64::from(1u32 << 30),
            DISK_NEEDED >> 30
        )
    })
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::{cargo_command, cargo_env, disk_warning, lanes, Totals, DISK_NEEDED};

    /// The doc-test pass runs with the test build's cargo settings, so it
    /// finds that build fresh instead of compiling the workspace again.
    #[test]
    fn the_doc_test_pass_gets_the_build_s_cargo_settings() {
        let build = cargo_command(&["test", "--no-run"]);
        let set = |k: &std::ffi::OsStr| k.to_string_lossy().into_owned();
        let build_env: Vec<(String, String)> = build
            .get_envs()
            .filter_map(|(k, v)| Some((set(k), v?.to_string_lossy().into_owned())))
            .collect();
        let doc = lanes::doc_tests("cargo", std::path::Path::new("/w"), &[], cargo_env());
        assert_eq!(doc.env, build_env);
        if std::env::var_os("CARGO_INCREMENTAL").is_none() {
            assert_eq!(
                doc.env,
                [("CARGO_INCREMENTAL".to_string(), "0".to_string())]
            );
        }
    }

    #[test]
    fn a_short_disk_is_named_before_the_build() {
        let warning = disk_warning(3 << 30).expect("3 GiB is short");
        assert!(warning.contains("3.0 GiB free"), "{warning}");
        assert!(disk_warning(DISK_NEEDED).is_none());
    }

    #[test]
    fn sums_cargo_result_lines() {
        let mut t = Totals::default();
        t.add_line("test result: ok. 47 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.07s");
        t.add_line(
            "test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
        );
        t.add_line("running 3 tests");
        assert_eq!(
            t,
            Totals {
                passed: 50,
                failed: 1,
                ignored: 2
            }
        );
    }
}
