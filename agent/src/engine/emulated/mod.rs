//! The emulated engine: the packet program in user space, at the same hooks
//! a TC program would use (`docs/architecture.md`, "The emulated engine").
//!
//! Start, in the node namespace (the calling thread's):
//! 1. capture `nic`'s MAC, MTU, addresses and main-table routes;
//! 2. create a private *wire* namespace and move the real link into it (up,
//!    no addresses, IPv6 off: silent);
//! 3. create a TAP named `nic` with the same MAC and MTU in the node
//!    namespace and give it the captured addresses and routes;
//! 4. relay: wire `AF_PACKET` → program (`WireIngress`) → TAP, and TAP →
//!    program (`WireEgress`) → wire.
//!
//! Pods: a veth whose pod end is created in the pod's namespace and whose
//! host end lives in the wire namespace, relayed to a node-side TAP named
//! `host_ifname`: pod → program (`FromPod`) → TAP; TAP → pod untouched.
//!
//! Every step registers its undo before the next one runs, so a failed
//! start, [`Engine::shutdown`] and `Drop` all leave the node as it was.

mod relay;
pub mod sys;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tracing::{info, warn};

use super::podnet::{self, sanitize};
use super::{Engine, MapContent, PodLink};
use crate::netlink::snapshot::LinkSnapshot;
use crate::netlink::{netns_add, netns_del, sysctl, Netns};
use relay::{PodIo, Relay, Shared};

static ENGINE_SEQ: AtomicU32 = AtomicU32::new(0);

struct Wire {
    name: String,
    ns: Netns,
}

pub struct EmulatedEngine {
    nic: String,
    node: Netns,
    snapshot: LinkSnapshot,
    wire: Option<Wire>,
    /// The real link is in the wire namespace and must go back.
    link_moved: bool,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    pods: BTreeMap<String, PodLink>,
    done: bool,
}

impl EmulatedEngine {
    /// Take over `nic` in the calling thread's network namespace.
    pub fn start(nic: &str, node_name: &str) -> Result<Self> {
        let node = Netns::current().context("opening the node network namespace")?;
        recover_stale(&node, nic, node_name);
        let snapshot = LinkSnapshot::capture(&node, nic)
            .with_context(|| format!("reading the configuration of {nic}"))?;
        let wake = sys::eventfd()?;
        let mut e = EmulatedEngine {
            nic: nic.to_string(),
            node,
            snapshot,
            wire: None,
            link_moved: false,
            shared: Arc::new(Shared::new(wake)),
            thread: None,
            pods: BTreeMap::new(),
            done: false,
        };
        // On error `e` drops here and its Drop undoes what was done.
        e.take_over(node_name)?;
        info!(nic, wire_ns = %e.wire.as_ref().map_or("", |w| w.name.as_str()), "emulated datapath started");
        Ok(e)
    }

    fn wire(&self) -> Result<&Netns> {
        self.wire
            .as_ref()
            .map(|w| &w.ns)
            .ok_or_else(|| anyhow!("the wire namespace is gone"))
    }

