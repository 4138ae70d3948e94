//! `cargo xtask fuzz`: the controller's fuzz targets (`controller/fuzz`,
//! cargo-fuzz), each for a bounded time; `cargo xtask test` runs them all
//! for [`CI_SECONDS`] each, all at once, after the workspace's tests.
//!
//! Works on the stable toolchain: the targets are built with
//! `--sanitizer none`, so cargo-fuzz passes only stable flags (the
//! sanitizer-coverage instrumentation libFuzzer needs is `-C passes` and
//! `-C llvm-args`; only the address sanitizer would need nightly's `-Z`).
//! Panics are what the targets look for, and Rust code without `unsafe`
//! needs no sanitizer to turn a bug into one.
//!
//! The committed seeds (`controller/fuzz/seeds/<target>`) are only read; the
//! corpus libFuzzer grows and any crash input go under the target
//! directory, so a run leaves the clone as it was.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

/// Every target, in the order runs go.
pub const TARGETS: &[&str] = &["decode", "patch", "query"];

/// Seconds per target under `cargo xtask test` (CI).
pub const CI_SECONDS: u64 = 60;

/// libFuzzer's bounds: inputs up to 16 KiB (the decoder's 3 MiB limit is
/// a length check, tested in the unit tests; larger inputs only slow the
/// search), 2 GiB of memory, 10 s for one input.
const MAX_LEN: usize = 16 * 1024;
const RSS_LIMIT_MB: u64 = 2048;
const TIMEOUT_S: u64 = 10;

#[derive(Debug, Clone, clap::Args)]
pub struct FuzzOpts {
    /// Run only this target (decode, patch, query); all by default.
    #[arg(long)]
    pub target: Option<String>,
    /// Seconds each target runs.
    #[arg(long, default_value_t = 300)]
    pub seconds: u64,
}

use crate::bench::workspace_root;

/// Where the fuzz build, corpus and crash inputs go: beside the
/// workspace's own build, in a directory of their own (the instrumented
/// flags would otherwise rebuild the workspace's dependencies each time).
fn fuzz_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("fuzz")
}

fn host_triple() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host:"))
        .map(|h| h.trim().to_string())
        .ok_or_else(|| anyhow!("`rustc -vV` names no host"))
}

/// What one run of a target did.
#[derive(Debug, Default, PartialEq, Eq)]
struct RunStats {
    runs: Option<u64>,
    crash_input: Option<String>,
}

impl RunStats {
    /// libFuzzer's `Done 123456 runs in 60 second(s)` and
    /// `... Test unit written to ./crash-<sha1>` lines.
    fn add_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("Done ") {
            if let Some(n) = rest.split_whitespace().next() {
                self.runs = n.parse().ok().or(self.runs);
            }
        }
        if let Some((_, path)) = line.split_once("Test unit written to ") {
            self.crash_input = Some(path.trim().to_string());
        }
    }
}

/// libFuzzer's progress lines (`#4096 pulse ...`, `#123 NEW ...`, the
/// new functions each brings, the recommended dictionary): kept in the
/// log file, not printed, so a CI log shows what matters.
fn is_progress(line: &str) -> bool {
    (line.starts_with('#') && !line.contains("INITED") && !line.contains("DONE"))
        || line.trim_start().starts_with("NEW_FUNC")
        || line.contains("# Uses: ")
}

/// The `cargo fuzz build` of `only` that target, or every one.
fn build_command(only: Option<&str>) -> Command {
    let dir = fuzz_dir();
    let project = workspace_root().join("controller/fuzz");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["fuzz", "build", "--sanitizer", "none"])
        // Debug assertions on: an overflow or a failed assertion in the
        // controller is a crash, as in the unit tests.
        .arg("--debug-assertions")
        // The fuzz package's dev profile (opt-level 1): ~10 000 inputs/s,
        // where the release profile's single codegen unit took 15-20
        // minutes to build on 2 cores.
        .arg("--dev")
        .arg("--fuzz-dir")
        .arg(&project)
        .arg("--target-dir")
        .arg(&dir)
        .args(only);
    println!(
        "+ cargo fuzz build --sanitizer none --debug-assertions --dev --fuzz-dir {} --target-dir {} {}",
        project.display(),
        dir.display(),
        only.unwrap_or("")
    );
    cmd
}

fn bin_dir() -> Result<PathBuf> {
    Ok(fuzz_dir().join(host_triple()?).join("debug"))
}

