//! The kernel engine: `sluice_datapath::lb` as a TC classifier on the load
//! balancer's interface (`ebpf/programs`, bin `sluice-lb`), loaded and
//! attached with aya (`docs/architecture.md`, "The load balancer's packet
//! path").
//!
//! Start, in the calling thread's network namespace:
//! 1. load the object (maps created, none pinned: they live as long as the
//!    engine) and the one classifier, which the verifier checks;
//! 2. write the interface's MAC and index into `SLB_CONFIG`;
//! 3. attach the classifier to the interface's TC ingress (TCX on kernels
//!    from 6.6, else a `cls_bpf` filter on a `clsact` qdisc, added if
//!    missing).
//!
//! Updates swap without half states ([`Writer`]): the Maglev array holds
//! two generations; an update writes the new windows into the one no
//! frontend points at, then the backends (added or changed), then points
//! every frontend at its new window (one hash update each, atomic for the
//! packets), and removes backends that are gone last, 20 ms later, so a
//! packet that read an old frontend value still finds the backends its
//! window names.
//!
//! Shutdown and drop detach the program (in the engine's namespace,
//! whichever thread drops it) and remove a `clsact` qdisc the engine added;
//! the maps go with the program. Nothing outlives the engine: a load
//! balancer that is not running delivers nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::tc::{self, NlOptions, SchedClassifierLinkId, TcAttachOptions, TcHandle};
use aya::programs::{LinkOrder, SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader, TestRun, TestRunOptions};
use sluice_agent::netlink::Netns;
use sluice_datapath::lb::host::LbTables;
use sluice_datapath::lb::maps::{
    FlowKey, FlowValue, FrontendKey, FrontendValue, LbBackend, LbConfig, MaglevChunk,
    LB_BACKENDS_MAX_ENTRIES, LB_FRONTENDS_MAX_ENTRIES, LB_MAGLEV_GENERATION_ENTRIES, MAGLEV_CHUNK,
    MAP_LB_BACKENDS, MAP_LB_CONFIG, MAP_LB_EVENTS, MAP_LB_FLOWS, MAP_LB_FRONTENDS, MAP_LB_MAGLEV,
    MAP_LB_PACKETS,
};
use sluice_datapath::lb::{LbEvent, LbVerdict};
use tracing::{info, warn};

use super::{LbCounters, LbEngine};
use crate::desired::LbDesired;

/// The classifier in the object.
pub const PROG_INGRESS: &str = "sluice_lb_ingress";
/// The object's file name when installed next to the executable.
pub const OBJECT_FILE: &str = "sluice-lb.bpf.o";
/// How long old Maglev windows and removed backends stay readable after
/// the frontends moved away from them: a packet that read the old value
/// uses them for microseconds.
pub const GRACE: Duration = Duration::from_millis(20);

/// Priority and handle of the netlink filter (kernels without TCX); the
/// agent's are 0x5c1.
const NL_PRIORITY: u16 = 0x5c2;
const NL_HANDLE: TcHandle = TcHandle::new(0, 0x5c2);

/// Where the object is when none is given: `sluice-lb.bpf.o` next to the
/// executable (an installed load balancer), else
/// `<exe dir>/../bpf/bpfel-unknown-none/release/sluice-lb` (a development
/// tree: `target/<profile>/sluice-lb` and `target/bpf/…`), else the same
/// one level further up (tests and benches run from `target/<profile>/deps`).
pub fn default_object() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the executable")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", exe.display()))?;
    let built = "bpf/bpfel-unknown-none/release/sluice-lb";
    let candidates = [
        dir.join(OBJECT_FILE),
        dir.join("..").join(built),
        dir.join("../..").join(built),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "no BPF object at {} nor {} (build it with `cargo xtask build-ebpf --release`)",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// Map keys and values as aya wants them (`Pod`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct P<T>(pub T);

// SAFETY: `#[repr(C)]` plain-old-data structs of the datapath with every
// padding byte an explicit field: any bit pattern is valid, none is a
// pointer.
unsafe impl aya::Pod for P<FrontendKey> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<FrontendValue> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<LbBackend> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<FlowKey> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<FlowValue> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<LbConfig> {}

/// The last lines of a (verifier) message.
fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    let from = all.len().saturating_sub(lines);
    let mut out = all[from..].join("\n");
    if from > 0 {
        out.insert_str(0, &format!("[… {from} lines before]\n"));
    }
    out
}