    fn take_over(&mut self, node_name: &str) -> Result<()> {
        let nic = self.nic.clone();
        self.node
            .run(sysctl::prepare_node)?
            .context("setting the node's forwarding sysctls")?;

        let name = format!(
            "sluice-w-{}-{}-{}",
            sanitize(node_name),
            std::process::id(),
            ENGINE_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let _ = netns_del(&name);
        let ns = netns_add(&name).context("creating the wire namespace")?;
        if let Err(e) = record(&name, &nic, &self.snapshot) {
            warn!(error = %format!("{e:#}"), "recording the link configuration for crash recovery");
        }
        self.wire = Some(Wire { name, ns });
        let wire_path = self
            .wire
            .as_ref()
            .map(|w| w.ns.proc_path())
            .ok_or_else(|| anyhow!("no wire namespace"))?;

        self.node
            .ip(&[
                "link",
                "set",
                "dev",
                &nic,
                "netns",
                &wire_path.to_string_lossy(),
            ])
            .with_context(|| format!("moving {nic} into the wire namespace"))?;
        self.link_moved = true;

        let wire = self.wire()?;
        let n = nic.clone();
        wire.run(move || sysctl::disable_ipv6(&n, true))?
            .with_context(|| format!("silencing IPv6 on {nic} in the wire namespace"))?;
        wire.ip(&["link", "set", "dev", &nic, "up"])
            .with_context(|| format!("setting {nic} up in the wire namespace"))?;
        let n = nic.clone();
        let wire_sock = wire
            .run(move || sys::open_packet_socket(&n))?
            .with_context(|| format!("opening the wire socket on {nic}"))?;

        let n = nic.clone();
        let tap = self
            .node
            .run(move || sys::open_tap_vnet(&n))?
            .with_context(|| format!("creating the TAP {nic} in the node namespace"))?;
        let mtu = self.snapshot.mtu.to_string();
        self.node
            .ip(&[
                "link",
                "set",
                "dev",
                &nic,
                "address",
                &self.snapshot.mac,
                "mtu",
                &mtu,
            ])
            .with_context(|| format!("setting MAC and MTU of the TAP {nic}"))?;
        let n = nic.clone();
        self.node
            .run(move || sysctl::prepare_uplink(&n))?
            .with_context(|| format!("setting sysctls of the TAP {nic}"))?;
        if self.snapshot.up {
            self.node
                .ip(&["link", "set", "dev", &nic, "up"])
                .with_context(|| format!("setting the TAP {nic} up"))?;
        }
        self.snapshot.restore(&self.node, &nic).with_context(|| {
            format!("giving the TAP {nic} the addresses and routes of the link")
        })?;

        let relay = Relay {
            shared: self.shared.clone(),
            wire: wire_sock,
            tap,
        };
        let h = std::thread::Builder::new()
            .name(format!("sluice-relay-{nic}"))
            .spawn(move || relay.run())
            .context("spawning the relay thread")?;
        self.thread = Some(h);
        Ok(())
    }

    fn plug(&mut self, pod: &PodLink) -> Result<()> {
        let host = pod.host_ifname.as_str();
        let peer = pod.pod_ifname.as_str();
        let wire = self.wire()?;
        let pod_ns = Netns::open(&pod.netns)?;

        // Leftovers of an earlier agent (or of a failed plug).
        let _ = wire.del_link_if_exists(host);
        let _ = pod_ns.del_link_if_exists(peer);
        let _ = self.node.del_link_if_exists(host);

        wire.ip(&[
            "link",
            "add",
            host,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "netns",
            &pod_ns.proc_path().to_string_lossy(),
        ])
        .with_context(|| format!("creating the veth {host}/{peer}"))?;
        let h = host.to_string();
        wire.run(move || sysctl::disable_ipv6(&h, true))??;
        wire.ip(&["link", "set", "dev", host, "up"])?;

        // Pod side: the link keeps its offloads (the relay takes partial
        // checksums and super-frames whole).
        podnet::configure_pod_side(&pod_ns, pod)?;

        // Node side.
        let h = host.to_string();
        let tap = self
            .node
            .run(move || sys::open_tap_vnet(&h))?
            .with_context(|| format!("creating the TAP {host}"))?;
        podnet::configure_host_side(&self.node, host, pod)?;

        let h = host.to_string();
        let sock = wire
            .run(move || sys::open_packet_socket(&h))?
            .with_context(|| format!("opening the socket on {host}"))?;
        // Redirected frames carry what the node kernel would have sent on
        // the TAP: its MAC as the source.
        let link = wire.link_index(host)?;
        let local = podnet::local_link(link, &pod_ns, pod, &self.node, host)?;
        // The pod addresses its frames to the TAP's MAC. The veth end that
        // receives them takes the same MAC, so the kernel classifies them
        // (`sll_pkttype`, read by the relay as `PACKET_OTHERHOST` or not)
        // as it would on the kernel engine's node side of the link.
        wire.set_link_mac(host, local.node_mac)?;
        // The addresses before the relay reads the link: a frame it read
        // first would be dropped as spoofed.
        {
            let mut maps = self.shared.maps();
            for k in podnet::local_keys(pod) {
                maps.set_local_link(k, local);
            }
        }
        self.shared.pods().push(Arc::new(PodIo {
            key: pod.key.clone(),
            link,
            sock,
            tap,
        }));
        self.shared.pods_changed();
        Ok(())
    }

    fn unplug(&mut self, pod: &PodLink) -> Result<()> {
        let before = {
            let mut pods = self.shared.pods();
            let n = pods.len();
            pods.retain(|p| p.key != pod.key);
            n != pods.len()
        };
        if before {
            // Wait until the loop let go of the fds, so the TAP goes with them.
            self.shared.pods_changed();
        }
        // The addresses only once the relay no longer reads the link: a
        // frame it read in between would be dropped as spoofed.
        {
            let mut maps = self.shared.maps();
            for k in podnet::local_keys(pod) {
                maps.remove_local_link(&k);
            }
        }
        let mut first: Option<anyhow::Error> = None;
        if let Ok(w) = self.wire() {
            if let Err(e) = w.del_link_if_exists(&pod.host_ifname) {
                first.get_or_insert(e);
            }
        }
        wait_gone(&self.node, &pod.host_ifname);
        if let Err(e) = self.node.del_link_if_exists(&pod.host_ifname) {
            first.get_or_insert(e);
        }
        match first {
            Some(e) => Err(e.context(format!("unplugging pod {}", pod.key))),
            None => Ok(()),
        }
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
                warn!(error = %s, "emulated datapath teardown");
                errors.push(s);
            }
        };