/// Build `only` that target, or every one; the directory of the binaries.
fn build(only: Option<&str>) -> Result<PathBuf> {
    let status = build_command(only)
        .status()
        .context("running cargo fuzz build (is cargo-fuzz installed? `cargo xtask setup`)")?;
    if !status.success() {
        bail!("cargo fuzz build failed with {status}");
    }
    bin_dir()
}

/// Every target's build, started beside the workspace's tests at the
/// lowest CPU priority: the tests mostly wait on namespaces, etcd and
/// sockets, and the build takes the cycles they leave (most of its
/// minutes, on 2 cores) without slowing them. Killed with its compilers
/// if dropped unfinished (a test failed).
pub struct BackgroundBuild {
    child: Option<std::process::Child>,
    log: PathBuf,
    started: Instant,
}

impl BackgroundBuild {
    pub fn start() -> Result<Self> {
        let dir = fuzz_dir();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = dir.join("build.log");
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out
            .try_clone()
            .context("duplicating the build log's handle")?;
        let mut cmd = build_command(None);
        println!(
            "  (in the background at nice 19, beside the tests; log: {})",
            log.display()
        );
        // SAFETY: setpriority is async-signal-safe; it only lowers this
        // (forked) process's priority, which its compilers inherit.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::setpriority(libc::PRIO_PROCESS, 0, 19) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("running cargo fuzz build (is cargo-fuzz installed? `cargo xtask setup`)")?;
        Ok(BackgroundBuild {
            child: Some(child),
            log,
            started: Instant::now(),
        })
    }

    /// Wait for the build (at full priority from here: the tests are
    /// done); its log's tail on failure.
    fn finish(mut self) -> Result<(PathBuf, std::time::Duration)> {
        let mut child = self
            .child
            .take()
            .context("the fuzz build was already waited for")?;
        let pid = child.id() as libc::id_t;
        // SAFETY: plain syscall on the build's process group; raising the
        // priority back needs root, which the tests run as (if it fails,
        // the build just finishes at nice 19).
        unsafe {
            libc::setpriority(libc::PRIO_PGRP, pid, 0);
        }
        let status = child.wait().context("waiting for cargo fuzz build")?;
        println!(
            "fuzz build: {} after {:.0} s from its start",
            if status.success() { "done" } else { "FAILED" },
            self.started.elapsed().as_secs_f64()
        );
        if !status.success() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            for l in tail.into_iter().rev() {
                println!("{l}");
            }
            bail!(
                "cargo fuzz build failed with {status} (log: {})",
                self.log.display()
            );
        }
        Ok((bin_dir()?, self.started.elapsed()))
    }
}

impl Drop for BackgroundBuild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group: cargo's rustc children too.
            let pgid = nix::unistd::Pid::from_raw(-(child.id() as i32));
            let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// Run `target` for `seconds`; Ok with the number of inputs tried, or an
