//! bpffs: the mount, the engine's pin directory, pinned maps from an older
//! object, and the pinned TC attachments that keep the program running
//! while no agent does.
//!
//! Layout of the pin directory (default `/sys/fs/bpf/sluice/<node>`):
//!
//! | entry | what |
//! |---|---|
//! | `SLUICE_*` | the object's maps (conntrack survives an agent restart) |
//! | `link-<ifname>-ingress`, `link-<ifname>-egress` | TCX links (kernel ≥ 6.6) |
//!
//! A TCX link lives as long as it is pinned, so the program keeps
//! translating with the agent dead (`kill -9`). A restarted agent opens the
//! pinned link and swaps its freshly loaded program in with one
//! `BPF_LINK_UPDATE`: there is never a moment without a program, and never
//! two. On kernels without TCX the classifier is a netlink `cls_bpf` filter
//! on a `clsact` qdisc at a fixed priority and handle, which also outlives
//! the process and is replaced in place.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::MapInfo;
use aya::programs::links::{FdLink, LinkError, PinnedLink};
use aya::programs::tc::{self, NlOptions, SchedClassifierLink, TcAttachOptions, TcHandle};
use aya::programs::{LinkOrder, SchedClassifier, TcAttachType};
use tracing::{info, warn};

/// `BPF_FS_MAGIC` from `linux/magic.h`.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// Where bpffs is mounted by convention.
pub const BPFFS: &str = "/sys/fs/bpf";

/// Priority and handle of the netlink filters (kernels without TCX).
const NL_PRIORITY: u16 = 0x5c1;
const NL_HANDLE: TcHandle = TcHandle::new(0, 0x5c1);

// `f_type`'s width differs between libcs and architectures.
#[allow(clippy::unnecessary_cast)]
fn is_bpffs(p: &Path) -> bool {
    nix::sys::statfs::statfs(p).is_ok_and(|s| s.filesystem_type().0 as i64 == BPF_FS_MAGIC)
}

/// Make sure `pin_dir` exists on a bpf filesystem; mount bpffs at
/// `/sys/fs/bpf` when the directory is below it and nothing is mounted
/// there. Agents of several nodes may start at once: a lock file serialises
/// the check and the mount so bpffs is mounted once, not stacked.
pub fn ensure_pin_dir(pin_dir: &Path) -> Result<()> {
    if pin_dir.starts_with(BPFFS) && !is_bpffs(Path::new(BPFFS)) {
        std::fs::create_dir_all("/run/sluice").context("creating /run/sluice")?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open("/run/sluice/bpffs.lock")
            .context("opening /run/sluice/bpffs.lock")?;
        // SAFETY: flock on a descriptor we own; released when it closes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error()).context("locking /run/sluice/bpffs.lock");
        }
        if !is_bpffs(Path::new(BPFFS)) {
            nix::mount::mount(
                Some("bpffs"),
                BPFFS,
                Some("bpf"),
                nix::mount::MsFlags::empty(),
                Some("mode=0700"),
            )
            .with_context(|| format!("mounting bpffs at {BPFFS}"))?;
            info!(path = BPFFS, "mounted bpffs");
        }
    }
    // Another node's agent may be removing the shared, then empty, parent
    // directory as it shuts down: try again.
    let mut made = std::fs::create_dir_all(pin_dir);
    for _ in 0..5 {
        if made.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        made = std::fs::create_dir_all(pin_dir);
    }
    made.with_context(|| format!("creating the pin directory {}", pin_dir.display()))?;
    if !is_bpffs(pin_dir) {
        bail!(
            "the pin directory {} is not on a bpf filesystem (mount bpffs there or pick \
             a directory below {BPFFS})",
            pin_dir.display()
        );
    }
    Ok(())
}

/// Whether anything is pinned in `pin_dir` already (a previous agent's).
pub fn has_pins(pin_dir: &Path) -> bool {
    std::fs::read_dir(pin_dir).is_ok_and(|mut d| d.next().is_some())
}

