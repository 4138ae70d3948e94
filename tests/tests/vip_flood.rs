//! Idle connections flooding a VIP while a client loops through another
//! (issue 13's hostile round). Real agents in the test bed's namespaces,
//! both engines, real sockets.
//!
//! A client opens more idle connections through a `Cluster` VIP than the
//! node has SNAT ports for that endpoint (a range of 512 here, through the
//! agent's `--snat-port-range`), holds them, and then aborts them. What must
//! hold: a connect gets an answer or a reset at once, never silence; the
//! ports are the endpoint's own, so another Service's clients (SNATed to
//! another endpoint) and a `Local` VIP's (not SNATed) are served all along;
//! and the aborted flows give their ports back at once.
//!
//! Bounded by counts and time; assertions are on counts only.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use sluice_tests::{
    in_ns, raise_nofile_limit, tcp_request, Cluster, ClusterSpec, EndpointSpec, Engine, Family,
    Policy, ServiceSpec, TcpOutcome, Traffic,
};

/// The SNAT range every agent here gets: `PORTS` ports per endpoint.
const RANGE: &str = "--snat-port-range=61000-61511";
const PORTS: usize = 512;
/// Idle connects through the flooded VIP: more than the range holds.
const FLOOD: usize = 600;
/// Connects after the flood was aborted, each of which must find a port.
const AFTER: usize = 50;
/// A connect neither answered nor reset within this went unanswered.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The whole flood, however many connects it got to.
const FLOOD_DEADLINE: Duration = Duration::from_secs(60);
/// How long the flood is held, idle, while the other clients go on.
const HOLD: Duration = Duration::from_secs(3);
/// The idle server's port in the pod (the who-am-I server has 8080).
const IDLE_PORT: u16 = 9090;

