//! The measurements: iperf3 throughput and packet rate, connect latency
//! against a server of our own, each bounded in time.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use sluice_tests::netns::{spawn_in, stop_child};
use sluice_tests::Netns;

use super::*;

// --- measurements -----------------------------------------------------------

/// Where a configuration's traffic goes.
pub(super) struct Dsts {
    /// iperf3's server: the `Cluster` VIP, or the pod for the ceiling.
    pub(super) iperf: Ipv4Addr,
    /// The connect server through the `Cluster` VIP (the pod directly for
    /// the ceiling).
    pub(super) connect: SocketAddr,
    /// The connect server through the `Local` VIP (none for the ceiling).
    pub(super) local: Option<SocketAddr>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    r: &mut ConfigResult,
    plan: &Plan,
    client: &Netns,
    pod: &Netns,
    dsts: Dsts,
    first_apply: f64,
    mut apply: impl FnMut(usize) -> Result<f64>,
    cooldown: Option<Duration>,
    sustained: bool,
) -> Result<()> {
    pod.spawn(
        &["iperf3", "-s", "-p", &IPERF_PORT.to_string()],
        Stdio::null(),
        Stdio::null(),
    )?;
    let server = ConnectServer::start(pod.name(), CONNECT_TARGET)?;
    let (dst, lat_dst) = (dsts.iperf, dsts.connect);
    wait_reachable(client.name(), SocketAddr::new(dst.into(), IPERF_PORT))?;

    r.tcp1_gbps = best_of_2(|| iperf_tcp(client.name(), dst, 1, plan.duration));
    println!("    TCP 1 stream: {}", fmt_gbps(&r.tcp1_gbps));
    check_interrupted()?;
    r.tcpn_gbps = best_of_2(|| iperf_tcp(client.name(), dst, plan.streams, plan.duration));
    println!(
        "    TCP {} streams: {}",
        plan.streams,
        fmt_gbps(&r.tcpn_gbps)
    );
    check_interrupted()?;
    r.udp_pps = best_of_2(|| iperf_udp(client.name(), dst, plan.duration));
    println!("    UDP 64 B: {}", fmt_kpps(&r.udp_pps));
    check_interrupted()?;

    let mut last_loop: Option<Instant> = None;
    for (k, &n) in plan.counts.iter().enumerate() {
        let t_apply = if k == 0 {
            M::Ok(first_apply)
        } else {
            M::from(apply(n))
        };
        check_interrupted()?;
        if let M::Err(e) = &t_apply {
            println!("    {n} Services: could not apply ({e})");
            r.connect.push((n, t_apply, M::Skipped));
            continue;
        }
        cool_down(cooldown, last_loop);
        // Let the previous traffic and the rule/state change settle.
        thread::sleep(Duration::from_secs(1));
        check_interrupted()?;
        let lat = M::from(connect_loop(client.name(), lat_dst, plan.connects));
        last_loop = Some(Instant::now());
        println!(
            "    {n} Services (applied in {}): connect {}",
            fmt_secs(&t_apply),
            fmt_lat(&lat)
        );
        r.connect.push((n, t_apply, lat));
    }
    if sustained {
        cool_down(cooldown, last_loop);
        check_interrupted()?;
        r.sustained = M::from(sustained_connects(
            client.name(),
            pod.name(),
            lat_dst,
            SUSTAINED_IN_FLIGHT,
            plan.sustained,
        ));
        println!("    sustained connects: {}", fmt_sustained(&r.sustained));
        // Independent of the run above: the pod's TIME_WAIT sockets from it
        // are the node's tuples, these the client's own.
        if let Some(local) = dsts.local {
            check_interrupted()?;
            r.sustained_local = M::from(sustained_connects(
                client.name(),
                pod.name(),
                local,
                SUSTAINED_IN_FLIGHT,
                plan.sustained,
            ));
            println!(
                "    sustained connects, Local: {}",
                fmt_sustained(&r.sustained_local)
            );
        }
    }
    drop(server);
    Ok(())
}

