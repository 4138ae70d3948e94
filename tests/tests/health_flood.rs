//! The health ports under a connection flood (issue 8): thousands of idle and
//! slowloris sockets against 10256 and a Service's `healthCheckNodePort`
//! while a load balancer's probes keep coming. Against the real agent in the
//! test bed's namespaces (client 198.18.0.2 → node 198.18.0.11), emulated
//! engine: health answers come from the agent, not the packet path.
//!
//! Bounded by counts and time (the flood runs while the probes run, at most
//! `FLOOD_FOR`); every assertion is on counts, none on how long anything took.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_tests::{
    http_get, in_ns, raise_nofile_limit, Cluster, ClusterSpec, EndpointSpec, Engine, Family,
    Policy, ServiceSpec,
};

const HC_PORT: u16 = 30_124;
/// Flood sockets per port, half idle, half slowloris: 2 200 in all, each
/// port's share above the agent's budget of 1 024 per listener.
const PER_PORT: usize = 1_100;
/// Probes run (and the flood with them) this long, or until `MAX_PROBES`.
const FLOOD_FOR: Duration = Duration::from_secs(32);
const MAX_PROBES: usize = 1_000;
/// Between probe rounds (one probe to each port per round).
const PROBE_GAP: Duration = Duration::from_millis(75);
/// A flood worker's sweep: reconnect what the agent closed, feed slowloris.
const SWEEP_GAP: Duration = Duration::from_millis(250);
/// A slowloris sends one more byte of its head this often, never the end.
const SLOW_BYTE_EVERY: Duration = Duration::from_millis(700);
const SLOW_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: node\r\nX-Slow: ";

/// The test process holds the flood's sockets itself.
/// The two tests flood the same two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Debug, Default)]
struct FloodCounts {
    /// Sockets connected (the first time and after every close).
    connects: AtomicU64,
    connect_failures: AtomicU64,
    /// Closed by the agent (shed or timed out) as the flood saw it.
    closed_by_agent: AtomicU64,
    /// Open right now, all workers together.
    open: AtomicU64,
}

struct Held {
    s: TcpStream,
    sent: usize,
    last_byte: Instant,
}

