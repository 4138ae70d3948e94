//! The emulated engine: `sluice_datapath::lb` in user space, where a TC
//! ingress program would run (`docs/architecture.md`, "The load
//! balancer's packet path"). The agent's relay pattern:
//!
//! 1. capture the interface's MAC, MTU, addresses and main-table routes;
//! 2. move the real link into a private *wire* namespace the engine owns
//!    (up, no addresses, IPv6 off: silent);
//! 3. create a TAP of the same name, MAC and MTU in the load balancer's
//!    namespace and give it the captured addresses and routes, so the load
//!    balancer's own traffic (ARP, neighbour discovery, health probes)
//!    works as before;
//! 4. relay: every frame from the wire runs the program; `Pass` goes to the
//!    TAP, `Tx` back out on the wire, `Drop` nowhere. Frames the kernel
//!    sends on the TAP go to the wire untouched.
//!
//! VIP frames therefore never reach the load balancer's kernel, which does
//! not own the VIPs: it cannot forward them (forwarding on), answer them or
//! send errors about them, exactly as with the TC program, whose redirect
//! takes them before the stack.
//!
//! Frames cross with their virtio-net header ([`super::sys`]): the program
//! changes MAC addresses only, so offload state stays valid and nothing is
//! segmented or checksummed in user space.
//!
//! Every step registers its undo before the next one runs, so a failed
//! start, [`LbEngine::shutdown`] and `Drop` all leave the interface as it
//! was. An engine killed without a shutdown leaves a record under
//! `/run/sluice`; the next start on the same interface gives the link back
//! first.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sluice_agent::netlink::snapshot::LinkSnapshot;
use sluice_agent::netlink::{netns_add, netns_del, sysctl, Netns};
use sluice_datapath::host::{FramePacket, SystemClock};
use sluice_datapath::lb::host::HostLbMaps;
use sluice_datapath::lb::maps::LbConfig;
use sluice_datapath::lb::{process_lb, LbEvent, LbMaps, LbVerdict};
use tracing::{debug, info, warn};

use super::{LbCounters, LbEngine};
use crate::desired::LbDesired;
use sluice_agent::engine::emulated::sys;
use sluice_datapath::host::offload::VNET_HDR_LEN;

static ENGINE_SEQ: AtomicU32 = AtomicU32::new(0);

/// Frames read per fd before the loop looks at the other one.
const BATCH: usize = 64;
/// Room for a 64 KiB super-frame and its header.
const BUF_LEN: usize = VNET_HDR_LEN + 65_536 + 512;
/// Where wire namespaces are recorded for recovery after a crash.
const RECORD_DIR: &str = "/run/sluice";
const WIRE_PREFIX: &str = "sluice-lbw-";

/// What the program and the control side share.
struct State {
    maps: HostLbMaps,
    /// Frames delivered per configured backend.
    packets: BTreeMap<u32, u64>,
}

