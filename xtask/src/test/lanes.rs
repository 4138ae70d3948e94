//! The test binaries run side by side in a few lanes, not one after another.
//!
//! `cargo test` runs each test binary in turn. Most of this suite's time is
//! spent waiting (namespaces being made, agents starting, grace periods,
//! retransmit timers), so a whole run took 22 minutes with the CPU half idle.
//! Every test names what it creates after its process and a counter (see
//! `sluice_tests::netns`), so binaries do not collide when they overlap.
//!
//! The binaries come from cargo's own JSON artifact messages, so the set is
//! exactly what `cargo test --workspace` would run; doc tests go in a lane of
//! their own through `cargo test --doc`. Each binary's output is kept and
//! printed whole when it ends, headed as cargo heads it, so the log reads as
//! cargo's does and the `test result:` lines sum as before.

use std::collections::{BTreeSet, VecDeque};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::Totals;

/// One thing to run: a test binary, or cargo's doc-test pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// What cargo prints after `Running`: the source and the binary.
    pub title: String,
    /// About how many seconds it runs alone, for ordering and sharding.
    pub weight: u32,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Cargo runs a test binary in its package's directory.
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}

/// Seconds each slow binary took in a serial run (CI log of c042223). The
/// order depends on them, the longest first, so no lane is left with a
/// long binary at the end; and which binaries are sharded. A binary
/// missing here counts as short.
const SLOW: &[(&str, u32)] = &[
    ("loadbalancer", 357),
    ("controller_upgrade", 185),
    // Measured alone at 153 s for both engines together (2026-12-01).
    ("controller_blue_green", 155),
    // Both engines, 40 s each alone (2026-12-02).
    ("controller_autoscaled_blue_green", 85),
    ("controller_lb", 96),
    // Measured alone at 82 s with its run-limit test (2026-12-02).
    ("netns_provider", 82),
    ("controller_cluster", 62),
    ("health_flood", 50),
    ("upgrades", 42),
    ("store_suite", 34),
    ("restart", 29),
    ("vip_flood", 20),
    ("weeks", 28),
    ("sluice_simulation", 28),
    // 200 nodes upgraded autoscaled blue-green over 8 simulated days.
    ("autoscaled_upgrade", 55),
    ("agent_drain", 24),
    ("bad_input", 21),
    // Compiling the examples, in the lanes beside the others.
    ("doc-tests", 260),
    ("restart_caches", 20),
    ("engine_e2e", 18),
    ("kernel_engine", 18),
    ("drain", 17),
    ("services", 15),
    // The CLI's live blue-green test (17 s) and the planner's (3 s).
    ("blue_green", 17),
];

fn weight(target: &str) -> u32 {
    SLOW.iter()
        .find(|(name, _)| *name == target)
        .map_or(0, |(_, s)| *s)
}

/// The test binaries in cargo's `--message-format=json` output of
/// `cargo test --no-run`: compiler artifacts built as tests, with an
/// executable. Lines that are not such artifacts are passed over.
pub fn jobs_from_cargo_json(json: &str, rest: &[String]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for line in json.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let manifest = msg["manifest_path"]
            .as_str()
            .context("a test artifact without manifest_path (cargo too old?)")?;
        let cwd = Path::new(manifest)
            .parent()
            .context("manifest_path without a directory")?
            .to_path_buf();
        let target = msg["target"]["name"].as_str().unwrap_or("?").to_string();
        let src = msg["target"]["src_path"].as_str().unwrap_or("?");
        let src_rel = Path::new(src)
            .strip_prefix(&cwd)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| src.to_string());
        let kinds: Vec<&str> = msg["target"]["kind"]
            .as_array()
            .map(|k| k.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let title = if kinds.contains(&"test") {
            format!("{src_rel} ({exe})")
        } else {
            format!("unittests {src_rel} ({exe})")
        };
        let package = msg["package_id"].as_str().unwrap_or("");
        let mut env = vec![("CARGO_MANIFEST_DIR".to_string(), cwd.display().to_string())];
        if let Some(name) = package_name(package) {
            env.push(("CARGO_PKG_NAME".to_string(), name));
        }
        jobs.push(Job {
            title,
            weight: weight(&target),
            program: PathBuf::from(exe),
            args: rest.to_vec(),
            cwd,
            env,
        });
    }
    if jobs.is_empty() {
        bail!("cargo listed no test binary");
    }
    Ok(jobs)
}