/// Remove pinned maps whose type or sizes differ from the object's
/// definition of the same name: aya would otherwise reuse them as they are.
/// Their content (conntrack, say) is lost, which is logged.
/// `sizes` overrides the object's `max_entries` (what the loader is told).
///
/// When the endpoint or Maglev array is recreated (a new size, say), the
/// services map goes too: its values point into the old arrays, and
/// packets must not follow them into fresh, zeroed ones. The first apply
/// fills all three again.
pub fn drop_incompatible_maps(
    pin_dir: &Path,
    obj: &aya_obj::Object,
    sizes: &[(&str, u32)],
) -> Result<()> {
    use sluice_datapath::maps::{MAP_ENDPOINTS, MAP_MAGLEV, MAP_SERVICES};
    let mut windows_gone = false;
    for (name, def) in &obj.maps {
        let path = pin_dir.join(name);
        if !path.exists() {
            continue;
        }
        let max_entries = sizes
            .iter()
            .find(|(n, _)| n == name)
            .map_or(def.max_entries(), |(_, s)| *s);
        let same = match MapInfo::from_pin(&path) {
            Ok(i) => {
                i.map_type().ok().map(|t| t as u32) == Some(def.map_type())
                    && i.key_size() == def.key_size()
                    && i.value_size() == def.value_size()
                    && i.max_entries() == max_entries
            }
            Err(_) => false,
        };
        if !same {
            warn!(
                map = %name,
                pin = %path.display(),
                "the pinned map does not match the object's definition; recreating it (its entries are lost)"
            );
            std::fs::remove_file(&path)
                .with_context(|| format!("removing the stale pin {}", path.display()))?;
            windows_gone |= name == MAP_ENDPOINTS || name == MAP_MAGLEV;
        }
    }
    let services = pin_dir.join(MAP_SERVICES);
    if windows_gone && services.exists() {
        warn!(
            pin = %services.display(),
            "the endpoint or Maglev array was recreated; recreating the services map too \
             (VIP traffic is passed on until the first apply fills it)"
        );
        std::fs::remove_file(&services)
            .with_context(|| format!("removing the stale pin {}", services.display()))?;
    }
    Ok(())
}

fn dir_name(t: TcAttachType) -> &'static str {
    match t {
        TcAttachType::Egress => "egress",
        _ => "ingress",
    }
}

pub fn link_pin(pin_dir: &Path, ifname: &str, t: TcAttachType) -> PathBuf {
    pin_dir.join(format!("link-{ifname}-{}", dir_name(t)))
}

/// `(ifname, direction)` of a link pin's file name.
pub fn parse_link_pin(file: &str) -> Option<(&str, TcAttachType)> {
    let rest = file.strip_prefix("link-")?;
    if let Some(i) = rest.strip_suffix("-ingress") {
        Some((i, TcAttachType::Ingress))
    } else {
        rest.strip_suffix("-egress")
            .map(|i| (i, TcAttachType::Egress))
    }
}

/// How classifiers are attached on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// TCX links, pinned (kernel ≥ 6.6).
    Tcx,
    /// Netlink `cls_bpf` filters on `clsact` (older kernels).
    Netlink,
}