fn take(ebpf: &mut Ebpf, name: &str) -> Result<aya::maps::Map> {
    ebpf.take_map(name)
        .with_context(|| format!("the object has no map {name}"))
}

/// What an apply wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyStats {
    /// Maglev elements written (0: the windows did not change).
    pub maglev_chunks: usize,
    pub frontends_written: usize,
    pub frontends_deleted: usize,
    pub backends_written: usize,
    pub backends_deleted: usize,
}

/// Which tables the maps hold and where.
#[derive(Default)]
struct Writer {
    /// The tables written last and the generation of their windows; `None`
    /// when unknown (nothing written yet, or a write failed half way).
    written: Option<(Arc<LbTables>, u32)>,
    /// When frontends last moved to another generation.
    last_flip: Option<Instant>,
    /// The generation frontends point into (when `written` is known).
    generation: u32,
}

/// What the maps held before an apply: values when known, `None` for
/// keys read back from the kernel.
type OldFrontends = BTreeMap<FrontendKey, Option<FrontendValue>>;
type OldBackends = BTreeMap<u32, Option<LbBackend>>;

/// A frontend value pointing into generation `g`.
fn rebased(v: &FrontendValue, g: u32) -> FrontendValue {
    let mut v = *v;
    if v.maglev_size > 0 {
        v.maglev_base += g * LB_MAGLEV_GENERATION_ENTRIES;
    }
    v
}

/// The loaded object: the program and its maps, not attached anywhere.
/// The kernel engine attaches it; the differential test runs it with
/// `BPF_PROG_TEST_RUN`.
pub struct LbProgram {
    ebpf: Ebpf,
    frontends: BpfHashMap<MapData, P<FrontendKey>, P<FrontendValue>>,
    backends: BpfHashMap<MapData, u32, P<LbBackend>>,
    maglev: Array<MapData, MaglevChunk>,
    flows: BpfHashMap<MapData, P<FlowKey>, P<FlowValue>>,
    config: Array<MapData, P<LbConfig>>,
    events: PerCpuArray<MapData, u64>,
    packets: PerCpuHashMap<MapData, u32, u64>,
    writer: Writer,
}

impl LbProgram {
    /// Load the object at `object` and its classifier (the verifier's
    /// verdict is the error, if any).
    pub fn load(object: &Path) -> Result<LbProgram> {
        let data = std::fs::read(object)
            .with_context(|| format!("reading the BPF object {}", object.display()))?;
        let mut ebpf = EbpfLoader::new()
            .load(&data)
            .map_err(|e| anyhow!(tail(&e.to_string(), 40)))
            .with_context(|| format!("loading the BPF object {}", object.display()))?;
        let prog: &mut SchedClassifier = ebpf
            .program_mut(PROG_INGRESS)
            .ok_or_else(|| anyhow!("the object has no program {PROG_INGRESS}"))?
            .try_into()
            .with_context(|| format!("{PROG_INGRESS} is not a TC classifier"))?;
        prog.load()
            .map_err(|e| anyhow!(tail(&e.to_string(), 40)))
            .with_context(|| format!("the kernel refused program {PROG_INGRESS}"))?;
        // Typed handles check the key and value sizes against this build's
        // types: an object from another source is refused by name.
        let open = |e: &mut Ebpf, n: &str| take(e, n);
        Ok(LbProgram {
            frontends: BpfHashMap::try_from(open(&mut ebpf, MAP_LB_FRONTENDS)?)
                .with_context(|| format!("opening {MAP_LB_FRONTENDS}"))?,
            backends: BpfHashMap::try_from(open(&mut ebpf, MAP_LB_BACKENDS)?)
                .with_context(|| format!("opening {MAP_LB_BACKENDS}"))?,
            maglev: Array::try_from(open(&mut ebpf, MAP_LB_MAGLEV)?)
                .with_context(|| format!("opening {MAP_LB_MAGLEV}"))?,
            flows: BpfHashMap::try_from(open(&mut ebpf, MAP_LB_FLOWS)?)
                .with_context(|| format!("opening {MAP_LB_FLOWS}"))?,
            config: Array::try_from(open(&mut ebpf, MAP_LB_CONFIG)?)
                .with_context(|| format!("opening {MAP_LB_CONFIG}"))?,
            events: PerCpuArray::try_from(open(&mut ebpf, MAP_LB_EVENTS)?)
                .with_context(|| format!("opening {MAP_LB_EVENTS}"))?,
            packets: PerCpuHashMap::try_from(open(&mut ebpf, MAP_LB_PACKETS)?)
                .with_context(|| format!("opening {MAP_LB_PACKETS}"))?,
            ebpf,
            writer: Writer::default(),
        })
    }