/// error naming the crash input.
fn run_one(bin_dir: &Path, target: &str, seconds: u64) -> Result<u64> {
    let dir = fuzz_dir();
    let seeds = workspace_root().join("controller/fuzz/seeds").join(target);
    let corpus = dir.join("corpus").join(target);
    let artifacts = dir.join("artifacts").join(target);
    let logs = dir.join("logs");
    for d in [&corpus, &artifacts, &logs] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let bin = bin_dir.join(target);
    let log_path = logs.join(format!("{target}.log"));
    let mut log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.arg(format!("-max_total_time={seconds}"))
        .arg(format!("-max_len={MAX_LEN}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-timeout={TIMEOUT_S}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        // The first directory receives new inputs; the seeds are only read.
        .arg(&corpus)
        .arg(&seeds)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    println!(
        "+ {} -max_total_time={seconds} -max_len={MAX_LEN} -rss_limit_mb={RSS_LIMIT_MB} \
         {} {} (log: {})",
        bin.display(),
        corpus.display(),
        seeds.display(),
        log_path.display()
    );
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut stats = RunStats::default();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines() {
            let line = line.context("reading the fuzzer's output")?;
            stats.add_line(&line);
            use std::io::Write;
            let _ = writeln!(log, "{line}");
            if !is_progress(&line) {
                println!("  {line}");
            }
        }
    }
    let status = child.wait().context("waiting for the fuzzer")?;
    if !status.success() {
        let input = stats
            .crash_input
            .unwrap_or_else(|| format!("(none written; see {})", log_path.display()));
        bail!(
            "fuzz target {target} failed ({status}); the input is {input}; \
             reproduce with `{} {input}`",
            bin.display()
        );
    }
    Ok(stats.runs.unwrap_or(0))
}

/// Build and run `targets`, `seconds` each; prints one line per target and
/// the time taken.
pub fn run_targets(targets: &[&str], seconds: u64) -> Result<()> {
    let start = Instant::now();
    let only = match targets {
        [one] => Some(*one),
        _ => None,
    };
    let bin_dir = build(only)?;
    run_built(&bin_dir, targets, seconds, start.elapsed())
}

/// Run every target, `seconds` each, from the background build.
pub fn run_after(build: BackgroundBuild, seconds: u64) -> Result<()> {
    let (bin_dir, built) = build.finish()?;
    run_built(&bin_dir, TARGETS, seconds, built)
}

fn run_built(
    bin_dir: &Path,
    targets: &[&str],
    seconds: u64,
    built: std::time::Duration,
) -> Result<()> {
    let start = Instant::now();
    let mut failed = Vec::new();
    let mut lines = Vec::new();
    // All at once: each is bounded by its own time, and one after another
    // they were three minutes of the CI's wall time for one.
    let outcomes: Vec<(&str, Result<u64>, f64)> = std::thread::scope(|scope| {
        let running: Vec<_> = targets
            .iter()
            .map(|t| {
                scope.spawn(move || {
                    let t0 = Instant::now();
                    let r = run_one(bin_dir, t, seconds);
                    (*t, r, t0.elapsed().as_secs_f64())
                })
            })
            .collect();
        running
            .into_iter()
            .zip(targets)
            .map(|(h, t)| {
                h.join()
                    .unwrap_or_else(|_| (*t, Err(anyhow!("the thread running it panicked")), 0.0))
            })
            .collect()
    });
    for (t, r, secs) in outcomes {
        match r {
            Ok(runs) => lines.push(format!("fuzz {t}: ok, {runs} inputs in {secs:.0} s")),
            Err(e) => {
                lines.push(format!("fuzz {t}: CRASH: {e:#}"));
                failed.push(t);
            }
        }
    }
    for l in &lines {
        println!("{l}");
    }
    println!(
        "fuzz: {} target(s), build {:.0} s, runs {:.0} s",
        targets.len(),
        built.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("fuzz target(s) {} crashed", failed.join(", "));
    }
    Ok(())
}

pub fn run(opts: FuzzOpts) -> Result<()> {
    crate::setup::cargo_fuzz().context("setup step `cargo-fuzz` failed")?;
    let targets: Vec<&str> = match &opts.target {
        Some(t) => {
            let t = TARGETS
                .iter()
                .find(|k| **k == t.as_str())
                .ok_or_else(|| anyhow!("no fuzz target {t:?}; there are {TARGETS:?}"))?;
            vec![*t]
        }
        None => TARGETS.to_vec(),
    };
    run_targets(&targets, opts.seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_summary_and_crash_lines() {
        let mut s = RunStats::default();
        s.add_line("#4096\tpulse  cov: 1 ft: 2 corp: 3/4b exec/s: 5 rss: 6Mb");
        s.add_line("Done 123456 runs in 61 second(s)");
        assert_eq!(s.runs, Some(123456));
        s.add_line(
            "artifact_prefix='/t/fuzz/artifacts/patch/'; Test unit written to /t/fuzz/artifacts/patch/crash-ab12",
        );
        assert_eq!(
            s.crash_input.as_deref(),
            Some("/t/fuzz/artifacts/patch/crash-ab12")
        );
        assert!(is_progress("#12\tNEW    cov: 1"));
        assert!(is_progress("\tNEW_FUNC[1/2]: 0x55c915316261"));
        assert!(is_progress("\"apiVersion\" # Uses: 55"));
        assert!(!is_progress("#2\tINITED cov: 1"));
        assert!(!is_progress(
            "thread '<unnamed>' panicked at src/api/patch.rs:1:1:"
        ));
    }

    #[test]
    fn every_target_has_seeds_and_a_source() {
        let fuzz = workspace_root().join("controller/fuzz");
        for t in TARGETS {
            let seeds = fuzz.join("seeds").join(t);
            let n = std::fs::read_dir(&seeds)
                .map(|d| d.count())
                .unwrap_or_default();
            assert!(n > 0, "no seeds in {}", seeds.display());
            assert!(fuzz.join(format!("fuzz_targets/{t}.rs")).exists(), "{t}");
        }
    }
}
