//! The kernel engine: the packet program as eBPF TC classifiers, loaded and
//! attached with aya (`docs/architecture.md`, "The packet program").
//!
//! Start, in the calling thread's network namespace (the node's):
//! 1. read the object and check its maps against the agent's types;
//! 2. make sure the pin directory is on bpffs (mounting `/sys/fs/bpf` if
//!    needed) and drop pinned maps an incompatible object left;
//! 3. load the object with every map pinned by name in the pin directory:
//!    a previous agent's maps — conntrack, affinity, services — are reused
//!    as they are;
//! 4. set the forwarding sysctls (node) and the uplink's (`nic`), recording
//!    the uplink's old values under `/run/sluice` once;
//! 5. attach `sluice_wire_ingress` / `sluice_wire_egress` at `nic`'s TC
//!    ingress / egress, replacing a previous agent's programs in place
//!    ([`pins`]).
//!
//! Pods: a veth pair, the pod end `eth0` in the pod's namespace, the host
//! end in the node namespace with `sluice_from_pod` at its TC ingress. A
//! restarted agent adopts a pod's existing veth (same pair, same names)
//! instead of recreating it, so the pod's connections are untouched.
//!
//! Nothing is undone on drop or on `kill -9`: the pinned links keep the
//! program running and the next agent adopts everything. Only
//! [`Engine::shutdown`] (or a failed first start) removes it all.

pub mod alloc;
mod batch;
pub mod layout;
pub mod maps;
pub mod pins;
mod unclaimed;
pub mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use tracing::{info, warn};

use super::podnet::{self, sanitize};
use super::{Engine, MapContent, PodLink};
use crate::netlink::{sysctl, Netns};
pub use layout::MapSizes;
use maps::AyaMaps;
use pins::AttachMode;
use writer::Writer;

pub const PROG_WIRE_INGRESS: &str = "sluice_wire_ingress";
pub const PROG_WIRE_EGRESS: &str = "sluice_wire_egress";
pub const PROG_FROM_POD: &str = "sluice_from_pod";

/// The default pin directory of a node.
pub fn default_pin_dir(node_name: &str) -> PathBuf {
    Path::new(pins::BPFFS)
        .join("sluice")
        .join(sanitize(node_name))
}

/// The object file name looked for next to the agent's executable.
pub const OBJECT_FILE: &str = "sluice.bpf.o";

/// Where the BPF object is when `--bpf-object` is not given: `sluice.bpf.o`
/// next to the executable (an installed agent), else
/// `<exe dir>/../bpf/bpfel-unknown-none/release/sluice` (a development
/// tree: `target/<profile>/sluice-agent` and `target/bpf/…`).
pub fn default_object() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the agent's executable")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", exe.display()))?;
    let candidates = [
        dir.join(OBJECT_FILE),
        dir.join("../bpf/bpfel-unknown-none/release/sluice"),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        anyhow!(
            "no BPF object at {} nor {} (build it with `cargo xtask build-ebpf --release` or pass --bpf-object)",
            candidates[0].display(),
            candidates[1].display()
        )
    })
}

/// The uplink sysctls the engine changes (`net.ipv4.conf.<nic>.*`), with
/// the values it sets: see [`sysctl::prepare_uplink`].
const UPLINK_SYSCTLS: [&str; 3] = ["rp_filter", "send_redirects", "accept_local"];

pub struct KernelEngine {
    nic: String,
    node: Netns,
    pin_dir: PathBuf,
    mode: AttachMode,
    ebpf: Ebpf,
    maps: AyaMaps,
    writer: Writer,
    pods: BTreeMap<String, PodLink>,
    /// `clsact` qdiscs this engine added (netlink mode only).
    qdiscs: Vec<String>,
    record: PathBuf,
    done: bool,
}

/// The last lines of a (verifier) message, so an error stays readable.
fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    let from = all.len().saturating_sub(lines);
    let mut out = all[from..].join("\n");
    if from > 0 {
        out.insert_str(0, &format!("[… {from} lines before]\n"));
    }
    out
}