    pub fn classifier(&mut self) -> Result<&mut SchedClassifier> {
        self.ebpf
            .program_mut(PROG_INGRESS)
            .ok_or_else(|| anyhow!("the object has no program {PROG_INGRESS}"))?
            .try_into()
            .with_context(|| format!("{PROG_INGRESS} is not a TC classifier"))
    }

    /// The verifier's count of instructions processed and the translated
    /// size, for reports.
    pub fn verifier_stats(&self) -> Result<(u32, u32)> {
        let prog: &SchedClassifier = self
            .ebpf
            .program(PROG_INGRESS)
            .ok_or_else(|| anyhow!("the object has no program {PROG_INGRESS}"))?
            .try_into()?;
        let info = prog.info()?;
        Ok((
            info.verified_instruction_count().unwrap_or(0),
            info.size_translated().unwrap_or(0),
        ))
    }

    pub fn set_config(&mut self, c: &LbConfig) -> Result<()> {
        self.config
            .set(0, P(*c), 0)
            .with_context(|| format!("writing {MAP_LB_CONFIG}"))
    }

    /// Refuse tables the maps cannot hold, before anything is written.
    pub fn check(&self, t: &LbTables) -> Result<()> {
        let need = [
            (
                MAP_LB_MAGLEV,
                t.maglev.len(),
                LB_MAGLEV_GENERATION_ENTRIES as usize,
                "entries per generation",
            ),
            (
                MAP_LB_FRONTENDS,
                t.frontends.len(),
                LB_FRONTENDS_MAX_ENTRIES as usize,
                "keys (frontends and VIP markers)",
            ),
            (
                MAP_LB_BACKENDS,
                t.backends.len(),
                LB_BACKENDS_MAX_ENTRIES as usize,
                "backends",
            ),
        ];
        for (map, n, max, what) in need {
            if n > max {
                bail!("the state needs {n} {what} in {map}, which holds {max}");
            }
        }
        Ok(())
    }

    /// Write `tables` with no half state visible to packets (see the module
    /// documentation). The flow table is kept.
    pub fn apply(&mut self, tables: LbTables) -> Result<ApplyStats> {
        self.check(&tables)?;
        let tables = Arc::new(tables);
        let r = self.write(&tables);
        if r.is_err() {
            // Some frontends may point at either generation now: the next
            // apply reads the maps back and rewrites everything.
            self.writer.written = None;
        }
        r
    }