struct Shared {
    state: Mutex<State>,
    /// Per event, then per verdict kind.
    events: Vec<AtomicU64>,
    /// Relay trouble: read/write errors, frames dropped on a full queue,
    /// frames that made the loop panic.
    io_errors: AtomicU64,
    stop: AtomicBool,
    wake: OwnedFd,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Wire {
    name: String,
    ns: Netns,
}

pub struct EmulatedEngine {
    iface: String,
    node: Netns,
    snapshot: LinkSnapshot,
    wire: Option<Wire>,
    /// The real link is in the wire namespace and must go back.
    link_moved: bool,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    done: bool,
}

impl EmulatedEngine {
    /// Take over `iface` in the calling thread's network namespace.
    pub fn start(iface: &str) -> Result<EmulatedEngine> {
        let node = Netns::current().context("opening the network namespace")?;
        recover_stale(&node, iface);
        let snapshot = LinkSnapshot::capture(&node, iface)
            .with_context(|| format!("reading the configuration of {iface}"))?;
        let mut maps = HostLbMaps::new();
        maps.set_config(LbConfig {
            mac: parse_mac(&snapshot.mac)
                .ok_or_else(|| anyhow!("the MAC address {:?} of {iface}", snapshot.mac))?,
            _pad: [0; 2],
            ifindex: 0,
        });
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                maps,
                packets: BTreeMap::new(),
            }),
            events: (0..LbEvent::COUNT + 3).map(|_| AtomicU64::new(0)).collect(),
            io_errors: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake: sys::eventfd()?,
        });
        let mut e = EmulatedEngine {
            iface: iface.to_string(),
            node,
            snapshot,
            wire: None,
            link_moved: false,
            shared,
            thread: None,
            done: false,
        };
        // On error `e` drops here and its Drop undoes what was done.
        e.take_over()?;
        info!(iface, wire_ns = %e.wire.as_ref().map_or("", |w| w.name.as_str()), "load balancer: emulated datapath started");
        Ok(e)
    }

    fn wire(&self) -> Result<&Netns> {
        self.wire
            .as_ref()
            .map(|w| &w.ns)
            .ok_or_else(|| anyhow!("the wire namespace is gone"))
    }

    fn take_over(&mut self) -> Result<()> {
        let iface = self.iface.clone();
        let name = format!(
            "{WIRE_PREFIX}{}-{}",
            std::process::id(),
            ENGINE_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let _ = netns_del(&name);
        let ns = netns_add(&name).context("creating the wire namespace")?;
        if let Err(e) = record(&name, &self.node, &iface, &self.snapshot) {
            warn!(error = %format!("{e:#}"), "recording the link configuration for crash recovery");
        }
        self.wire = Some(Wire { name, ns });
        let wire_path = self.wire()?.proc_path();

        self.node
            .ip(&[
                "link",
                "set",
                "dev",
                &iface,
                "netns",
                &wire_path.to_string_lossy(),
            ])
            .with_context(|| format!("moving {iface} into the wire namespace"))?;
        self.link_moved = true;

        let wire = self.wire()?;
        let n = iface.clone();
        wire.run(move || sysctl::disable_ipv6(&n, true))?
            .with_context(|| format!("silencing IPv6 on {iface} in the wire namespace"))?;
        wire.ip(&["link", "set", "dev", &iface, "up"])
            .with_context(|| format!("setting {iface} up in the wire namespace"))?;
        let n = iface.clone();
        let wire_sock = wire
            .run(move || sys::open_packet_socket(&n))?
            .with_context(|| format!("opening the wire socket on {iface}"))?;
        let wire_index = wire.link_index(&iface)?;
        {
            let mut st = self.shared.state();
            let mut c = st.maps.config();
            c.ifindex = wire_index;
            st.maps.set_config(c);
        }

        let n = iface.clone();
        let tap = self
            .node
            .run(move || sys::open_tap_vnet(&n))?
            .with_context(|| format!("creating the TAP {iface}"))?;
        let mtu = self.snapshot.mtu.to_string();
        self.node
            .ip(&[
                "link",
                "set",
                "dev",
                &iface,
                "address",
                &self.snapshot.mac,
                "mtu",
                &mtu,
            ])
            .with_context(|| format!("setting MAC and MTU of the TAP {iface}"))?;
        if self.snapshot.up {
            self.node
                .ip(&["link", "set", "dev", &iface, "up"])
                .with_context(|| format!("setting the TAP {iface} up"))?;
        }
        self.snapshot.restore(&self.node, &iface).with_context(|| {
            format!("giving the TAP {iface} the addresses and routes of the link")
        })?;

        let relay = Relay {
            shared: self.shared.clone(),
            wire: wire_sock,
            tap,
        };
        let h = std::thread::Builder::new()
            .name(format!("sluice-lb-{iface}"))
            .spawn(move || relay.run())
            .context("spawning the relay thread")?;
        self.thread = Some(h);
        Ok(())
    }

    /// Undo everything, best effort; the first error is returned.
    fn teardown(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut errors: Vec<String> = Vec::new();
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                let s = format!("{e:#}");
                warn!(error = %s, "load balancer: emulated datapath teardown");
                errors.push(s);
            }
        };
        // Stop the loop; the wire socket and the TAP close with it.
        self.shared.stop.store(true, Ordering::SeqCst);
        sys::eventfd_signal(self.shared.wake.as_raw_fd());
        if let Some(h) = self.thread.take() {
            if h.join().is_err() {
                note(Err(anyhow!("the relay thread panicked")));
            }
        }
        let iface = self.iface.clone();
        if self.link_moved {
            wait_gone(&self.node, &iface);
            note(
                self.node
                    .del_link_if_exists(&iface)
                    .with_context(|| format!("removing the TAP {iface}")),
            );
            let back = self.wire().and_then(|w| {
                w.ip(&[
                    "link",
                    "set",
                    "dev",
                    &iface,
                    "netns",
                    &self.node.proc_path().to_string_lossy(),
                ])
                .with_context(|| format!("moving {iface} back"))
            });
            match back {
                Ok(_) => {
                    self.link_moved = false;
                    note(self.restore_link());
                }
                Err(e) => note(Err(e)),
            }
        }
        if let Some(w) = self.wire.take() {
            let name = w.name.clone();
            drop(w);
            note(netns_del(&name));
            let _ = std::fs::remove_file(record_path(&name));
        }
        if errors.is_empty() {
            info!(iface = %self.iface, "load balancer: emulated datapath stopped; {} restored", self.iface);
            Ok(())
        } else {
            bail!("stopping the emulated datapath: {}", errors.join("; "))
        }
    }

    fn restore_link(&self) -> Result<()> {
        let iface = self.iface.clone();
        if let Some(v) = self.snapshot.disable_ipv6.clone() {
            let n = iface.clone();
            self.node
                .run(move || sysctl::set(&["net", "ipv6", "conf", &n, "disable_ipv6"], &v))??;
        }
        let mtu = self.snapshot.mtu.to_string();
        self.node
            .ip(&["link", "set", "dev", &iface, "mtu", &mtu])
            .with_context(|| format!("restoring the MTU of {iface}"))?;
        if self.snapshot.up {
            self.node
                .ip(&["link", "set", "dev", &iface, "up"])
                .with_context(|| format!("setting {iface} up"))?;
        }
        self.snapshot.restore(&self.node, &iface)
    }
}