/// The package name in a package id: `path+file:///w/agent#sluice-agent@0.1.0`
/// (cargo ≥ 1.77) or the older `sluice-agent 0.1.0 (path+file:///w/agent)`.
fn package_name(id: &str) -> Option<String> {
    if let Some((_, frag)) = id.rsplit_once('#') {
        let name = frag.split('@').next()?;
        // `...#0.1.0` alone: the name is the path's last part.
        if name.chars().next()?.is_ascii_digit() {
            let path = id.rsplit_once('#')?.0;
            return path.rsplit('/').next().map(str::to_string);
        }
        return Some(name.to_string());
    }
    id.split_whitespace().next().map(str::to_string)
}

/// Longest first (ties by name, so the order is the same every run).
pub fn order(mut jobs: Vec<Job>) -> Vec<Job> {
    jobs.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.title.cmp(&b.title)));
    jobs
}

/// A binary expected to run longer than this is split into shards that
/// run in different lanes: one long binary would otherwise set the whole
/// run's length (the LoadBalancer scenarios took 581 of 740 s in a lane).
const SHARD_SECS: u32 = 130;

/// Split each long binary into shards: its tests, listed by the binary
/// itself, dealt round-robin (so each shard mixes engines and families)
/// and run with `--exact`. Not when the caller passed arguments of their
/// own (a filter of theirs and `--exact` names would not combine), and not
/// when the listing fails (the binary then runs whole, and says why).
pub fn shard(jobs: Vec<Job>, rest: &[String]) -> Vec<Job> {
    if !rest.is_empty() {
        return jobs;
    }
    let mut out = Vec::new();
    for job in jobs {
        if job.weight <= SHARD_SECS {
            out.push(job);
            continue;
        }
        match list_tests(&job) {
            Ok(names) => out.extend(split(&job, &names)),
            Err(e) => {
                eprintln!("{}: not sharded: {e:#}", job.title);
                out.push(job);
            }
        }
    }
    out
}

/// `job` as shards over `names`; the job itself when one shard would do.
fn split(job: &Job, names: &[String]) -> Vec<Job> {
    let n = (job.weight.div_ceil(SHARD_SECS) as usize).min(names.len());
    if n <= 1 {
        return vec![job.clone()];
    }
    (0..n)
        .map(|i| {
            let mine: Vec<String> = names.iter().skip(i).step_by(n).cloned().collect();
            let mut args = vec!["--exact".to_string()];
            args.extend(mine.iter().cloned());
            Job {
                title: format!(
                    "{} [shard {} of {n}: {} tests]",
                    job.title,
                    i + 1,
                    mine.len()
                ),
                weight: job.weight / n as u32,
                args,
                ..job.clone()
            }
        })
        .collect()
}

/// The test names a libtest binary lists (`name: test` lines of
/// `--list --format terse`).
fn list_tests(job: &Job) -> Result<Vec<String>> {
    let out = Command::new(&job.program)
        .args(["--list", "--format", "terse"])
        .current_dir(&job.cwd)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("listing the tests of {}", job.program.display()))?;
    if !out.status.success() {
        bail!("--list ended with {}", out.status);
    }
    let names = parse_test_list(&String::from_utf8_lossy(&out.stdout));
    if names.is_empty() {
        bail!("it listed no test");
    }
    Ok(names)
}