    fn write(&mut self, tables: &Arc<LbTables>) -> Result<ApplyStats> {
        let mut stats = ApplyStats::default();
        // What the maps hold: the last tables written, or the keys read
        // back when that is unknown.
        let (old_frontends, old_backends, old_gen): (OldFrontends, OldBackends, Option<u32>) =
            match &self.writer.written {
                Some((t, g)) => (
                    t.frontends
                        .iter()
                        .map(|(k, v)| (*k, Some(rebased(v, *g))))
                        .collect(),
                    t.backends.iter().map(|(k, v)| (*k, Some(*v))).collect(),
                    Some(*g),
                ),
                None => (
                    self.frontends
                        .keys()
                        .filter_map(|k| k.ok())
                        .map(|k| (k.0, None))
                        .collect(),
                    self.backends
                        .keys()
                        .filter_map(|k| k.ok())
                        .map(|k| (k, None))
                        .collect(),
                    None,
                ),
            };
        let same_windows = match (&self.writer.written, old_gen) {
            (Some((t, _)), Some(_)) => t.maglev == tables.maglev,
            _ => false,
        };
        let gen = match old_gen {
            Some(g) if same_windows => g,
            Some(g) => 1 - g,
            None => 1 - self.writer.generation.min(1),
        };
        // 1. The new windows, into the generation no frontend points at.
        if !same_windows {
            if let Some(t) = self.writer.last_flip {
                let since = t.elapsed();
                if since < GRACE {
                    std::thread::sleep(GRACE - since);
                }
            }
            let first = gen * (LB_MAGLEV_GENERATION_ENTRIES / MAGLEV_CHUNK);
            for (i, part) in tables.maglev.chunks(MAGLEV_CHUNK as usize).enumerate() {
                let mut c: MaglevChunk = [0; MAGLEV_CHUNK as usize];
                c[..part.len()].copy_from_slice(part);
                self.maglev
                    .set(first + i as u32, c, 0)
                    .with_context(|| format!("writing {MAP_LB_MAGLEV}"))?;
                stats.maglev_chunks += 1;
            }
        }
        // 2. Backends added or changed (health, MAC).
        for (id, b) in &tables.backends {
            if old_backends.get(id) != Some(&Some(*b)) {
                self.backends
                    .insert(*id, P(*b), 0)
                    .with_context(|| format!("writing backend {id} into {MAP_LB_BACKENDS}"))?;
                stats.backends_written += 1;
            }
        }
        // 3. Frontends to their new windows, one atomic update each; then
        // the ones that are gone.
        for (k, v) in &tables.frontends {
            let v = rebased(v, gen);
            if old_frontends.get(k) != Some(&Some(v)) {
                self.frontends
                    .insert(P(*k), P(v), 0)
                    .with_context(|| format!("writing {MAP_LB_FRONTENDS}"))?;
                stats.frontends_written += 1;
            }
        }
        for k in old_frontends.keys() {
            if !tables.frontends.contains_key(k) {
                match self.frontends.remove(&P(*k)) {
                    Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("removing from {MAP_LB_FRONTENDS}"))
                    }
                }
                stats.frontends_deleted += 1;
            }
        }
        let flipped = !same_windows || stats.frontends_written > 0;
        self.writer.generation = gen;
        if !same_windows {
            self.writer.last_flip = Some(Instant::now());
        }
        // 4. Backends that are gone, once no packet can still read a value
        // naming them; their counters with them.
        let gone: Vec<u32> = old_backends
            .keys()
            .filter(|id| !tables.backends.contains_key(id))
            .copied()
            .collect();
        if !gone.is_empty() {
            if flipped {
                std::thread::sleep(GRACE);
            }
            for id in &gone {
                for r in [self.backends.remove(id), self.packets.remove(id)] {
                    match r {
                        Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                        Err(e) => return Err(e).with_context(|| format!("removing backend {id}")),
                    }
                }
                stats.backends_deleted += 1;
            }
        }
        self.writer.written = Some((tables.clone(), gen));
        Ok(stats)
    }

    /// The configured backends (last tables written).
    fn configured(&self) -> BTreeSet<u32> {
        match &self.writer.written {
            Some((t, _)) => t.backends.keys().copied().collect(),
            None => BTreeSet::new(),
        }
    }

    /// Per-event and per-verdict counts, summed over CPUs, by index.
    pub fn event_counts(&self) -> Vec<u64> {
        let sum = |i: u32| {
            self.events
                .get(&i, 0)
                .map(|v| v.iter().fold(0u64, |a, b| a.wrapping_add(*b)))
                .unwrap_or(0)
        };
        (0..LbEvent::COUNT as u32 + 3).map(sum).collect()
    }

    /// Everything the flow table holds.
    pub fn flows(&self) -> Vec<(FlowKey, FlowValue)> {
        self.flows
            .iter()
            .filter_map(|r| r.ok())
            .map(|(k, v)| (k.0, v.0))
            .collect()
    }

    pub fn counters(&self) -> Result<LbCounters> {
        let mut c = LbCounters::default();
        for id in self.configured() {
            let n = match self.packets.get(&id, 0) {
                Ok(v) => v.iter().fold(0u64, |a, b| a.wrapping_add(*b)),
                Err(aya::maps::MapError::KeyNotFound) => 0,
                Err(e) => return Err(e).with_context(|| format!("reading {MAP_LB_PACKETS}")),
            };
            c.packets_per_backend.insert(id, n);
        }
        c.flows = self.flows.keys().filter(|k| k.is_ok()).count() as u64;
        let counts = self.event_counts();
        c.events = super::event_map(|i| counts.get(i).copied().unwrap_or(0));
        Ok(c)
    }

    /// Run the classifier on `frame` with `BPF_PROG_TEST_RUN`: its return
    /// code (`TC_ACT_*`) and the frame as it left.
    pub fn test_run(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        let prog: &SchedClassifier = self
            .ebpf
            .program(PROG_INGRESS)
            .ok_or_else(|| anyhow!("the object has no program {PROG_INGRESS}"))?
            .try_into()?;
        let mut out = vec![0u8; frame.len() + 256];
        let r = prog
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ..Default::default()
            })
            .map_err(|e| anyhow!("BPF_PROG_TEST_RUN: {e:?}"))?;
        out.truncate(r.data_size_out as usize);
        Ok((r.return_value, out))
    }
}