/// Wait until `cooldown` has passed since the last connect loop ended.
fn cool_down(cooldown: Option<Duration>, last_loop: Option<Instant>) {
    if let (Some(cd), Some(at)) = (cooldown, last_loop) {
        let since = at.elapsed();
        if since < cd {
            thread::sleep(cd - since);
        }
    }
}

/// New connections for `duration`, `in_flight` at a time, each a connect,
/// a byte, its answer and a close (the server closes first): what a
/// Service of short requests puts through one endpoint. Counts how
/// connects fail, those answered only after a second (a SYN retransmitted),
/// and the client namespace's SYN retransmits.
pub(super) fn sustained_connects(
    ns: &str,
    pod_ns: &str,
    dst: SocketAddr,
    in_flight: usize,
    duration: Duration,
) -> Result<Sustained> {
    let pod_before = pod_tcp(pod_ns)?;
    let mut out = sluice_tests::in_ns(ns, move || -> Result<Sustained> {
        let before = sluice_tests::syn_retransmits()?;
        let start = Instant::now();
        let deadline = start + duration;
        // Threads start in this thread's network namespace.
        let workers: Vec<_> = (0..in_flight)
            .map(|_| {
                thread::spawn(move || {
                    let mut s = Sustained::default();
                    while Instant::now() < deadline && !interrupted() {
                        let t = Instant::now();
                        let r = short_request(dst, Duration::from_secs(3));
                        s.add(r, t.elapsed());
                    }
                    s
                })
            })
            .collect();
        let mut total = Sustained::default();
        for w in workers {
            let s = w
                .join()
                .map_err(|_| anyhow::anyhow!("a connect thread panicked"))?;
            total.merge(&s);
        }
        total.secs = start.elapsed().as_secs_f64();
        total.syn_retrans = sluice_tests::syn_retransmits()?.saturating_sub(before);
        Ok(total)
    })??;
    out.pod = pod_tcp(pod_ns)?.since(pod_before);
    check_interrupted()?;
    Ok(out)
}

/// Connect, one byte each way, close: one short request, each step bounded
/// by `timeout`.
pub(super) fn short_request(dst: SocketAddr, timeout: Duration) -> std::io::Result<()> {
    let mut c = TcpStream::connect_timeout(&dst, timeout)?;
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(timeout))?;
    c.write_all(b"x")?;
    let mut b = [0u8; 1];
    c.read_exact(&mut b)
}

impl Sustained {
    /// Count one request's outcome; `took` from before its connect.
    pub(super) fn add(&mut self, r: std::io::Result<()>, took: Duration) {
        match r {
            Ok(()) => {
                self.ok += 1;
                if took >= SLOW_CONNECT {
                    self.slow += 1;
                }
            }
            Err(e) => match e.kind() {
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset => {
                    self.reset += 1
                }
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    self.timed_out += 1
                }
                _ => self.other += 1,
            },
        }
    }

    /// Add another thread's counts (not the run-wide fields).
    pub(super) fn merge(&mut self, o: &Sustained) {
        self.ok += o.ok;
        self.reset += o.reset;
        self.timed_out += o.timed_out;
        self.other += o.other;
        self.slow += o.slow;
    }
}

/// The pod namespace's TCP counters that explain unanswered SYNs.
pub(super) fn pod_tcp(ns: &str) -> Result<PodTcp> {
    sluice_tests::in_ns(ns, || -> Result<PodTcp> {
        let get = sluice_tests::netns::tcp_ext_counter;
        Ok(PodTcp {
            paws_timewait: get("PAWSTimewait")?,
            listen_drops: get("ListenDrops")?,
            tw_overflow: get("TCPTimeWaitOverflow")?,
        })
    })?
    .context("reading the pod's TCP counters")
}