fn parse_test_list(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

/// How one job ended.
struct Outcome {
    title: String,
    ok: bool,
    secs: f64,
    output: String,
    /// The job's process (and process group), when it started.
    pid: Option<u32>,
}

/// What a whole run did.
pub struct Report {
    pub totals: Totals,
    /// The titles of the jobs that failed or were stopped.
    pub failed: Vec<String>,
    /// Every job's process id: what the tests name their namespaces after.
    pub pids: Vec<u32>,
    total: usize,
    /// How many jobs ran (to their end or stopped).
    ran: usize,
    /// A signal stopped the run.
    interrupted: bool,
}

impl Report {
    /// The run's verdict: every job passed and some test ran.
    pub fn verdict(self) -> Result<Totals> {
        if self.interrupted {
            bail!(
                "interrupted: {} of {} test runs ran ({} of them failed or were stopped)",
                self.ran,
                self.total,
                self.failed.len()
            );
        }
        let failed = &self.failed;
        if !failed.is_empty() {
            bail!(
                "{} of {} test runs failed: {}",
                failed.len(),
                self.total,
                failed.join(", ")
            );
        }
        if self.totals.passed == 0 {
            bail!("the test binaries ran no test");
        }
        Ok(self.totals)
    }
}

/// Run `jobs` in `lanes` lanes, each stopped after `limit`; print each
/// job's output when it ends and sum the `test result:` lines. Every job
/// runs even when one fails; the failures are named at the end.
pub fn run(jobs: Vec<Job>, lanes: usize, limit: Duration) -> Report {
    if let Err(e) = crate::signals::install() {
        println!("warning: {e:#}; an interrupted run would leave its tests running");
    }
    let report = run_until(jobs, lanes, limit, Arc::new(crate::signals::interrupted));
    // The fuzz phase after the lanes has no checks of its own: a signal
    // ends it as it did before.
    if let Err(e) = crate::signals::restore() {
        println!("warning: {e:#}");
    }
    report
}

/// The guarded value, also after a thread panicked holding it: the queue
/// and the set of running jobs stay usable for the other lanes.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Asked every [`INTERRUPT_POLL`] whether the run was interrupted.
type Interrupt = Arc<dyn Fn() -> bool + Send + Sync>;

const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// The process groups of one run's jobs now running. Each job leads a group
/// of its own, which a Ctrl-C at the terminal or a SIGTERM to this process
/// does not reach: an interrupted run stops them itself. What a test starts
/// in a group of its own (the harness's controllers, agents and
/// `sluice-lb`) is not reached by this either, nor by the watchdog: it
/// outlives an interrupted or stopped test until it is killed by hand.
#[derive(Default)]
struct Running(Mutex<BTreeSet<u32>>);

impl Running {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeSet<u32>) -> T) -> T {
        f(&mut lock(&self.0))
    }

    fn signal_all(&self, signal: libc::c_int) {
        for pid in self.with(|set| set.clone()) {
            signal_group(pid, signal);
        }
    }
}

/// Once `interrupted` says so: no further job starts, and the running ones'
/// groups get SIGTERM, then SIGKILL after [`STOP_GRACE`]. Returns whether
/// the run was interrupted; ends when `finished` is set.
fn stop_on_interrupt(
    interrupted: &Interrupt,
    finished: &AtomicBool,
    queue: &Mutex<VecDeque<Job>>,
    running: &Running,
) -> bool {
    while !finished.load(Ordering::SeqCst) {
        if !interrupted() {
            std::thread::sleep(INTERRUPT_POLL);
            continue;
        }
        let skipped = std::mem::take(&mut *lock(queue)).len();
        println!("+ interrupted: stopping the running tests; {skipped} test runs not started");
        running.signal_all(libc::SIGTERM);
        let until = Instant::now() + STOP_GRACE;
        while Instant::now() < until && !running.with(|set| set.is_empty()) {
            std::thread::sleep(INTERRUPT_POLL);
        }
        // Until the lanes end: a job popped just before the queue was
        // emptied may start after the signals went out.
        while !finished.load(Ordering::SeqCst) {
            running.signal_all(libc::SIGKILL);
            std::thread::sleep(INTERRUPT_POLL);
        }
        return true;
    }
    false
}

fn run_until(jobs: Vec<Job>, lanes: usize, limit: Duration, interrupted: Interrupt) -> Report {
    let total = jobs.len();
    let queue = Arc::new(Mutex::new(VecDeque::from(order(jobs))));
    let running = Arc::new(Running::default());
    let finished = Arc::new(AtomicBool::new(false));
    let stopper = {
        let (queue, running, finished) = (
            Arc::clone(&queue),
            Arc::clone(&running),
            Arc::clone(&finished),
        );
        std::thread::spawn(move || stop_on_interrupt(&interrupted, &finished, &queue, &running))
    };
    let (tx, rx) = std::sync::mpsc::channel::<Outcome>();
    let started = Instant::now();
    println!(
        "+ {total} test runs (binaries, shards of the long ones, the doc tests), {} at a time",
        lanes.max(1)
    );
    let mut workers = Vec::new();
    for _ in 0..lanes.max(1) {
        let queue = Arc::clone(&queue);
        let tx = tx.clone();
        let running = Arc::clone(&running);
        workers.push(std::thread::spawn(move || loop {
            let Some(job) = lock(&queue).pop_front() else {
                return;
            };
            if tx.send(run_one(&job, limit, &running)).is_err() {
                return;
            }
        }));
    }
    drop(tx);
    let mut totals = Totals::default();
    let mut failed = Vec::new();
    let mut pids = Vec::new();
    let mut ran = 0;
    for outcome in rx {
        ran += 1;
        pids.extend(outcome.pid);
        println!("     Running {}", outcome.title);
        for line in outcome.output.lines() {
            totals.add_line(line);
        }
        print!("{}", outcome.output);
        if !outcome.output.ends_with('\n') {
            println!();
        }
        println!("     ({:.1} s)", outcome.secs);
        if !outcome.ok {
            failed.push(outcome.title);
        }
    }
    for w in workers {
        let _ = w.join();
    }
    finished.store(true, Ordering::SeqCst);
    let interrupted = stopper.join().unwrap_or(false);
    println!(
        "test runs: {total} in {:.0} s, {} lanes",
        started.elapsed().as_secs_f64(),
        lanes.max(1)
    );
    println!("{}", totals.line());
    Report {
        totals,
        failed,
        pids,
        total,
        ran,
        interrupted,
    }
}