/// How the classifier is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttachMode {
    /// A TCX link (kernel ≥ 6.6).
    Tcx,
    /// A netlink `cls_bpf` filter on `clsact` (older kernels).
    Netlink,
}

impl AttachMode {
    /// TCX where the kernel has it; `SLUICE_TC_ATTACH=netlink|tcx`
    /// overrides, as for the agent.
    fn detect() -> AttachMode {
        match std::env::var("SLUICE_TC_ATTACH").as_deref() {
            Ok("netlink") => return AttachMode::Netlink,
            Ok("tcx") => return AttachMode::Tcx,
            _ => {}
        }
        match aya::util::KernelVersion::current() {
            Ok(v) if v >= aya::util::KernelVersion::new(6, 6, 0) => AttachMode::Tcx,
            _ => AttachMode::Netlink,
        }
    }
}

pub struct KernelEngine {
    iface: String,
    ns: Netns,
    prog: Option<LbProgram>,
    mode: AttachMode,
    link: Option<SchedClassifierLinkId>,
    /// This engine added the interface's `clsact` qdisc (netlink mode).
    added_clsact: bool,
}

impl KernelEngine {
    /// Load `object` (default: [`default_object`]) and attach it to
    /// `iface`'s TC ingress in the calling thread's namespace.
    pub fn start(iface: &str, object: Option<&Path>) -> Result<KernelEngine> {
        let ns = Netns::current().context("opening the network namespace")?;
        let ifindex = sluice_agent::netlink::link_index(iface)
            .with_context(|| format!("the load balancer's interface {iface}"))?;
        let mac = ns
            .link_mac(iface)
            .with_context(|| format!("the MAC address of {iface}"))?;
        let object = match object {
            Some(o) => o.to_path_buf(),
            None => default_object()?,
        };
        let mut prog = LbProgram::load(&object)?;
        prog.set_config(&LbConfig {
            mac,
            _pad: [0; 2],
            ifindex,
        })?;
        let mut e = KernelEngine {
            iface: iface.to_string(),
            ns,
            prog: Some(prog),
            mode: AttachMode::detect(),
            link: None,
            added_clsact: false,
        };
        // On error `e` drops here and undoes what was done.
        e.attach()?;
        info!(iface, object = %object.display(), mode = ?e.mode, "load balancer: kernel datapath attached");
        Ok(e)
    }

    fn prog(&mut self) -> Result<&mut LbProgram> {
        self.prog
            .as_mut()
            .ok_or_else(|| anyhow!("the kernel engine was shut down"))
    }