impl LbEngine for EmulatedEngine {
    fn kind(&self) -> &'static str {
        "emulated"
    }

    fn apply(&mut self, desired: &LbDesired) -> Result<()> {
        let tables = super::tables::build(desired)?;
        let configured: Vec<u32> = tables.backends.keys().copied().collect();
        let mut st = self.shared.state();
        st.maps.replace_tables(Arc::new(tables));
        let old = std::mem::take(&mut st.packets);
        st.packets = configured
            .into_iter()
            .map(|id| (id, old.get(&id).copied().unwrap_or(0)))
            .collect();
        Ok(())
    }

    fn counters(&self) -> Result<LbCounters> {
        let (packets, flows) = {
            let st = self.shared.state();
            (st.packets.clone(), st.maps.flows_len() as u64)
        };
        let events = &self.shared.events;
        let mut c = LbCounters {
            packets_per_backend: packets,
            flows,
            events: super::event_map(|i| events.get(i).map_or(0, |a| a.load(Ordering::Relaxed))),
        };
        c.events.insert(
            "lb_relay_errors",
            self.shared.io_errors.load(Ordering::Relaxed),
        );
        Ok(c)
    }

    fn shutdown(mut self: Box<Self>) -> Result<()> {
        self.teardown()
    }
}

impl Drop for EmulatedEngine {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// `aa:bb:cc:dd:ee:ff`.
fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// A TAP disappears once its last fd closes; give the kernel a moment.
fn wait_gone(ns: &Netns, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while ns.link_exists(name) && Instant::now() < deadline {
        // The TAP goes when the relay's fd closes; the real link has the
        // same name but lives in the wire namespace until moved back.
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn record_path(wire_name: &str) -> std::path::PathBuf {
    std::path::Path::new(RECORD_DIR).join(format!("{wire_name}.json"))
}

/// A namespace's identity: the device and inode of its nsfs file.
fn ns_id(ns: &Netns) -> Option<String> {
    // SAFETY: `stat` is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor the handle keeps open, into a local.
    let r = unsafe { libc::fstat(ns.fd().as_raw_fd(), &mut st) };
    (r == 0).then(|| format!("{}:{}", st.st_dev, st.st_ino))
}

fn record(wire_name: &str, node: &Netns, iface: &str, snap: &LinkSnapshot) -> Result<()> {
    std::fs::create_dir_all(RECORD_DIR).with_context(|| format!("creating {RECORD_DIR}"))?;
    let v = serde_json::json!({
        "netns": ns_id(node),
        "iface": iface,
        "mtu": snap.mtu,
        "up": snap.up,
        "disable_ipv6": snap.disable_ipv6,
        "plan": snap.restore_plan(iface),
    });
    let p = record_path(wire_name);
    std::fs::write(&p, v.to_string()).with_context(|| format!("writing {}", p.display()))
}

/// Give back `iface` from wire namespaces of engines whose process is gone
/// (killed without a shutdown) and that took it from this namespace, with
/// the configuration they recorded.
fn recover_stale(node: &Netns, iface: &str) {
    let here = ns_id(node);
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return;
    };
    for ent in dir.filter_map(|e| e.ok()) {
        let file = ent.file_name().to_string_lossy().into_owned();
        let Some(wire_name) = file.strip_suffix(".json") else {
            continue;
        };
        let Some(rest) = wire_name.strip_prefix(WIRE_PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.is_empty() || std::path::Path::new("/proc").join(pid).exists() {
            continue;
        }
        let Ok(v) = std::fs::read_to_string(ent.path())
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(serde_json::from_str::<serde_json::Value>(&t)?))
        else {
            continue;
        };
        if v.get("iface").and_then(|n| n.as_str()) != Some(iface)
            || here.is_none()
            || v.get("netns").and_then(|n| n.as_str()) != here.as_deref()
        {
            continue;
        }
        let Ok(wire) = Netns::named(wire_name) else {
            let _ = std::fs::remove_file(ent.path());
            continue;
        };
        if !wire.link_exists(iface) || node.link_exists(iface) {
            continue;
        }
        warn!(
            wire_ns = wire_name,
            iface, "a previous load balancer died holding the link; giving it back"
        );
        let moved = wire.ip(&[
            "link",
            "set",
            "dev",
            iface,
            "netns",
            &node.proc_path().to_string_lossy(),
        ]);
        if let Err(e) = moved {
            warn!(error = %format!("{e:#}"), "moving the link back");
            continue;
        }
        if let Some(d) = v.get("disable_ipv6").and_then(|d| d.as_str()) {
            let (n, d) = (iface.to_string(), d.to_string());
            let _ = node.run(move || sysctl::set(&["net", "ipv6", "conf", &n, "disable_ipv6"], &d));
        }
        if let Some(m) = v.get("mtu").and_then(|m| m.as_u64()) {
            let _ = node.ip(&["link", "set", "dev", iface, "mtu", &m.to_string()]);
        }
        if v.get("up").and_then(|u| u.as_bool()) == Some(true) {
            let _ = node.ip(&["link", "set", "dev", iface, "up"]);
        }
        for cmd in v
            .get("plan")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            let args: Vec<&str> = cmd
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .collect();
            if let Err(e) = node.ip(&args) {
                warn!(error = %format!("{e:#}"), "restoring the link configuration");
            }
        }
        drop(wire);
        let _ = netns_del(wire_name);
        let _ = std::fs::remove_file(ent.path());
    }
}

struct Relay {
    shared: Arc<Shared>,
    /// `AF_PACKET` on the real link (in the wire namespace).
    wire: OwnedFd,
    /// The TAP standing in for the link in the load balancer's namespace.
    tap: OwnedFd,
}

impl Relay {
    fn run(self) {
        let shared = self.shared.clone();
        let wire = self.wire.as_raw_fd();
        let tap = self.tap.as_raw_fd();
        let wake = shared.wake.as_raw_fd();
        let clock = SystemClock::new();
        let mut buf = vec![0u8; BUF_LEN];
        let mut logged = 0u32;
        debug!("load balancer relay running");
        while !shared.stop.load(Ordering::SeqCst) {
            let mut fds = [pollfd(wake), pollfd(wire), pollfd(tap)];
            // SAFETY: a live, correctly sized pollfd array.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 500) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    warn!(error = %e, "relay poll failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            let ready = |i: usize| fds[i].revents & (libc::POLLIN | libc::POLLERR) != 0;
            if ready(0) {
                sys::eventfd_drain(wake);
            }
            if ready(1) {
                for _ in 0..BATCH {
                    match sys::read_frame(wire, &mut buf, true).map(|r| r.map(|rx| rx.len)) {
                        Ok(Some(n)) if n <= buf.len() && n >= VNET_HDR_LEN => {
                            let r = catch_unwind(AssertUnwindSafe(|| {
                                from_wire(&shared, &clock, &mut buf, n, wire, tap)
                            }));
                            match r {
                                Ok(Ok(())) => {}
                                Ok(Err(e)) => self.io_error(&mut logged, "writing a frame", &e),
                                Err(_) => {
                                    shared.io_errors.fetch_add(1, Ordering::Relaxed);
                                    warn!("a frame made the relay panic; dropped");
                                }
                            }
                        }
                        Ok(Some(_)) => {
                            shared.io_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            self.io_error(&mut logged, "reading the wire", &e);
                            break;
                        }
                    }
                }
            }
            if ready(2) {
                for _ in 0..BATCH {
                    match sys::read_frame(tap, &mut buf, false).map(|r| r.map(|rx| rx.len)) {
                        Ok(Some(n)) if n >= VNET_HDR_LEN => {
                            // The load balancer's own frames: untouched.
                            if let Err(e) = send(wire, &buf[..n]) {
                                self.io_error(&mut logged, "writing to the wire", &e);
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            self.io_error(&mut logged, "reading the TAP", &e);
                            break;
                        }
                    }
                }
            }
        }
        debug!("load balancer relay stopped");
    }

    fn io_error(&self, logged: &mut u32, what: &str, e: &std::io::Error) {
        self.shared.io_errors.fetch_add(1, Ordering::Relaxed);
        if *logged < 20 {
            *logged += 1;
            warn!(error = %e, "load balancer relay: {what}");
        }
    }
}

/// Run the program on a frame from the wire (`buf[..n]`: header and
/// frame) and send it where the verdict says.
fn from_wire(
    shared: &Shared,
    clock: &SystemClock,
    buf: &mut [u8],
    n: usize,
    wire: RawFd,
    tap: RawFd,
) -> std::io::Result<()> {
    let outcome = {
        let mut pkt = FramePacket::new(&mut buf[VNET_HDR_LEN..n], n - VNET_HDR_LEN);
        let mut st = shared.state();
        let o = process_lb(&mut pkt, &mut st.maps, clock);
        if o.verdict == LbVerdict::Tx {
            if let Some(c) = st.packets.get_mut(&o.backend) {
                *c += 1;
            }
        }
        o
    };
    for i in [
        outcome.event.index(),
        outcome.verdict.counter_index() as usize,
    ] {
        if let Some(c) = shared.events.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
    match outcome.verdict {
        LbVerdict::Drop => Ok(()),
        LbVerdict::Pass => send(tap, &buf[..n]),
        LbVerdict::Tx => send(wire, &buf[..n]),
    }
}

/// Write a header and frame; a full queue drops the frame, as a NIC would.
fn send(fd: RawFd, frame: &[u8]) -> std::io::Result<()> {
    match sys::write_frame(fd, frame) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => Ok(()),
        r => r,
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mac;

    #[test]
    fn macs_parse() {
        assert_eq!(parse_mac("02:1b:00:00:00:01"), Some([2, 0x1b, 0, 0, 0, 1]));
        assert_eq!(parse_mac("02:1b:00:00:00"), None);
    }
}