impl PodTcp {
    pub(super) fn since(self, before: PodTcp) -> PodTcp {
        PodTcp {
            paws_timewait: self.paws_timewait.saturating_sub(before.paws_timewait),
            listen_drops: self.listen_drops.saturating_sub(before.listen_drops),
            tw_overflow: self.tw_overflow.saturating_sub(before.tw_overflow),
        }
    }
}

/// The better of two runs: on a shared machine a run loses, never gains,
/// from what else is running.
pub(super) fn best_of_2(mut f: impl FnMut() -> Result<f64>) -> M<f64> {
    let a = f();
    if interrupted() {
        return M::from(a);
    }
    let b = f();
    match (a, b) {
        (Ok(x), Ok(y)) => M::Ok(x.max(y)),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => M::Ok(x),
        (Err(e), Err(_)) => M::Err(short_err(&e)),
    }
}

/// Until a TCP connect to `dst` from `ns` succeeds (at most 10 s).
pub(super) fn wait_reachable(ns: &str, dst: SocketAddr) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        check_interrupted()?;
        let ok = sluice_tests::in_ns(ns, move || {
            TcpStream::connect_timeout(&dst, Duration::from_millis(500)).is_ok()
        })?;
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{dst} not reachable from the client within 10 s");
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Run `args` in `ns` with stdout to a file, bounded by `limit`; stdout.
pub(super) fn run_bounded(ns: &str, args: &[&str], limit: Duration) -> Result<String> {
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let out_path = dir.join(format!("{}-{}.out", std::process::id(), unique()));
    let err_path = out_path.with_extension("err");
    let out = fs::File::create(&out_path)?;
    let err = fs::File::create(&err_path)?;
    let mut child = spawn_in(ns, args, Stdio::from(out), Stdio::from(err))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if interrupted() || Instant::now() > deadline {
            stop_child(&mut child, Duration::from_secs(1));
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let stdout = fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    match status {
        None if interrupted() => bail!("interrupted"),
        None => bail!("`{}` did not finish within {limit:?}", args.join(" ")),
        Some(st) if !st.success() => {
            // iperf3 -J reports its errors in the JSON.
            let msg = serde_json::from_str::<Value>(&stdout)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| stderr.trim().to_string());
            bail!("`{}` failed ({st}): {msg}", args[0])
        }
        Some(_) => Ok(stdout),
    }
}