    /// In the calling thread's namespace (the engine's, at start).
    fn attach(&mut self) -> Result<()> {
        let iface = self.iface.clone();
        let mode = self.mode;
        let mut added = false;
        let prog = self.prog()?.classifier()?;
        let id = match mode {
            AttachMode::Tcx => prog
                .attach_with_options(
                    &iface,
                    TcAttachType::Ingress,
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .with_context(|| format!("attaching {PROG_INGRESS} to {iface} ingress (TCX)"))?,
            AttachMode::Netlink => {
                match tc::qdisc_add_clsact(&iface) {
                    Ok(()) => added = true,
                    Err(tc::TcError::AlreadyAttached) => {}
                    Err(e) => {
                        let e = anyhow::Error::from(e);
                        if !format!("{e:#}").contains("File exists") {
                            return Err(e)
                                .with_context(|| format!("adding the clsact qdisc to {iface}"));
                        }
                    }
                }
                let r = prog.attach_with_options(
                    &iface,
                    TcAttachType::Ingress,
                    TcAttachOptions::Netlink(NlOptions {
                        priority: NL_PRIORITY,
                        handle: NL_HANDLE,
                        classid: None,
                    }),
                );
                self.added_clsact = added;
                r.with_context(|| format!("attaching {PROG_INGRESS} to {iface} ingress (netlink)"))?
            }
        };
        self.link = Some(id);
        Ok(())
    }

    /// Detach and drop the program, in the engine's namespace (a netlink
    /// detach names the interface); remove the qdisc this engine added.
    fn teardown(&mut self) -> Result<()> {
        let Some(mut prog) = self.prog.take() else {
            return Ok(());
        };
        let link = self.link.take();
        let iface = self.iface.clone();
        let added = std::mem::take(&mut self.added_clsact);
        self.ns.run(move || -> Result<()> {
            let mut first: Option<anyhow::Error> = None;
            if let Some(id) = link {
                if let Err(e) = prog
                    .classifier()
                    .and_then(|c| c.detach(id).map_err(Into::into))
                {
                    first
                        .get_or_insert(e.context(format!("detaching {PROG_INGRESS} from {iface}")));
                }
            }
            drop(prog);
            if added && sluice_agent::netlink::link_index(&iface).is_ok() {
                let out = std::process::Command::new("tc")
                    .args(["qdisc", "del", "dev", &iface, "clsact"])
                    .output()
                    .context("running tc");
                match out {
                    Ok(o) if o.status.success() => {}
                    Ok(o) => {
                        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
                        if !err.contains("Cannot find") && !err.contains("Invalid handle") {
                            first.get_or_insert(anyhow!("tc qdisc del dev {iface} clsact: {err}"));
                        }
                    }
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
            first.map_or(Ok(()), Err)
        })??;
        info!(iface = %self.iface, "load balancer: kernel datapath detached");
        Ok(())
    }
}

impl LbEngine for KernelEngine {
    fn kind(&self) -> &'static str {
        "kernel"
    }

    fn apply(&mut self, desired: &LbDesired) -> Result<()> {
        let tables = super::tables::build(desired)?;
        let started = Instant::now();
        let stats = self
            .prog()?
            .apply(tables)
            .context("writing the kernel maps")?;
        info!(
            maglev_chunks = stats.maglev_chunks,
            frontends_written = stats.frontends_written,
            frontends_deleted = stats.frontends_deleted,
            backends_written = stats.backends_written,
            backends_deleted = stats.backends_deleted,
            ms = started.elapsed().as_millis() as u64,
            "load balancer: kernel maps written"
        );
        Ok(())
    }

    fn counters(&self) -> Result<LbCounters> {
        self.prog
            .as_ref()
            .ok_or_else(|| anyhow!("the kernel engine was shut down"))?
            .counters()
    }

    fn shutdown(mut self: Box<Self>) -> Result<()> {
        self.teardown()
    }
}

impl Drop for KernelEngine {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            warn!(error = %format!("{e:#}"), "load balancer: kernel datapath teardown");
        }
    }
}

/// The verdict a classifier return code stands for (`TC_ACT_OK`,
/// `TC_ACT_SHOT`, `TC_ACT_REDIRECT`).
pub fn verdict_of(return_code: u32) -> Option<LbVerdict> {
    match return_code {
        0 => Some(LbVerdict::Pass),
        2 => Some(LbVerdict::Drop),
        7 => Some(LbVerdict::Tx),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontends_move_between_generations() {
        let v = FrontendValue {
            maglev_base: 512,
            maglev_size: 251,
            ..Default::default()
        };
        assert_eq!(rebased(&v, 0).maglev_base, 512);
        assert_eq!(
            rebased(&v, 1).maglev_base,
            512 + LB_MAGLEV_GENERATION_ENTRIES
        );
        let marker = FrontendValue::default();
        assert_eq!(rebased(&marker, 1), marker, "markers point nowhere");
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("a\nb\nc", 2), "[… 1 lines before]\nb\nc");
    }
}