/// Check the object's map definitions against the agent's key and value
/// types: an object built from another datapath source is refused by name.
fn check_object(obj: &aya_obj::Object) -> Result<()> {
    for (name, key, value) in maps::expected_layout() {
        let def = obj
            .maps
            .get(name)
            .ok_or_else(|| anyhow!("the object has no map {name}"))?;
        if def.key_size() as usize != key || def.value_size() as usize != value {
            bail!(
                "map {name} in the object has key/value sizes {}/{} but this agent's types \
                 have {key}/{value}: the object and the agent come from different sources",
                def.key_size(),
                def.value_size()
            );
        }
    }
    for p in [PROG_WIRE_INGRESS, PROG_WIRE_EGRESS, PROG_FROM_POD] {
        if !obj.programs.contains_key(p) {
            bail!("the object has no program {p}");
        }
    }
    Ok(())
}

/// The sizes the agent gives the service-side maps (`max_entries`, in
/// elements: `SLUICE_MAGLEV` holds `MAGLEV_CHUNK` entries per element).
fn map_sizes(sizes: &MapSizes) -> Vec<(&'static str, u32)> {
    vec![
        (maps::SERVICES, sizes.services),
        (maps::ENDPOINTS, sizes.endpoints),
        (maps::MAGLEV, sizes.maglev_chunks()),
    ]
}

fn classifier<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut SchedClassifier> {
    ebpf.program_mut(name)
        .ok_or_else(|| anyhow!("the object has no program {name}"))?
        .try_into()
        .with_context(|| format!("{name} is not a TC classifier"))
}

fn recorded_qdiscs(v: &serde_json::Value) -> Vec<String> {
    v.get("clsact")
        .and_then(|a| a.as_array())
        .into_iter()
        .flatten()
        .filter_map(|q| q.as_str().map(str::to_string))
        .collect()
}

/// Where the engine of `pin_dir` records what it changed outside bpffs (the
/// uplink's old sysctls, `clsact` qdiscs it added), for whichever engine of
/// that pin directory finally shuts down.
fn record_path(pin_dir: &Path) -> PathBuf {
    let p = pin_dir.to_string_lossy();
    let tail: String = sanitize(&p)
        .chars()
        .rev()
        .take(24)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Path::new(RECORD_DIR).join(format!(
        "kernel-{:08x}{tail}.json",
        crate::control::stable_hash(&p)
    ))
}

const RECORD_DIR: &str = "/run/sluice";