/// How long a grace a job stopped for its time gets between SIGTERM and
/// SIGKILL (an etcd or agent it started shuts down cleanly in this).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Signal every process of the job's group (the job leads it).
fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill has no memory preconditions; a group already gone
    // gives ESRCH, which is what we want then.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Stops the job's whole process group if it has not ended by `limit`:
/// one hung test (a wait with no bound, a deadlock at shutdown) would
/// otherwise hold the whole run until CI's own limit, with nothing said.
/// The test binary has no SIGTERM handler, so its guards do not run; the
/// namespaces and pins it leaves are swept after the run (`leftovers`).
fn watchdog(
    pid: u32,
    limit: Duration,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<bool>) {
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let handle = std::thread::spawn(move || match ended.recv_timeout(limit) {
        Err(RecvTimeoutError::Timeout) => {
            signal_group(pid, libc::SIGTERM);
            if let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(STOP_GRACE) {
                signal_group(pid, libc::SIGKILL);
            }
            true
        }
        _ => false,
    });
    (done, handle)
}

/// Everything `from` gives until it closes, ending in a newline. Bytes
/// that are not UTF-8 are replaced, not an end: reading by `lines()`
/// stopped at the first such line and left the pipe undrained, so a test
/// that printed one would block on a full pipe.
fn read_lines(mut from: impl Read) -> String {
    let mut bytes = Vec::new();
    let _ = from.read_to_end(&mut bytes);
    let mut s = String::from_utf8_lossy(&bytes).into_owned();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn run_one(job: &Job, limit: Duration, running: &Running) -> Outcome {
    let t0 = Instant::now();
    let mut cmd = Command::new(&job.program);
    cmd.args(&job.args)
        .current_dir(&job.cwd)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a job stopped for its time takes the
        // servers and agents it started with it.
        .process_group(0);
    let child = cmd.spawn();
    let pid = child.as_ref().ok().map(|c| c.id());
    let (ok, output) = match child {
        Err(e) => (
            false,
            format!("could not start {}: {e}\n", job.program.display()),
        ),
        Ok(mut child) => {
            running.with(|set| set.insert(child.id()));
            let (done, dog) = watchdog(child.id(), limit);
            // Both pipes read at once, stderr on a thread: a binary that
            // fills one pipe while we block on the other would hang.
            let err_reader = child
                .stderr
                .take()
                .map(|e| std::thread::spawn(move || read_lines(e)));
            let mut out = child.stdout.take().map(read_lines).unwrap_or_default();
            let err = err_reader.and_then(|h| h.join().ok()).unwrap_or_default();
            out.push_str(&err);
            let status = child.wait();
            running.with(|set| set.remove(&child.id()));
            let _ = done.send(());
            let stopped = dog.join().unwrap_or(false);
            match status {
                _ if stopped => {
                    out.push_str(&format!(
                        "{} stopped: still running after {} s (SLUICE_TEST_TIMEOUT)\n",
                        job.title,
                        limit.as_secs()
                    ));
                    (false, out)
                }
                Ok(status) if status.success() => (true, out),
                Ok(status) => {
                    out.push_str(&format!("{} ended with {status}\n", job.title));
                    (false, out)
                }
                Err(e) => {
                    out.push_str(&format!("waiting for {}: {e}\n", job.title));
                    (false, out)
                }
            }
        }
    };
    Outcome {
        title: job.title.clone(),
        ok,
        secs: t0.elapsed().as_secs_f64(),
        output,
        pid,
    }
}

/// Cargo's doc-test pass as one job (it compiles the examples as it goes),
/// with `env`: the test build's cargo settings, so it reuses that build.
pub fn doc_tests(
    cargo: &str,
    workspace: &Path,
    rest: &[String],
    env: Vec<(String, String)>,
) -> Job {
    let mut args = vec![
        "test".to_string(),
        "--workspace".to_string(),
        "--doc".to_string(),
    ];
    if !rest.is_empty() {
        args.push("--".to_string());
        args.extend(rest.iter().cloned());
    }
    Job {
        title: "doc-tests (cargo test --workspace --doc)".to_string(),
        weight: weight("doc-tests"),
        program: PathBuf::from(cargo),
        args,
        cwd: workspace.to_path_buf(),
        env,
    }
}

/// How many binaries at once: `SLUICE_TEST_LANES`, else three. Measured on
/// the 2-core CI machine, one serial run keeps about one core busy.
pub fn lanes_from_env() -> Result<usize> {
    parse_lanes(std::env::var("SLUICE_TEST_LANES").ok().as_deref())
}

/// How long one test run may take: `SLUICE_TEST_TIMEOUT` seconds, else
/// 20 minutes (the longest run, the LoadBalancer scenarios unsharded,
/// takes about 10 beside two other lanes).
pub fn limit_from_env() -> Result<Duration> {
    parse_limit(std::env::var("SLUICE_TEST_TIMEOUT").ok().as_deref())
}

fn parse_limit(value: Option<&str>) -> Result<Duration> {
    let Some(v) = value else {
        return Ok(Duration::from_secs(1200));
    };
    match v.trim().parse::<u64>() {
        Ok(n) if (10..=5400).contains(&n) => Ok(Duration::from_secs(n)),
        _ => bail!("SLUICE_TEST_TIMEOUT={v:?}: expected seconds, a whole number from 10 to 5400"),
    }
}

fn parse_lanes(value: Option<&str>) -> Result<usize> {
    let Some(v) = value else { return Ok(3) };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=16).contains(&n) => Ok(n),
        _ => bail!("SLUICE_TEST_LANES={v:?}: expected a whole number from 1 to 16"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/tests#sluice-tests@0.1.0","manifest_path":"/w/tests/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"loadbalancer","src_path":"/w/tests/tests/loadbalancer.rs","edition":"2021","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":1,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/loadbalancer-1"],"executable":"/w/target/debug/deps/loadbalancer-1","fresh":true}
{"reason":"compiler-artifact","package_id":"path+file:///w/agent#sluice-agent@0.1.0","manifest_path":"/w/agent/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"sluice_agent","src_path":"/w/agent/src/lib.rs","test":true},"profile":{"test":true},"executable":"/w/target/debug/deps/sluice_agent-2","fresh":true}
{"reason":"compiler-artifact","package_id":"path+file:///w/agent#sluice-agent@0.1.0","manifest_path":"/w/agent/Cargo.toml","target":{"kind":["lib"],"name":"sluice_agent","src_path":"/w/agent/src/lib.rs"},"profile":{"test":false},"executable":null,"fresh":true}
{"reason":"build-finished","success":true}
not json at all
"#;

    #[test]
    fn test_binaries_are_read_off_cargos_artifacts() {
        let jobs = jobs_from_cargo_json(JSON, &["--nocapture".to_string()]).expect("jobs");
        assert_eq!(jobs.len(), 2, "{jobs:#?}");
        assert_eq!(
            jobs[0].title,
            "tests/loadbalancer.rs (/w/target/debug/deps/loadbalancer-1)"
        );
        assert_eq!(jobs[0].cwd, PathBuf::from("/w/tests"));
        assert_eq!(jobs[0].args, vec!["--nocapture".to_string()]);
        assert!(jobs[0]
            .env
            .contains(&("CARGO_PKG_NAME".to_string(), "sluice-tests".to_string())));
        assert_eq!(
            jobs[1].title,
            "unittests src/lib.rs (/w/target/debug/deps/sluice_agent-2)"
        );
    }

    #[test]
    fn no_test_binary_is_an_error() {
        let err = jobs_from_cargo_json("{\"reason\":\"build-finished\"}\n", &[])
            .expect_err("nothing to run");
        assert!(err.to_string().contains("no test binary"), "{err}");
    }

    #[test]
    fn package_names_in_both_id_forms() {
        assert_eq!(
            package_name("path+file:///w/agent#sluice-agent@0.1.0").as_deref(),
            Some("sluice-agent")
        );
        assert_eq!(
            package_name("path+file:///w/xtask#0.1.0").as_deref(),
            Some("xtask")
        );
        assert_eq!(
            package_name("sluice-agent 0.1.0 (path+file:///w/agent)").as_deref(),
            Some("sluice-agent")
        );
    }

    #[test]
    fn the_longest_binaries_start_first() {
        let job = |t: &str| Job {
            title: t.to_string(),
            weight: weight(t),
            program: PathBuf::new(),
            args: Vec::new(),
            cwd: PathBuf::new(),
            env: Vec::new(),
        };
        let ordered = order(vec![
            job("zz_unit"),
            job("health_flood"),
            job("a_unit"),
            job("loadbalancer"),
        ]);
        let names: Vec<&str> = ordered.iter().map(|j| j.title.as_str()).collect();
        assert_eq!(names, ["loadbalancer", "health_flood", "a_unit", "zz_unit"]);
    }

    #[test]
    fn a_failing_binary_fails_the_run_after_the_others_ran() {
        let job = |t: &str, prog: &str, args: &[&str]| Job {
            title: t.to_string(),
            weight: 0,
            program: PathBuf::from(prog),
            args: args.iter().map(|s| s.to_string()).collect(),
            cwd: std::env::temp_dir(),
            env: Vec::new(),
        };
        let err = run(
            vec![
                job("bad", "false", &[]),
                job(
                    "good",
                    "echo",
                    &["test result: ok. 3 passed; 0 failed; 0 ignored"],
                ),
                job("missing", "/nonexistent/sluice-test-binary", &[]),
            ],
            2,
            Duration::from_secs(60),
        )
        .verdict()
        .expect_err("two failed");
        let msg = err.to_string();
        assert!(
            msg.contains("2 of 3 test runs failed")
                && msg.contains("bad")
                && msg.contains("missing"),
            "{msg}"
        );
    }

    #[test]
    fn a_long_binary_is_dealt_into_shards_of_exact_names() {
        let listing = "a::one: test\na::two: test\nb::three: test\nb::four: test\nb::five: test\nbench_x: benchmark\n";
        let names = parse_test_list(listing);
        assert_eq!(names.len(), 5, "{names:?}");
        let long = Job {
            title: "tests/lb.rs (x)".to_string(),
            weight: 300,
            program: PathBuf::from("x"),
            args: Vec::new(),
            cwd: PathBuf::new(),
            env: Vec::new(),
        };
        let shards = split(&long, &names);
        assert_eq!(shards.len(), 3);
        assert_eq!(shards[0].args, ["--exact", "a::one", "b::four"]);
        assert_eq!(shards[1].args, ["--exact", "a::two", "b::five"]);
        assert_eq!(shards[2].args, ["--exact", "b::three"]);
        assert_eq!(shards[2].title, "tests/lb.rs (x) [shard 3 of 3: 1 tests]");
        assert!(shards.iter().all(|s| s.weight == 100));
        // Every test in exactly one shard.
        let mut all: Vec<&String> = shards.iter().flat_map(|s| &s.args[1..]).collect();
        all.sort();
        let mut want: Vec<&String> = names.iter().collect();
        want.sort();
        assert_eq!(all, want);
        // Never more shards than tests; a short binary stays whole.
        assert_eq!(split(&long, &names[..2]).len(), 2);
        let short = Job {
            weight: 30,
            ..long.clone()
        };
        assert_eq!(shard(vec![short.clone()], &[]), vec![short]);
        // The caller's own arguments: no sharding.
        assert_eq!(shard(vec![long.clone()], &["x".to_string()]), vec![long]);
    }

    #[test]
    fn bad_lane_counts_are_named() {
        assert_eq!(parse_lanes(None).expect("default"), 3);
        assert_eq!(parse_lanes(Some(" 2 ")).expect("two"), 2);
        for bad in ["0", "many", "17", ""] {
            let err = parse_lanes(Some(bad)).expect_err(bad).to_string();
            assert!(err.contains("SLUICE_TEST_LANES"), "{err}");
        }
    }

    #[test]
    fn bad_time_limits_are_named() {
        assert_eq!(
            parse_limit(None).expect("default"),
            Duration::from_secs(1200)
        );
        assert_eq!(
            parse_limit(Some("90")).expect("90"),
            Duration::from_secs(90)
        );
        for bad in ["0", "9", "5401", "1h", "", "-5"] {
            let err = parse_limit(Some(bad)).expect_err(bad).to_string();
            assert!(err.contains("SLUICE_TEST_TIMEOUT"), "{err}");
        }
    }

    #[test]
    fn a_run_past_its_limit_is_stopped_with_what_it_started() {
        // The job starts a child of its own that would outlive it (as a
        // test's etcd would): the group is stopped, so the pipes close and
        // the run ends near the limit, not after the sleeps.
        let job = Job {
            title: "hangs".into(),
            weight: 0,
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), "sleep 300 & echo child=$!; sleep 300".into()],
            cwd: std::env::temp_dir(),
            env: Vec::new(),
        };
        let out = run_one(&job, Duration::from_millis(300), &Running::default());
        assert!(!out.ok);
        assert!(
            out.output.contains("hangs stopped: still running after"),
            "{}",
            out.output
        );
        assert!(out.pid.is_some());
        assert_eq!(
            still_running(child_pid(&out.output)),
            None,
            "the job's child outlived it"
        );
    }

    /// The pid a job printed as `child=PID`.
    fn child_pid(output: &str) -> u32 {
        output
            .lines()
            .find_map(|l| l.strip_prefix("child=")?.trim().parse().ok())
            .expect("the child's pid")
    }

    /// The process's `/proc` state if it still runs after up to 5 s.
    /// Gone, or a zombie waiting for its new parent to reap it, is `None`.
    /// A process closes its files before it becomes a zombie, so the pipes'
    /// end can come a moment before: look for a while.
    fn still_running(child: u32) -> Option<String> {
        let alive = || {
            let state = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let running = state
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'));
            running.then_some(state)
        };
        let mut state = alive();
        for _ in 0..100 {
            if state.is_none() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            state = alive();
        }
        state
    }

    #[test]
    fn an_interrupted_run_stops_what_its_tests_started_and_starts_no_more() {
        // The first job leaves a child behind, as a test's controller or
        // agent would; the interrupt comes once that child is written down.
        let dir =
            std::env::temp_dir().join(format!("sluice-xtask-interrupt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let marker = dir.join("child");
        let job = |title: &str, script: String| Job {
            title: title.into(),
            weight: 0,
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), script],
            cwd: std::env::temp_dir(),
            env: Vec::new(),
        };
        let jobs = vec![
            job(
                "first",
                format!(
                    "sleep 300 & echo child=$! > {m}.tmp && mv {m}.tmp {m}; echo child=$!; sleep 300",
                    m = marker.display()
                ),
            ),
            job("second", "echo never".into()),
        ];
        let seen = marker.clone();
        let interrupt: Interrupt = Arc::new(move || seen.exists());
        let report = run_until(jobs, 1, Duration::from_secs(600), interrupt);
        let child = child_pid(&std::fs::read_to_string(&marker).unwrap_or_default());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            still_running(child),
            None,
            "the interrupted job's child outlived the run"
        );
        assert_eq!(report.ran, 1, "the second job started after the interrupt");
        let err = report.verdict().expect_err("an interrupted run fails");
        assert!(
            err.to_string()
                .contains("interrupted: 1 of 2 test runs ran"),
            "{err}"
        );
    }

    #[test]
    fn a_run_within_its_limit_is_not_stopped() {
        let job = Job {
            title: "quick".into(),
            weight: 0,
            program: PathBuf::from("echo"),
            args: vec!["test result: ok. 1 passed; 0 failed".into()],
            cwd: std::env::temp_dir(),
            env: Vec::new(),
        };
        let out = run_one(&job, Duration::from_secs(30), &Running::default());
        assert!(out.ok, "{}", out.output);
        assert!(!out.output.contains("stopped"), "{}", out.output);
    }

    #[test]
    fn output_that_is_not_utf8_is_read_to_its_end() {
        let got = read_lines(&b"test a ... ok\n\xff\xfe bad\ntest result: ok. 1 passed"[..]);
        assert_eq!(
            got,
            "test a ... ok\n\u{fffd}\u{fffd} bad\ntest result: ok. 1 passed\n"
        );
        assert_eq!(read_lines(&b""[..]), "");
    }
}