/// True once the agent closed `s` (EOF, reset, or anything but "nothing yet").
fn closed(mut s: &TcpStream) -> bool {
    let mut b = [0u8; 256];
    match s.read(&mut b) {
        // EOF: closed.
        Ok(0) => true,
        // The agent answers an incomplete head only to refuse it (a 4xx),
        // then closes; anything else would be read again next sweep.
        Ok(n) => b[..n].starts_with(b"HTTP/"),
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// Keeps `n` sockets to `addr` open until `stop`: reconnects each one the
/// agent closes; a slowloris writes one more byte of a head that never ends
/// every `SLOW_BYTE_EVERY`. Runs inside the client namespace.
fn hold(addr: SocketAddr, n: usize, slowloris: bool, stop: &AtomicBool, c: &FloodCounts) {
    let mut socks: Vec<Option<Held>> = (0..n).map(|_| None).collect();
    while !stop.load(Relaxed) {
        for slot in socks.iter_mut() {
            if stop.load(Relaxed) {
                break;
            }
            let alive = match slot {
                None => false,
                Some(h) if closed(&h.s) => false,
                Some(h) if slowloris && h.last_byte.elapsed() >= SLOW_BYTE_EVERY => {
                    let byte = SLOW_HEAD.get(h.sent).copied().unwrap_or(b'a');
                    h.sent += 1;
                    h.last_byte = Instant::now();
                    h.s.write(&[byte]).is_ok()
                }
                Some(_) => true,
            };
            if alive {
                continue;
            }
            if slot.take().is_some() {
                c.closed_by_agent.fetch_add(1, Relaxed);
                c.open.fetch_sub(1, Relaxed);
            }
            let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
                c.connect_failures.fetch_add(1, Relaxed);
                continue;
            };
            let mut h = Held {
                s,
                sent: 0,
                last_byte: Instant::now(),
            };
            if slowloris {
                // The first byte at once: from here on it is a partial head.
                h.sent = h.s.write(&SLOW_HEAD[..1]).unwrap_or(0);
            }
            if h.s.set_nonblocking(true).is_err() {
                continue;
            }
            c.connects.fetch_add(1, Relaxed);
            c.open.fetch_add(1, Relaxed);
            *slot = Some(h);
        }
        std::thread::sleep(SWEEP_GAP);
    }
    let left = socks.iter().filter(|s| s.is_some()).count() as u64;
    c.open.fetch_sub(left, Relaxed);
}

/// The flood's worker threads; stopped and joined when dropped, also when an
/// assertion fails (before the cluster's own guard removes the namespaces).
struct Flood {
    stop: Arc<AtomicBool>,
    counts: Arc<FloodCounts>,
    workers: Vec<JoinHandle<()>>,
}

impl Flood {
    /// `per_target` sockets to each target, half idle, half slowloris.
    fn start(ns: &str, targets: &[SocketAddr], per_target: usize) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(FloodCounts::default());
        let mut workers = Vec::new();
        for &addr in targets {
            for slowloris in [false, true] {
                let (ns, stop, counts) = (ns.to_string(), stop.clone(), counts.clone());
                let n = per_target / 2;
                workers.push(std::thread::spawn(move || {
                    let r = in_ns(&ns, move || hold(addr, n, slowloris, &stop, &counts));
                    if let Err(e) = r {
                        eprintln!("flood worker for {addr}: {e:#}");
                    }
                }));
            }
        }
        Flood {
            stop,
            counts,
            workers,
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// `name{labels} value` from a Prometheus text body.
fn sample(metrics: &str, name_and_labels: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[derive(Debug, Default)]
struct Probes {
    sent: usize,
    answered_200: usize,
    failures: Vec<String>,
}

impl Probes {
    fn run(&mut self, ns: &str, addr: SocketAddr, path: &str) {
        self.sent += 1;
        match http_get(ns, addr, path) {
            Ok(a) if a.status == 200 => self.answered_200 += 1,
            Ok(a) => self
                .failures
                .push(format!("{addr}{path}: status {}", a.status)),
            Err(e) => self.failures.push(format!("{addr}{path}: {e:#}")),
        }
    }

    fn assert_99_percent(&self, what: &str) {
        assert!(self.sent >= 100, "{what}: only {} probes", self.sent);
        // ≥ 99 %: at most one failure in a hundred.
        assert!(
            self.answered_200 * 100 >= self.sent * 99,
            "{what}: {} of {} probes answered 200; first failures: {:?}",
            self.answered_200,
            self.sent,
            &self.failures[..self.failures.len().min(10)]
        );
    }
}

/// Probes every target once per round, `PROBE_GAP` apart, for `window` (or
/// `MAX_PROBES` rounds); also the most flood sockets seen open at once.
fn probe_rounds(
    ns: &str,
    targets: &[(SocketAddr, &str)],
    flood: &Flood,
    window: Duration,
) -> (Vec<Probes>, u64) {
    let mut probes: Vec<Probes> = targets.iter().map(|_| Probes::default()).collect();
    let mut peak_open = 0;
    let started = Instant::now();
    for _ in 0..MAX_PROBES {
        if started.elapsed() >= window {
            break;
        }
        for (p, (addr, path)) in probes.iter_mut().zip(targets) {
            p.run(ns, *addr, path);
        }
        peak_open = peak_open.max(flood.counts.open.load(Relaxed));
        std::thread::sleep(PROBE_GAP);
    }
    (probes, peak_open)
}

/// `/metrics` once every sample in `wanted` is above zero (the agent
/// refreshes it every poll); panics naming what is missing otherwise.
fn metrics_with(c: &Cluster, wanted: &[String]) -> String {
    let addr = SocketAddr::new(Family::V4.node_ip(1), 10249);
    let mut m = String::new();
    for _ in 0..50 {
        m = http_get(c.client_ns(), addr, "/metrics")
            .map(|a| a.body)
            .unwrap_or_default();
        if wanted.iter().all(|w| sample(&m, w).is_some_and(|v| v > 0)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for w in wanted {
        assert!(
            sample(&m, w).is_some_and(|v| v > 0),
            "{w} missing or zero in\n{m}\n{}",
            c.agent_log(1)
        );
    }
    eprintln!(
        "{}",
        m.lines()
            .filter(|l| l.starts_with("sluice_health_conn") || l.starts_with("sluice_health_accept"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    m
}

fn local_web_cluster(tag: &str) -> Cluster {
    Cluster::start(
        tag,
        Engine::Emulated,
        ClusterSpec::new(1).pod("web-1", 1).service(
            ServiceSpec::lb("web", 1)
                .policy(Policy::Local)
                .tcp("http", 80, 8080)
                .health_check_node_port(HC_PORT)
                .endpoint(EndpointSpec::ready("web-1")),
        ),
    )
    .expect("cluster")
}

/// Both ports answer 200, once each.
fn assert_answering(c: &Cluster, targets: &[(SocketAddr, &str)], when: &str) {
    for (a, path) in targets {
        let r =
            http_get(c.client_ns(), *a, path).unwrap_or_else(|e| panic!("{a}{path} {when}: {e:#}"));
        assert_eq!(r.status, 200, "{a}{path} {when}: {r:?}");
    }
}

#[test]
fn health_ports_keep_answering_probes_under_an_idle_and_slowloris_flood() {
    // spec: H1, H3, H4 — every node answers its check (10256 and the
    // Service's own port) while the load balancer probes, whatever else
    // holds connections to those ports; a node pulled for a flood would lose
    // its flows for nothing.
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    raise_nofile_limit(2 * PER_PORT + 512);
    let c = local_web_cluster("hfl");
    // The client namespace opens thousands of connections a second: room for
    // every ephemeral port the test could want.
    c.client()
        .sysctl("net.ipv4.ip_local_port_range", "1024 65000")
        .expect("port range");
    let ns = c.client_ns().to_string();
    let node_ip = Family::V4.node_ip(1);
    let node = SocketAddr::new(node_ip, 10256);
    let svc = SocketAddr::new(node_ip, HC_PORT);
    let targets = [(node, "/healthz"), (svc, "/")];
    assert_answering(&c, &targets, "before the flood");

    let flood = Flood::start(&ns, &[node, svc], PER_PORT);
    let (probes, peak_open) = probe_rounds(&ns, &targets, &flood, FLOOD_FOR);
    let counts = format!("{:?}", flood.counts);
    let connects = flood.counts.connects.load(Relaxed);
    drop(flood);

    eprintln!(
        "flood: {counts}, peak open {peak_open}; /healthz {}/{} answered 200, \
         service port {}/{}",
        probes[0].answered_200, probes[0].sent, probes[1].answered_200, probes[1].sent
    );
    assert!(
        peak_open >= 2_000,
        "the flood held {peak_open} connections at most ({counts})"
    );
    assert!(connects >= 2 * PER_PORT as u64, "{counts}");
    probes[0].assert_99_percent("10256 /healthz");
    probes[1].assert_99_percent("health check node port");

    // The agent says what it dropped, per listener.
    let mut wanted = Vec::new();
    for (listener, port) in [("node", 10256), ("service", HC_PORT)] {
        let l = format!("listener=\"{listener}\",port=\"{port}\"");
        wanted.push(format!(
            "sluice_health_connections_shed_total{{{l},reason=\"idle\"}}"
        ));
        wanted.push(format!(
            "sluice_health_connections_shed_total{{{l},reason=\"partial_request\"}}"
        ));
        wanted.push(format!(
            "sluice_health_connections_timed_out_total{{{l},deadline=\"head\"}}"
        ));
    }
    metrics_with(&c, &wanted);
    assert_answering(&c, &targets, "after the flood");
}

/// User and system CPU time of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at "state".
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

#[test]
fn an_agent_out_of_descriptors_sheds_and_keeps_answering() {
    // spec: H1, H4 — when the agent runs out of file descriptors, accept
    // fails with EMFILE: the listener gives back one of its own idle
    // connections and takes the probe, rather than spin on a readable
    // listener or leave probes in the backlog.
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    raise_nofile_limit(2 * PER_PORT + 512);
    let c = local_web_cluster("hfd");
    let ns = c.client_ns().to_string();
    let pid = c.agent_pid(1).expect("agent pid");
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .expect("the agent's descriptors") as u64;
    // A hundred and fifty descriptors left: far fewer than the flood's 600
    // sockets, far below the listener's budget of 1 024.
    let limit = libc::rlimit {
        rlim_cur: open_fds + 150,
        rlim_max: open_fds + 150,
    };
    // SAFETY: `limit` is a valid rlimit; a null old-limit pointer is allowed.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let node = SocketAddr::new(Family::V4.node_ip(1), 10256);
    let targets = [(node, "/healthz")];

    let flood = Flood::start(&ns, &[node], 600);
    let cpu_before = cpu_ticks(pid);
    let started = Instant::now();
    let (probes, peak_open) = probe_rounds(&ns, &targets, &flood, Duration::from_secs(15));
    let cpu = cpu_ticks(pid).saturating_sub(cpu_before);
    let elapsed = started.elapsed();
    let counts = format!("{:?}", flood.counts);
    drop(flood);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    eprintln!(
        "fd limit {} (open at start {open_fds}); flood: {counts}, peak open {peak_open}; \
         /healthz {}/{} answered 200; agent CPU {:.0} % of one core over the window",
        limit.rlim_cur,
        probes[0].answered_200,
        probes[0].sent,
        100.0 * cpu as f64 / hz / elapsed.as_secs_f64()
    );
    probes[0].assert_99_percent("10256 /healthz with descriptors exhausted");
    let m = metrics_with(
        &c,
        &["sluice_health_accept_errors_total{listener=\"node\",port=\"10256\",kind=\"descriptors\"}".to_string()],
    );
    let errors = sample(
        &m,
        "sluice_health_accept_errors_total{listener=\"node\",port=\"10256\",kind=\"descriptors\"}",
    )
    .unwrap_or(0);
    let shed: u64 = ["idle", "partial_request", "stalled_write"]
        .iter()
        .filter_map(|r| {
            sample(
                &m,
                &format!("sluice_health_connections_shed_total{{listener=\"node\",port=\"10256\",reason=\"{r}\"}}"),
            )
        })
        .sum();
    // No spinning: every failed accept either shed a connection or paused
    // at least 5 ms (the first back-off step), so the failures are bounded
    // by the sheds plus the pauses the window could hold. A spinning loop
    // fails millions of times. (Counts only: a slower machine fails less.)
    let pauses_at_most = (started.elapsed().as_millis() / 5) as u64 + 1;
    assert!(
        errors <= shed + pauses_at_most,
        "{errors} failed accepts, {shed} shed, at most {pauses_at_most} pauses"
    );
    assert_answering(&c, &targets, "after the flood");
}