        // Stop the loop; its fds (wire socket, nic TAP) close with it.
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
        if let Some(h) = self.thread.take() {
            if h.join().is_err() {
                note(Err(anyhow!("the relay thread panicked")));
            }
        }
        for pod in std::mem::take(&mut self.pods).into_values() {
            note(self.unplug(&pod));
        }
        self.shared.pods().clear();

        let nic = self.nic.clone();
        if self.link_moved {
            wait_gone(&self.node, &nic);
            note(
                self.node
                    .del_link_if_exists(&nic)
                    .with_context(|| format!("removing the TAP {nic}")),
            );
            let back = self.wire().and_then(|w| {
                w.ip(&[
                    "link",
                    "set",
                    "dev",
                    &nic,
                    "netns",
                    &self.node.proc_path().to_string_lossy(),
                ])
                .with_context(|| format!("moving {nic} back to the node namespace"))
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
            info!(nic = %self.nic, "emulated datapath stopped; {} restored", self.nic);
            Ok(())
        } else {
            bail!("stopping the emulated datapath: {}", errors.join("; "))
        }
    }

    fn restore_link(&self) -> Result<()> {
        let nic = self.nic.clone();
        if let Some(v) = self.snapshot.disable_ipv6.clone() {
            let n = nic.clone();
            self.node
                .run(move || sysctl::set(&["net", "ipv6", "conf", &n, "disable_ipv6"], &v))??;
        }
        let mtu = self.snapshot.mtu.to_string();
        self.node
            .ip(&["link", "set", "dev", &nic, "mtu", &mtu])
            .with_context(|| format!("restoring the MTU of {nic}"))?;
        if self.snapshot.up {
            self.node
                .ip(&["link", "set", "dev", &nic, "up"])
                .with_context(|| format!("setting {nic} up"))?;
        }
        self.snapshot.restore(&self.node, &nic)
    }
}

/// Where a running engine records how to give its link back, should the
/// agent die without a shutdown (SIGKILL): the next start reads it.
const RECORD_DIR: &str = "/run/sluice";

fn record_path(wire_name: &str) -> std::path::PathBuf {
    std::path::Path::new(RECORD_DIR).join(format!("{wire_name}.json"))
}

fn record(wire_name: &str, nic: &str, snap: &LinkSnapshot) -> Result<()> {
    std::fs::create_dir_all(RECORD_DIR).with_context(|| format!("creating {RECORD_DIR}"))?;
    let v = serde_json::json!({
        "nic": nic,
        "mtu": snap.mtu,
        "up": snap.up,
        "disable_ipv6": snap.disable_ipv6,
        "plan": snap.restore_plan(nic),
    });
    let p = record_path(wire_name);
    std::fs::write(&p, v.to_string()).with_context(|| format!("writing {}", p.display()))
}

/// Give back links left in wire namespaces of engines of this node whose
/// process is gone.
fn recover_stale(node: &Netns, nic: &str, node_name: &str) {
    let prefix = format!("sluice-w-{}-", sanitize(node_name));
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return;
    };
    for ent in dir.filter_map(|e| e.ok()) {
        let file = ent.file_name().to_string_lossy().into_owned();
        let Some(wire_name) = file.strip_suffix(".json") else {
            continue;
        };
        let Some(rest) = wire_name.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.is_empty() || std::path::Path::new("/proc").join(pid).exists() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(ent.path()) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if v.get("nic").and_then(|n| n.as_str()) != Some(nic) {
            continue;
        }
        warn!(
            wire_ns = wire_name,
            nic, "a previous agent died holding the link; giving it back"
        );
        if let Ok(wire) = Netns::named(wire_name) {
            if wire.link_exists(nic) && !node.link_exists(nic) {
                let moved = wire.ip(&[
                    "link",
                    "set",
                    "dev",
                    nic,
                    "netns",
                    &node.proc_path().to_string_lossy(),
                ]);
                if let Err(e) = moved {
                    warn!(error = %format!("{e:#}"), "moving the link back");
                    continue;
                }
                if let Some(d) = v.get("disable_ipv6").and_then(|d| d.as_str()) {
                    let (n, d) = (nic.to_string(), d.to_string());
                    let _ = node
                        .run(move || sysctl::set(&["net", "ipv6", "conf", &n, "disable_ipv6"], &d));
                }
                if let Some(m) = v.get("mtu").and_then(|m| m.as_u64()) {
                    let _ = node.ip(&["link", "set", "dev", nic, "mtu", &m.to_string()]);
                }
                if v.get("up").and_then(|u| u.as_bool()) == Some(true) {
                    let _ = node.ip(&["link", "set", "dev", nic, "up"]);
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
            }
        }
        let _ = netns_del(wire_name);
        let _ = std::fs::remove_file(ent.path());
    }
}

/// A TAP disappears once its last fd closes; give the kernel a moment.
fn wait_gone(ns: &Netns, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while ns.link_exists(name) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Engine for EmulatedEngine {
    fn kind(&self) -> &'static str {
        "emulated"
    }

    fn apply(&mut self, content: &MapContent) -> Result<()> {
        let tables = podnet::checked_tables(content).context("checking the map content")?;
        let mut maps = self.shared.maps();
        maps.set_node(content.node);
        maps.replace_services(tables);
        Ok(())
    }

    fn plug_pod(&mut self, pod: &PodLink) -> Result<()> {
        if let Some(old) = self.pods.get(&pod.key).cloned() {
            if old == *pod {
                return Ok(());
            }
            self.unplug(&old)?;
            self.pods.remove(&pod.key);
        }
        if let Err(e) = self.plug(pod) {
            let _ = self.unplug(pod);
            return Err(e.context(format!("plugging pod {}", pod.key)));
        }
        self.pods.insert(pod.key.clone(), pod.clone());
        info!(pod = %pod.key, link = %pod.host_ifname, "pod plugged");
        Ok(())
    }

    fn unplug_pod(&mut self, key: &str) -> Result<()> {
        let Some(pod) = self.pods.remove(key) else {
            return Ok(());
        };
        self.unplug(&pod)?;
        info!(pod = %key, "pod unplugged");
        Ok(())
    }

    fn release_unclaimed(&mut self) -> Result<()> {
        // Nothing to release: a previous agent's relay, links and
        // addresses went with its wire namespace, which `start` removed
        // (`recover_stale`); this engine holds only what it plugged.
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.shared.counters.list()
    }

    fn snat_exhaustion(&self) -> Vec<(sluice_datapath::maps::SnatExhaustKey, u64)> {
        self.shared.maps().snat_exhausted_snapshot()
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