impl AttachMode {
    /// TCX where the kernel has it. `SLUICE_TC_ATTACH=netlink|tcx`
    /// overrides (to exercise the netlink path on a new kernel).
    pub fn detect() -> AttachMode {
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

/// Attach `prog` at `ifname`/`t`, in the calling thread's network namespace,
/// replacing the program a previous agent attached there, if any. Returns
/// whether a previous attachment was replaced; `added_qdisc` reports a
/// `clsact` qdisc this call created (netlink mode).
pub fn attach(
    mode: AttachMode,
    prog: &mut SchedClassifier,
    pin_dir: &Path,
    ifname: &str,
    t: TcAttachType,
    added_qdisc: &mut bool,
) -> Result<bool> {
    match mode {
        AttachMode::Tcx => attach_tcx(prog, pin_dir, ifname, t),
        AttachMode::Netlink => attach_netlink(prog, ifname, t, added_qdisc),
    }
}

fn attach_tcx(
    prog: &mut SchedClassifier,
    pin_dir: &Path,
    ifname: &str,
    t: TcAttachType,
) -> Result<bool> {
    let path = link_pin(pin_dir, ifname, t);
    match PinnedLink::from_pin(&path) {
        Ok(old) => {
            // The pin stays where it is; only our descriptor is used.
            let fd: FdLink = old.into();
            let replaced = SchedClassifierLink::try_from(fd)
                .map_err(anyhow::Error::from)
                .and_then(|link| prog.attach_to_link(link).map_err(anyhow::Error::from));
            match replaced {
                Ok(id) => {
                    // Our copy of the link descriptor closes; the pin keeps it.
                    drop(prog.take_link(id));
                    return Ok(true);
                }
                Err(e) => {
                    // A link whose device went away (a pod deleted while no
                    // agent ran) cannot be updated: start over.
                    warn!(pin = %path.display(), error = %format!("{e:#}"), "replacing the pinned link failed; attaching anew");
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing the stale pin {}", path.display()))?;
                }
            }
        }
        Err(LinkError::SyscallError(e)) if e.io_error.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(anyhow!(e))
                .with_context(|| format!("opening the pinned link {}", path.display()))
        }
    }
    let id = prog
        .attach_with_options(ifname, t, TcAttachOptions::TcxOrder(LinkOrder::default()))
        .with_context(|| format!("attaching to {ifname} {} (TCX)", dir_name(t)))?;
    let link = prog.take_link(id).context("taking the new link")?;
    let fd: FdLink = link
        .try_into()
        .map_err(|e: LinkError| anyhow!(e))
        .context("the TCX attachment is not an fd link")?;
    // Pinned, the link outlives this process; the returned handle only
    // closes our descriptor when dropped.
    let _pinned = fd
        .pin(&path)
        .with_context(|| format!("pinning the link at {}", path.display()))?;
    Ok(false)
}

fn attach_netlink(
    prog: &mut SchedClassifier,
    ifname: &str,
    t: TcAttachType,
    added_qdisc: &mut bool,
) -> Result<bool> {
    match tc::qdisc_add_clsact(ifname) {
        Ok(()) => *added_qdisc = true,
        Err(tc::TcError::AlreadyAttached) => {}
        Err(e) => {
            // EEXIST sits in the error's source chain.
            let e = anyhow::Error::from(e);
            if !format!("{e:#}").contains("File exists") {
                return Err(e).with_context(|| format!("adding the clsact qdisc to {ifname}"));
            }
        }
    }
    let opts = || {
        TcAttachOptions::Netlink(NlOptions {
            priority: NL_PRIORITY,
            handle: NL_HANDLE,
            classid: None,
        })
    };
    let (id, replaced) = match prog.attach_with_options(ifname, t, opts()) {
        Ok(id) => (id, false),
        Err(_) => {
            let old = SchedClassifierLink::attached(ifname, t, NL_PRIORITY, NL_HANDLE, None)
                .with_context(|| format!("no interface {ifname}"))?;
            let id = prog
                .attach_to_link(old)
                .with_context(|| format!("attaching to {ifname} {} (netlink)", dir_name(t)))?;
            (id, true)
        }
    };
    // The filter must outlive this process: forget aya's handle (dropping
    // it would detach). Shutdown detaches by priority and handle.
    let link = prog.take_link(id).context("taking the new link")?;
    std::mem::forget(link);
    Ok(replaced)
}

/// Detach what [`attach`] attached at `ifname`/`t` (missing is fine).
pub fn detach(mode: AttachMode, pin_dir: &Path, ifname: &str, t: TcAttachType) -> Result<()> {
    match mode {
        AttachMode::Tcx => {
            let path = link_pin(pin_dir, ifname, t);
            match PinnedLink::from_pin(&path) {
                // Unpinned and dropped: the last reference goes, the link
                // detaches.
                Ok(l) => {
                    l.unpin()
                        .with_context(|| format!("unpinning {}", path.display()))?;
                }
                Err(_) if path.exists() => {
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                }
                Err(_) => {}
            }
            Ok(())
        }
        AttachMode::Netlink => {
            if crate::netlink::link_index(ifname).is_err() {
                return Ok(());
            }
            let link = SchedClassifierLink::attached(ifname, t, NL_PRIORITY, NL_HANDLE, None)
                .with_context(|| format!("no interface {ifname}"))?;
            use aya::programs::links::Link as _;
            match link.detach() {
                Ok(()) => Ok(()),
                Err(e) if format!("{e}").contains("No such file") => Ok(()),
                Err(e) => Err(e).with_context(|| format!("detaching from {ifname}")),
            }
        }
    }
}

/// Remove the `clsact` qdisc of `ifname` in the calling thread's namespace
/// (netlink mode, when we added it). A missing link or qdisc is fine.
pub fn remove_clsact(ifname: &str) -> Result<()> {
    if crate::netlink::link_index(ifname).is_err() {
        return Ok(());
    }
    let out = std::process::Command::new("tc")
        .args(["qdisc", "del", "dev", ifname, "clsact"])
        .output()
        .context("running tc")?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !err.contains("Cannot find") && !err.contains("Invalid handle") {
        bail!("tc qdisc del dev {ifname} clsact: {}", err.trim());
    }
    Ok(())
}

/// Remove every entry of `pin_dir`, then the directory, then its parent if
/// that is an empty `sluice` directory.
pub fn remove_pin_dir(pin_dir: &Path) -> Result<()> {
    if let Ok(d) = std::fs::read_dir(pin_dir) {
        for e in d.flatten() {
            std::fs::remove_file(e.path())
                .with_context(|| format!("removing the pin {}", e.path().display()))?;
        }
    }
    match std::fs::remove_dir(pin_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", pin_dir.display())),
    }
    if let Some(parent) = pin_dir.parent() {
        if parent.file_name().is_some_and(|n| n == "sluice") {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_pin_names_round_trip() {
        let p = link_pin(Path::new("/x"), "slp0a1b2c3d", TcAttachType::Ingress);
        assert_eq!(p, Path::new("/x/link-slp0a1b2c3d-ingress"));
        let f = p.file_name().and_then(|f| f.to_str()).unwrap();
        assert_eq!(
            parse_link_pin(f),
            Some(("slp0a1b2c3d", TcAttachType::Ingress))
        );
        assert_eq!(
            parse_link_pin("link-nic0-egress"),
            Some(("nic0", TcAttachType::Egress))
        );
        assert_eq!(parse_link_pin("SLUICE_CT"), None);
    }
}