pub(super) fn unique() -> u64 {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub(super) fn iperf(ns: &str, dst: Ipv4Addr, extra: &[&str], duration: u64) -> Result<Value> {
    let dst = dst.to_string();
    let port = IPERF_PORT.to_string();
    let t = duration.to_string();
    let mut args = vec![
        "iperf3",
        "-c",
        &dst,
        "-p",
        &port,
        "-t",
        &t,
        "-J",
        "--connect-timeout",
        "3000",
    ];
    // Client on CPU 0, server on CPU 1: the same placement in every
    // configuration (forwarding runs in the sender's softirq, an agent's
    // relay thread wherever the scheduler puts it).
    if thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        >= 2
    {
        args.extend_from_slice(&["-A", "0,1"]);
    }
    args.extend_from_slice(extra);
    let mut last = None;
    // One retry: the server may be between two tests.
    for _ in 0..2 {
        match run_bounded(ns, &args, Duration::from_secs(duration + 20)) {
            Ok(out) => {
                return serde_json::from_str(&out).context("parsing iperf3 -J output");
            }
            Err(e) => {
                check_interrupted()?;
                last = Some(e);
                thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Err(last.unwrap_or_else(|| anyhow!("iperf3 did not run")))
}

pub(super) fn iperf_tcp(ns: &str, dst: Ipv4Addr, streams: u32, duration: u64) -> Result<f64> {
    let p = streams.to_string();
    let v = iperf(ns, dst, &["-P", &p], duration)?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e9)
        .ok_or_else(|| anyhow!("no end.sum_received.bits_per_second in iperf3 output"))
}

/// Received packets per second of a UDP run with 64-byte payloads and no
/// rate limit (`-b 0`).
pub(super) fn iperf_udp(ns: &str, dst: Ipv4Addr, duration: u64) -> Result<f64> {
    let v = iperf(ns, dst, &["-u", "-l", "64", "-b", "0"], duration)?;
    // The receiver's view (iperf3 ≥ 3.10), else the combined summary.
    let sum = if v["end"]["sum_received"].is_object() {
        &v["end"]["sum_received"]
    } else {
        &v["end"]["sum"]
    };
    let packets = sum["packets"]
        .as_f64()
        .ok_or_else(|| anyhow!("no end.sum.packets in iperf3 output"))?;
    let lost = sum["lost_packets"].as_f64().unwrap_or(0.0);
    let secs = sum["seconds"].as_f64().unwrap_or(duration as f64).max(0.1);
    Ok((packets - lost).max(0.0) / secs)
}

/// The pod side of the connect-latency measurement: accept, read one byte,
/// answer one byte, close (the server closes first, so the client keeps no
/// TIME_WAIT sockets and never runs out of ports).
pub(super) struct ConnectServer {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<()>>,
}

impl ConnectServer {
    pub(super) fn start(ns: &str, port: u16) -> Result<ConnectServer> {
        let l = sluice_tests::in_ns(ns, move || {
            TcpListener::bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port))
        })??;
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("bench-connect-server".into())
            .spawn(move || serve_connects(l, &s))?;
        Ok(ConnectServer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ConnectServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn serve_connects(l: TcpListener, stop: &AtomicBool) {
    let fd = l.as_raw_fd();
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the listener we own.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n <= 0 {
            continue;
        }
        while let Ok((mut s, _)) = l.accept() {
            let _ = s.set_nonblocking(false);
            let _ = s.set_nodelay(true);
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut b = [0u8; 1];
            if matches!(s.read(&mut b), Ok(1)) {
                let _ = s.write_all(&b);
            }
        }
    }
}

/// `n` times: connect, send one byte, read one byte back, close; the time of
/// each, from before connect to the answer. Bounded by
/// [`CONNECT_LOOP_LIMIT`].
pub(super) fn connect_loop(ns: &str, dst: SocketAddr, n: usize) -> Result<Latency> {
    let (mut times, failed, first_err) = sluice_tests::in_ns(ns, move || {
        let mut times: Vec<f64> = Vec::with_capacity(n);
        let mut failed = 0usize;
        let mut first_err: Option<String> = None;
        // Warm-up, not timed: neighbour entries, caches, the agent's first
        // conntrack entries.
        for _ in 0..(n / 10).clamp(5, 100) {
            if let Ok(mut s) = TcpStream::connect_timeout(&dst, Duration::from_secs(1)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(b"x");
                let _ = s.read(&mut [0u8; 1]);
            }
        }
        let start = Instant::now();
        for _ in 0..n {
            if interrupted() || start.elapsed() > CONNECT_LOOP_LIMIT {
                break;
            }
            let t = Instant::now();
            let r = (|| -> std::io::Result<()> {
                let mut s = TcpStream::connect_timeout(&dst, Duration::from_secs(1))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(1)))?;
                s.write_all(b"x")?;
                let mut b = [0u8; 1];
                s.read_exact(&mut b)?;
                Ok(())
            })();
            match r {
                Ok(()) => times.push(t.elapsed().as_secs_f64() * 1e6),
                Err(e) => {
                    failed += 1;
                    first_err.get_or_insert_with(|| e.to_string());
                }
            }
        }
        (times, failed, first_err)
    })?;
    check_interrupted()?;
    if times.is_empty() {
        bail!(
            "no connection succeeded ({failed} failed: {})",
            first_err.unwrap_or_default()
        );
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: usize| times[((times.len() * p) / 100).min(times.len() - 1)];
    Ok(Latency {
        p50_us: pct(50),
        p99_us: pct(99),
        ok: times.len(),
        failed,
        first_err,
    })
}