/// Accepts every connection and keeps it, reading nothing, until dropped.
struct Holder {
    stop: Arc<AtomicBool>,
    held: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Holder {
    fn start(ns: &str, addr: SocketAddr) -> Holder {
        let l = in_ns(ns, move || TcpListener::bind(addr))
            .expect("pod namespace")
            .expect("idle server binds");
        l.set_nonblocking(true).expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicUsize::new(0));
        let (s, h) = (stop.clone(), held.clone());
        let thread = thread::spawn(move || {
            let mut conns: Vec<TcpStream> = Vec::new();
            while !s.load(Relaxed) {
                match l.accept() {
                    Ok((c, _)) => {
                        conns.push(c);
                        h.store(conns.len(), Relaxed);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Holder {
            stop,
            held,
            thread: Some(thread),
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a run of connects got.
#[derive(Debug, Default)]
struct Connects {
    open: Vec<TcpStream>,
    reset: usize,
    /// Anything but an answer or a reset, with when it happened.
    other: Vec<String>,
}

/// Up to `n` connects to `dst` from namespace `ns`, kept open, within
/// `FLOOD_DEADLINE`.
fn connect_many(ns: &str, dst: SocketAddr, n: usize) -> Connects {
    in_ns(ns, move || {
        let t0 = Instant::now();
        let mut r = Connects::default();
        for i in 0..n {
            if t0.elapsed() > FLOOD_DEADLINE {
                r.other.push(format!("out of time after {i} connects"));
                break;
            }
            match TcpStream::connect_timeout(&dst, CONNECT_TIMEOUT) {
                Ok(s) => r.open.push(s),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => r.reset += 1,
                Err(e) => r.other.push(format!(
                    "connect {i}: {e} at {:.2} s",
                    t0.elapsed().as_secs_f64()
                )),
            }
        }
        r
    })
    .expect("client namespace")
}

/// Close each with a reset (`SO_LINGER` 0), as a client that gives up does.
fn abort(conns: Vec<TcpStream>) {
    for s in conns {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket and a `linger` of the size given.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_LINGER");
        drop(s);
    }
}

// spec: P3, P4
fn idle_flood_leaves_other_clients_served(engine: Engine, f: Family) {
    raise_nofile_limit(2 * (FLOOD + AFTER) + 512);
    let tag = match (engine, f) {
        (Engine::Kernel, Family::V4) => "vfk4",
        (Engine::Kernel, Family::V6) => "vfk6",
        (_, Family::V4) => "vfe4",
        (_, Family::V6) => "vfe6",
    };
    let c = Cluster::start(
        tag,
        engine,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            // The flooded endpoint: the idle server's port, its own ports.
            .service(
                ServiceSpec::lb("flood", 1)
                    .policy(Policy::Cluster)
                    .tcp("idle", 90, IDLE_PORT)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            // Another endpoint of the same pod (the who-am-I port).
            .service(
                ServiceSpec::lb("web", 2)
                    .policy(Policy::Cluster)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            // The same pod, the client's address kept: no SNAT port used.
            .service(
                ServiceSpec::lb("local", 3)
                    .policy(Policy::Local)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            .agent_arg(RANGE),
    )
    .expect("cluster starts and every agent applies its state");
    let pod_ns = c.pod("web-1").expect("pod namespace").name().to_string();
    let pod_ip: IpAddr = c.pod_ip("web-1", f).expect("pod ip");
    let holder = Holder::start(&pod_ns, SocketAddr::new(pod_ip, IDLE_PORT));
    let flood_vip = c.vip("flood", f, 90).expect("flood vip");
    let web_vip = c.vip("web", f, 80).expect("web vip");
    let local_vip = c.vip("local", f, 80).expect("local vip");

    let traffic = Traffic::start(c.client_ns(), web_vip);
    let flood = connect_many(c.client_ns(), flood_vip, FLOOD);
    assert!(
        flood.other.is_empty(),
        "flood connects neither answered nor reset ({} open, {} reset): {:?}",
        flood.open.len(),
        flood.reset,
        &flood.other[..flood.other.len().min(3)]
    );
    let open = flood.open.len();
    assert_eq!(open + flood.reset, FLOOD, "every connect accounted for");
    // Each open flow holds one of the endpoint's ports; sixteen random
    // tries per SYN find most of them (about 490 of 512 in runs).
    assert!(
        (PORTS * 3 / 4..=PORTS).contains(&open),
        "{open} of {FLOOD} connects open with {PORTS} ports ({} reset)",
        flood.reset
    );
    assert!(flood.reset > 0, "more connects than ports, yet none reset");

    // Held idle while the other clients go on.
    let held_until = Instant::now() + HOLD;
    let mut local_answers = 0;
    while Instant::now() < held_until {
        match tcp_request(c.client_ns(), local_vip).expect("client runs") {
            TcpOutcome::Reply { reply, .. } => {
                assert_eq!(
                    reply.peer.ip().to_canonical(),
                    f.client_ip(),
                    "Local keeps the client's address"
                );
                local_answers += 1;
            }
            other => panic!("through the Local VIP during the flood: {other:?}"),
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert!(local_answers > 0, "no Local request during the hold");
    let accepted = holder.held.load(Relaxed);
    assert!(
        accepted >= open,
        "the pod accepted {accepted} connections, the client has {open} open"
    );

    // Aborted: resets free the ports at once.
    abort(flood.open);
    thread::sleep(Duration::from_millis(300));
    let again = connect_many(c.client_ns(), flood_vip, AFTER);
    assert!(
        again.reset == 0 && again.other.is_empty(),
        "after the flood was aborted: {} open, {} reset, {:?}",
        again.open.len(),
        again.reset,
        &again.other[..again.other.len().min(3)]
    );
    abort(again.open);

    let (answered, failed, errors) = traffic.finish();
    eprintln!(
        "flood: {open} of {FLOOD} open, {} reset; {local_answers} Local answers during the hold; \
         {AFTER} connects after the abort; the other Service: {answered} answered, {failed} failed",
        flood.reset
    );
    assert_eq!(
        failed,
        0,
        "the other Service's client failed {failed} times ({answered} answered): {:?}",
        &errors[..errors.len().min(3)]
    );
    assert!(
        answered >= 10,
        "the other Service's client got {answered} answers"
    );
    drop(holder);
}

#[test]
fn emulated_v4() {
    idle_flood_leaves_other_clients_served(Engine::Emulated, Family::V4);
}

#[test]
fn kernel_v4() {
    idle_flood_leaves_other_clients_served(Engine::Kernel, Family::V4);
}

#[test]
fn kernel_v6() {
    idle_flood_leaves_other_clients_served(Engine::Kernel, Family::V6);
}