/// Remove records whose pin directory is gone (an engine killed and never
/// restarted, its bpffs cleaned by someone else): nothing is left to give
/// back to.
fn sweep_records() {
    let Ok(dir) = std::fs::read_dir(RECORD_DIR) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("kernel-") || !name.ends_with(".json") {
            continue;
        }
        let pin_dir = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("pin_dir").and_then(|p| p.as_str()).map(PathBuf::from));
        if pin_dir.is_some_and(|p| !p.exists()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl KernelEngine {
    /// Load `object` and take over `nic` in the calling thread's namespace,
    /// with the service-side maps of `sizes`.
    pub fn start(nic: &str, object: &Path, pin_dir: &Path, sizes: MapSizes) -> Result<Self> {
        let sizes = sizes.normalized();
        let node = Netns::current().context("opening the node network namespace")?;
        crate::netlink::link_index(nic).with_context(|| format!("the uplink {nic}"))?;
        let data = std::fs::read(object)
            .with_context(|| format!("reading the BPF object {}", object.display()))?;
        let obj = aya_obj::Object::parse(&data)
            .with_context(|| format!("parsing the BPF object {}", object.display()))?;
        check_object(&obj).with_context(|| format!("checking {}", object.display()))?;

        pins::ensure_pin_dir(pin_dir)?;
        let adopted = pins::has_pins(pin_dir);
        let started = Self::load(nic, node, &data, &obj, pin_dir, adopted, &sizes);
        match started {
            Ok(e) => {
                info!(
                    nic,
                    pin_dir = %pin_dir.display(),
                    mode = ?e.mode,
                    adopted,
                    maps = %e.writer.sizes(),
                    "kernel datapath started"
                );
                Ok(e)
            }
            Err(err) => {
                // A fresh start leaves nothing behind; a previous agent's
                // datapath keeps running as it was.
                if !adopted {
                    let _ = pins::remove_pin_dir(pin_dir);
                }
                Err(err)
            }
        }
    }

    fn load(
        nic: &str,
        node: Netns,
        data: &[u8],
        obj: &aya_obj::Object,
        pin_dir: &Path,
        adopted: bool,
        sizes: &MapSizes,
    ) -> Result<Self> {
        let sizes = map_sizes(sizes);
        pins::drop_incompatible_maps(pin_dir, obj, &sizes)?;
        let names: Vec<String> = obj.maps.keys().cloned().collect();
        let mut loader = EbpfLoader::new();
        for n in &names {
            loader.map_pin_path(n.as_str(), pin_dir.join(n));
        }
        for (n, size) in &sizes {
            loader.map_max_entries(n, *size);
        }
        let mut ebpf = loader
            .load(data)
            .map_err(|e| anyhow!(tail(&e.to_string(), 40)))
            .context("loading the BPF object (maps pinned in the pin directory)")?;
        for p in [PROG_WIRE_INGRESS, PROG_WIRE_EGRESS, PROG_FROM_POD] {
            classifier(&mut ebpf, p)?
                .load()
                .map_err(|e| anyhow!(tail(&e.to_string(), 40)))
                .with_context(|| format!("the kernel refused program {p}"))?;
        }
        let mut maps = AyaMaps::take(&mut ebpf)?;
        // Pod links from a previous agent stay published while this one
        // starts: the pinned program serves on meanwhile, and believes a
        // pod's source address only on the link published for it, so a pod
        // whose entry went would be cut off until plugged again. Each pod
        // plugged publishes its own again; the entries of a pod gone
        // meanwhile (its link went with it) go now.
        for (k, link) in maps.local_entries() {
            if !link_exists(link.ifindex) {
                maps.del_local(&k)?;
            }
        }
        let writer = Writer::adopt(&maps)?;
        let mut e = KernelEngine {
            nic: nic.to_string(),
            node,
            pin_dir: pin_dir.to_path_buf(),
            mode: AttachMode::detect(),
            ebpf,
            maps,
            writer,
            pods: BTreeMap::new(),
            qdiscs: Vec::new(),
            record: record_path(pin_dir),
            done: false,
        };
        if let Err(err) = e.take_over() {
            // Only undo attachments when nothing was adopted: the caller
            // decides about the pins.
            if !adopted {
                let _ = e.detach_nic();
                for q in std::mem::take(&mut e.qdiscs) {
                    let _ = e.node.run(|| pins::remove_clsact(&q));
                }
                let _ = e.restore_sysctls();
            }
            e.done = true;
            return Err(err);
        }
        Ok(e)
    }

    fn take_over(&mut self) -> Result<()> {
        self.node
            .run(sysctl::prepare_node)?
            .context("setting the node's forwarding sysctls")?;
        self.record_sysctls()?;
        let n = self.nic.clone();
        self.node
            .run(move || sysctl::prepare_uplink(&n))?
            .with_context(|| format!("setting sysctls of {}", self.nic))?;
        let nic = self.nic.clone();
        for (p, t) in [
            (PROG_WIRE_INGRESS, TcAttachType::Ingress),
            (PROG_WIRE_EGRESS, TcAttachType::Egress),
        ] {
            self.attach(p, &nic, t)?;
        }
        Ok(())
    }

    fn attach(&mut self, prog: &str, ifname: &str, t: TcAttachType) -> Result<()> {
        let mode = self.mode;
        let mut added = false;
        let classifier = classifier(&mut self.ebpf, prog)?;
        let pin_dir = &self.pin_dir;
        // Interface names resolve in the node namespace, whatever thread
        // calls.
        let replaced = self
            .node
            .run(|| pins::attach(mode, classifier, pin_dir, ifname, t, &mut added))?
            .with_context(|| format!("attaching {prog} to {ifname}"))?;
        if added && !self.qdiscs.iter().any(|q| q == ifname) {
            self.qdiscs.push(ifname.to_string());
            if let Err(e) = self.record_qdiscs() {
                warn!(error = %format!("{e:#}"), "recording the clsact qdiscs added");
            }
        }
        info!(prog, link = ifname, replaced, "program attached");
        Ok(())
    }

    /// Remember the uplink's sysctls before the first engine on this pin
    /// directory changed them (a restarted agent keeps the first record).
    fn record_sysctls(&self) -> Result<()> {
        sweep_records();
        if self.record.exists() {
            return Ok(());
        }
        let nic = self.nic.clone();
        let values: Vec<(String, String)> = self.node.run(move || {
            UPLINK_SYSCTLS
                .iter()
                .filter_map(|k| {
                    sysctl::get(&["net", "ipv4", "conf", &nic, k])
                        .ok()
                        .map(|v| (k.to_string(), v))
                })
                .collect()
        })?;
        let v = serde_json::json!({
            "nic": self.nic,
            "pin_dir": self.pin_dir,
            "ipv4_conf": values,
        });
        std::fs::create_dir_all(RECORD_DIR).with_context(|| format!("creating {RECORD_DIR}"))?;
        std::fs::write(&self.record, v.to_string())
            .with_context(|| format!("writing {}", self.record.display()))
    }

    /// Add the `clsact` qdiscs this engine added to the record, so the
    /// engine that finally shuts down removes them, whichever added them.
    fn record_qdiscs(&self) -> Result<()> {
        let text = std::fs::read_to_string(&self.record)
            .with_context(|| format!("reading {}", self.record.display()))?;
        let mut v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", self.record.display()))?;
        let mut all = recorded_qdiscs(&v);
        for q in &self.qdiscs {
            if !all.contains(q) {
                all.push(q.clone());
            }
        }
        v["clsact"] = serde_json::json!(all);
        std::fs::write(&self.record, v.to_string())
            .with_context(|| format!("writing {}", self.record.display()))
    }

    fn restore_sysctls(&self) -> Result<()> {
        let Ok(text) = std::fs::read_to_string(&self.record) else {
            return Ok(());
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", self.record.display()))?;
        let pairs: Vec<(String, String)> = v
            .get("ipv4_conf")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let k = p.get(0)?.as_str()?;
                let val = p.get(1)?.as_str()?;
                UPLINK_SYSCTLS
                    .contains(&k)
                    .then(|| (k.to_string(), val.to_string()))
            })
            .collect();
        let nic = self.nic.clone();
        if self.node.link_exists(&nic) {
            self.node.run(move || -> Result<()> {
                for (k, val) in &pairs {
                    sysctl::set(&["net", "ipv4", "conf", &nic, k], val)?;
                }
                Ok(())
            })??;
        }
        std::fs::remove_file(&self.record)
            .with_context(|| format!("removing {}", self.record.display()))
    }

    /// [`pins::detach`] in the node namespace.
    fn detach(&self, ifname: &str, t: TcAttachType) -> Result<()> {
        let (mode, pin_dir) = (self.mode, &self.pin_dir);
        self.node.run(|| pins::detach(mode, pin_dir, ifname, t))?
    }

    fn detach_nic(&mut self) -> Result<()> {
        let mut first = None;
        for t in [TcAttachType::Ingress, TcAttachType::Egress] {
            if let Err(e) = self.detach(&self.nic, t) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The pod's veth as a previous agent left it: the host end a veth
    /// whose peer is `pod_ifname` in the pod's namespace.
    fn adoptable(&self, pod: &PodLink, pod_ns: &Netns) -> bool {
        let Ok(v) = self
            .node
            .ip_json(&["-d", "link", "show", "dev", &pod.host_ifname])
        else {
            return false;
        };
        let Some(l) = v.get(0) else { return false };
        let kind = l
            .get("linkinfo")
            .and_then(|i| i.get("info_kind"))
            .and_then(|k| k.as_str());
        let peer_index = l.get("link_index").and_then(|i| i.as_u64());
        if kind != Some("veth") {
            return false;
        }
        match (peer_index, pod_ns.link_index(&pod.pod_ifname)) {
            (Some(p), Ok(i)) => p == u64::from(i),
            _ => false,
        }
    }

    fn plug(&mut self, pod: &PodLink) -> Result<()> {
        let host = pod.host_ifname.as_str();
        let peer = pod.pod_ifname.as_str();
        let pod_ns = Netns::open(&pod.netns)?;
        let adopt = self.adoptable(pod, &pod_ns);
        if !adopt {
            // Leftovers of an earlier agent (or of a failed plug).
            let _ = self.detach(host, TcAttachType::Ingress);
            let _ = pod_ns.del_link_if_exists(peer);
            let _ = self.node.del_link_if_exists(host);
            self.node
                .ip(&[
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
        }
        podnet::configure_pod_side(&pod_ns, pod)?;
        // The pod's addresses and the program first, the link up last: a
        // new link's host end is down until then, so the pod's first frames
        // wait for carrier instead of being dropped as spoofed (sent before
        // its addresses were published) or passed unchecked (sent before
        // the program was attached).
        self.publish_local(pod)?;
        self.attach(PROG_FROM_POD, host, TcAttachType::Ingress)?;
        podnet::configure_host_side(&self.node, host, pod)?;
        if adopt {
            info!(pod = %pod.key, link = host, "adopted the pod's link");
        }
        Ok(())
    }

    /// Let the program redirect the pod's packets to its link.
    fn publish_local(&mut self, pod: &PodLink) -> Result<()> {
        let pod_ns = Netns::open(&pod.netns)?;
        let host = pod.host_ifname.as_str();
        let link = self.node.link_index(host)?;
        let local = podnet::local_link(link, &pod_ns, pod, &self.node, host)?;
        for k in podnet::local_keys(pod) {
            self.maps.put_local(&k, &local)?;
        }
        Ok(())
    }

    /// Best effort: a stale entry only points at a link that is gone.
    fn forget_local(&mut self, pod: &PodLink) {
        for k in podnet::local_keys(pod) {
            if let Err(e) = self.maps.del_local(&k) {
                warn!(pod = %pod.key, error = %format!("{e:#}"), "forgetting a pod's link");
            }
        }
    }

    /// The pin directory's file names (none when it cannot be read).
    fn pin_files(&self) -> Vec<String> {
        std::fs::read_dir(&self.pin_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn unplug(&mut self, host: &str) -> Result<()> {
        let mut first: Option<anyhow::Error> = None;
        // The link before the program: deleting the host end takes the
        // pod's end with it, so nothing the pod sends reaches the node
        // unchecked in between. The pin goes after (a link whose device is
        // gone still unpins; a netlink filter went with the device).
        if let Err(e) = self.node.del_link_if_exists(host) {
            first.get_or_insert(e);
        }
        if let Err(e) = self.detach(host, TcAttachType::Ingress) {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
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
                warn!(error = %s, "kernel datapath teardown");
                errors.push(s);
            }
        };
        note(self.detach_nic().context("detaching from the uplink"));
        for (key, pod) in std::mem::take(&mut self.pods) {
            note(
                self.unplug(&pod.host_ifname)
                    .with_context(|| format!("unplugging pod {key}")),
            );
        }
        // Links a previous agent attached for pods no longer wanted.
        let files = self.pin_files();
        let stale = unclaimed::links(
            files.iter().map(String::as_str),
            &self.nic,
            &BTreeSet::new(),
        );
        for host in stale {
            note(
                self.unplug(&host)
                    .with_context(|| format!("removing the stale pod link {host}")),
            );
        }
        let mut qdiscs = std::mem::take(&mut self.qdiscs);
        if let Some(v) = std::fs::read_to_string(&self.record)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        {
            for q in recorded_qdiscs(&v) {
                if !qdiscs.contains(&q) {
                    qdiscs.push(q);
                }
            }
        }
        for q in qdiscs {
            note(self.node.run(|| pins::remove_clsact(&q)).and_then(|r| r));
        }
        note(self.restore_sysctls());
        note(pins::remove_pin_dir(&self.pin_dir));
        if errors.is_empty() {
            info!(nic = %self.nic, pin_dir = %self.pin_dir.display(), "kernel datapath stopped and removed");
            Ok(())
        } else {
            bail!("stopping the kernel datapath: {}", errors.join("; "))
        }
    }
}

impl Engine for KernelEngine {
    fn kind(&self) -> &'static str {
        "kernel"
    }

    fn apply(&mut self, content: &MapContent) -> Result<()> {
        let started = std::time::Instant::now();
        // The writer checks the layout and the capacity before it writes,
        // and adds the VIP markers.
        let stats = self
            .writer
            .apply(&mut self.maps, &content.node, &content.tables)
            .context("writing the kernel maps")?;
        info!(
            moved = stats.moved,
            updated = stats.updated,
            deleted = stats.deleted,
            unchanged = stats.unchanged,
            endpoint_slots = stats.endpoint_slots,
            maglev_entries = stats.maglev_entries,
            waits = stats.waits,
            ms = started.elapsed().as_millis() as u64,
            "kernel maps written"
        );
        Ok(())
    }

    fn check_capacity(&self, content: &MapContent) -> Result<()> {
        self.writer.check(&content.tables)
    }

    fn plug_pod(&mut self, pod: &PodLink) -> Result<()> {
        if let Some(old) = self.pods.get(&pod.key).cloned() {
            if old == *pod {
                return Ok(());
            }
            self.unplug(&old.host_ifname)?;
            // Its old addresses too: the new spec may not have them.
            self.forget_local(&old);
            self.pods.remove(&pod.key);
        }
        if let Err(e) = self.plug(pod) {
            let _ = self.unplug(&pod.host_ifname);
            self.forget_local(pod);
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
        // The link first, the addresses after: the program checks the
        // pod's frames until the link is gone, and would drop them as
        // spoofed in between.
        let unplugged = self.unplug(&pod.host_ifname);
        self.forget_local(&pod);
        unplugged.with_context(|| format!("unplugging pod {key}"))?;
        info!(pod = %key, "pod unplugged");
        Ok(())
    }

    fn release_unclaimed(&mut self) -> Result<()> {
        let keys: BTreeSet<_> = self.pods.values().flat_map(podnet::local_keys).collect();
        let published = self.maps.local_entries().into_iter().map(|(k, _)| k);
        // The addresses first: the program stops believing them and
        // redirecting to their link before the link goes.
        let addresses = unclaimed::addresses(published, &keys);
        for k in &addresses {
            self.maps.del_local(k)?;
        }
        if !addresses.is_empty() {
            info!(
                addresses = addresses.len(),
                "forgot pod addresses no pod claims (published by a previous agent)"
            );
        }
        let hosts: BTreeSet<&str> = self.pods.values().map(|p| p.host_ifname.as_str()).collect();
        let files = self.pin_files();
        let links = unclaimed::links(files.iter().map(String::as_str), &self.nic, &hosts);
        for host in links {
            self.unplug(&host)
                .with_context(|| format!("removing the pod link {host} no pod claims"))?;
            info!(link = %host, "removed a pod link no pod claims (plugged by a previous agent)");
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.maps.counters()
    }

    fn snat_exhaustion(&self) -> Vec<(sluice_datapath::maps::SnatExhaustKey, u64)> {
        self.maps.snat_exhaustion()
    }

    fn shutdown(mut self: Box<Self>) -> Result<()> {
        self.teardown()
    }
}

/// Whether the calling thread's network namespace has a link `ifindex`.
fn link_exists(ifindex: u32) -> bool {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` holds IF_NAMESIZE bytes, what the call may write.
    !unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) }.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_pin_dir_is_per_node() {
        assert_eq!(
            default_pin_dir("node/1"),
            Path::new("/sys/fs/bpf/sluice/node-1")
        );
    }

    #[test]
    fn records_are_per_pin_dir() {
        let a = record_path(Path::new(
            "/sys/fs/bpf/sluice/sl-a-very-long-namespace-name-1234-1",
        ));
        let b = record_path(Path::new(
            "/sys/fs/bpf/sluice/sl-a-very-long-namespace-name-1234-2",
        ));
        assert_ne!(a, b);
        assert!(a.starts_with(RECORD_DIR));
    }

    #[test]
    fn tail_keeps_the_end() {
        let s = (0..10)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(tail(&s, 2), "[… 8 lines before]\n8\n9");
        assert_eq!(tail("a\nb", 5), "a\nb");
    }
}
