//! Network namespaces as guards, and the small helpers that configure them.
//!
//! Every namespace is named `sl-<tag>-<pid>-<counter>`, so tests running in
//! parallel threads of one process (and several test processes) never collide,
//! and a namespace left behind by a killed process can be recognised and swept
//! ([`sweep_stale`]). Links are always created directly inside namespaces
//! (`ip -n A link add X type veth peer name Y netns B`), so nothing ever lives
//! in the root namespace; deleting a namespace deletes its links.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// How long a process gets to exit after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(5);

/// Run a command to completion; error (with its stderr) when it fails.
pub fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("spawning {cmd}"))?;
    if !out.status.success() {
        bail!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip <args>`.
pub fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

/// Run `args` inside namespace `ns` (`ip netns exec`).
pub fn exec(ns: &str, args: &[&str]) -> Result<String> {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// SYNs the calling thread's network namespace retransmitted
/// (`TcpExt: TCPSynRetrans`): call it from inside [`in_ns`].
pub fn syn_retransmits() -> Result<u64> {
    tcp_ext_counter("TCPSynRetrans")
}

/// One `TcpExt` counter of the calling thread's network namespace
/// (`/proc/thread-self/net/netstat`: a line of names, then one of values).
pub fn tcp_ext_counter(name: &str) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/netstat")?;
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let i = names
            .split_whitespace()
            .position(|n| n == name)
            .ok_or_else(|| anyhow!("no {name} counter in netstat"))?;
        return values
            .split_whitespace()
            .nth(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("no {name} value in netstat"));
    }
    bail!("no TcpExt line in netstat")
}

/// Run `f` on a fresh thread that has joined namespace `ns`. Sockets created
/// there stay in that namespace wherever they are used afterwards.
pub fn in_ns<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).with_context(|| format!("opening {path}"))?;
    let handle = thread::Builder::new()
        .name(format!("in-{ns}"))
        .spawn(move || -> Result<T> {
            setns(&file, CloneFlags::CLONE_NEWNET).context("setns")?;
            Ok(f())
        })
        .context("spawning namespace thread")?;
    match handle.join() {
        Ok(r) => r.with_context(|| format!("in namespace {ns}")),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Write a sysctl of namespace `ns`, e.g. `net.ipv4.ip_forward`.
pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    in_ns(ns, move || {
        std::fs::write(&path, value).with_context(|| format!("writing {path}"))
    })?
}

/// Turn off TX checksum offload, TSO and GSO on `dev` in `ns` (what
/// `ethtool -K dev tx off tso off gso off` does), through the ethtool ioctl,
/// so packets on the wire carry complete checksums.
pub fn disable_offloads(ns: &str, dev: &str) -> Result<()> {
    let dev_name = dev.to_string();
    in_ns(ns, move || {
        ethtool_set(
            &dev_name,
            &[(ETHTOOL_SGSO, 0), (ETHTOOL_STSO, 0), (ETHTOOL_STXCSUM, 0)],
        )
    })?
    .with_context(|| format!("offloads of {dev} in {ns}"))
}

/// Turn GRO on `dev` in `ns` on (`ethtool -K dev gro on`): a veth
/// aggregates what it receives as a NIC does (veths have it off by
/// default).
pub fn enable_gro(ns: &str, dev: &str) -> Result<()> {
    let dev_name = dev.to_string();
    in_ns(ns, move || ethtool_set(&dev_name, &[(ETHTOOL_SGRO, 1)]))?
        .with_context(|| format!("GRO of {dev} in {ns}"))
}

// `linux/ethtool.h`: the legacy per-feature set commands.
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;

/// Each `(command, value)` on `dev` through `SIOCETHTOOL`, in order.
fn ethtool_set(dev: &str, settings: &[(u32, u32)]) -> Result<()> {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [libc::c_char; libc::IFNAMSIZ],
        data: *mut libc::c_void,
        _pad: [u8; 16],
    }
    if dev.len() >= libc::IFNAMSIZ {
        bail!("interface name {dev} too long");
    }
    // SAFETY: a plain datagram socket, closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("socket for ethtool");
    }
    // SAFETY: fd is a fresh, owned descriptor.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    for &(cmd, data) in settings {
        let mut val = EthtoolValue { cmd, data };
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: &mut val as *mut EthtoolValue as *mut libc::c_void,
            _pad: [0; 16],
        };
        for (d, s) in req.name.iter_mut().zip(dev.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: SIOCETHTOOL with a valid ifreq pointing at a live ethtool_value.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req as *mut IfReq) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            // A device without the feature reports EOPNOTSUPP: nothing to
            // turn off (a request to turn one on must not pass silently).
            if data != 0 || e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(e).with_context(|| format!("ethtool cmd {cmd:#x}={data} on {dev}"));
            }
        }
    }
    Ok(())
}

/// How the test bed's host links offload.
///
/// `Off`: every offload a veth has for sending is off on both ends, so
/// each frame is complete and MTU-sized wherever it is seen.
///
/// `On`, as deployed: the host ends keep their defaults (TX checksum
/// offload, TSO, GSO) and receive with GRO, so the node's stack and the
/// engines see checksum-partial and GSO frames from their own sockets
/// and pods, and GRO aggregates of what arrives. The switch side of each
/// link does not offload: a frame leaving for another host is finished
/// (checksummed and segmented) there, as a NIC finishes it on a real
/// wire. That is also what proves the checksums: a veth never checks
/// one, so a wrong checksum on a partial frame would pass unseen from
/// veth to veth; finished on the wire, the receiver drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offloads {
    #[default]
    Off,
    On,
}

/// A network namespace that lives as long as this guard. Dropping it stops
/// the processes it spawned (SIGTERM, then SIGKILL after [`TERM_GRACE`]),
/// kills anything else still running in it, and deletes it.
pub struct Netns {
    name: String,
    children: Mutex<Vec<Child>>,
}

impl Netns {
    /// A new namespace with `lo` up. `tag` should be short: it is only there
    /// to tell namespaces apart when debugging.
    pub fn new(tag: &str) -> Result<Netns> {
        sweep_stale_once();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("sl-{tag}-{}-{n}", std::process::id());
        // The first `ip netns add` of a host makes /run/netns a shared mount;
        // parallel first calls can trip over each other, so retry a little.
        let mut last = None;
        for _ in 0..5 {
            match ip(&["netns", "add", &name]) {
                Ok(_) => {
                    last = None;
                    break;
                }
                Err(e) => {
                    last = Some(e);
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        if let Some(e) = last {
            return Err(e);
        }
        let ns = Netns {
            name,
            children: Mutex::new(Vec::new()),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n <ns> <args>`.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Run a command inside this namespace.
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        exec(&self.name, args)
    }

    pub fn in_ns<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        in_ns(&self.name, f)
    }

    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        sysctl(&self.name, key, value)
    }

    /// Add an address; IPv6 ones without duplicate address detection.
    pub fn addr_add(&self, dev: &str, cidr: &str) -> Result<()> {
        if cidr.contains(':') {
            self.ip(&["-6", "addr", "add", cidr, "dev", dev, "nodad"])?;
        } else {
            self.ip(&["addr", "add", cidr, "dev", dev])?;
        }
        Ok(())
    }

    /// `ip route replace <dst> via <via>`.
    pub fn route_via(&self, dst: &str, via: &str) -> Result<()> {
        self.ip(&["route", "replace", dst, "via", via])?;
        Ok(())
    }

    pub fn link_up(&self, dev: &str) -> Result<()> {
        self.ip(&["link", "set", dev, "up"])?;
        Ok(())
    }

    pub fn disable_offloads(&self, dev: &str) -> Result<()> {
        disable_offloads(&self.name, dev)
    }

    /// A veth pair `local` (here) — `remote` (in `peer`), both up, offloads
    /// off on both ends.
    pub fn veth_to(&self, local: &str, peer: &Netns, remote: &str) -> Result<()> {
        self.veth_with(local, peer, remote, Offloads::Off)
    }

    /// A veth pair `local` (here) — `remote` (in `peer`), both up, with
    /// `offloads`. [`Offloads::On`] makes the pair a host's link to a
    /// switch port: `local` keeps the kernel's defaults (TX checksum,
    /// TSO, GSO) and gets GRO; `remote`, the wire, sends complete,
    /// segmented frames (see [`Offloads`]).
    pub fn veth_with(
        &self,
        local: &str,
        peer: &Netns,
        remote: &str,
        offloads: Offloads,
    ) -> Result<()> {
        for n in [local, remote] {
            if n.len() > 15 {
                bail!("interface name {n} longer than 15 characters");
            }
        }
        self.ip(&[
            "link", "add", local, "type", "veth", "peer", "name", remote, "netns", &peer.name,
        ])?;
        match offloads {
            Offloads::Off => self.disable_offloads(local)?,
            Offloads::On => enable_gro(&self.name, local)?,
        }
        peer.disable_offloads(remote)?;
        self.link_up(local)?;
        peer.link_up(remote)?;
        Ok(())
    }

    /// A bridge named `name`, up, STP off (ports forward at once).
    pub fn bridge(&self, name: &str) -> Result<()> {
        self.ip(&[
            "link",
            "add",
            name,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ])?;
        self.link_up(name)
    }

    pub fn enslave(&self, dev: &str, bridge: &str) -> Result<()> {
        self.ip(&["link", "set", dev, "master", bridge])?;
        Ok(())
    }

    /// Spawn `args` inside this namespace, in its own
    /// process group (a terminal's Ctrl-C reaches only us, and we stop it in
    /// order). The namespace stops it when dropped.
    pub fn spawn(&self, args: &[&str], stdout: Stdio, stderr: Stdio) -> Result<u32> {
        let child = spawn_in(&self.name, args, stdout, stderr)?;
        let pid = child.id();
        self.children
            .lock()
            .map_err(|_| anyhow!("children lock poisoned"))?
            .push(child);
        Ok(pid)
    }
}

/// Spawn `args` in namespace `ns` without tracking it; the caller owns it.
///
/// Only the network namespace is entered (`setns` between fork and exec),
/// unlike `ip netns exec`, which also gives the child a private mount
/// namespace: namespaces the agent creates must be visible to the host and
/// outlive an agent killed with SIGKILL.
pub fn spawn_in(ns: &str, args: &[&str], stdout: Stdio, stderr: Stdio) -> Result<Child> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (prog, rest) = args.split_first().ok_or_else(|| anyhow!("empty command"))?;
    let nsfile = std::fs::File::open(format!("/run/netns/{ns}"))
        .with_context(|| format!("opening network namespace {ns}"))?;
    let fd = nsfile.as_raw_fd();
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    // SAFETY: only the async-signal-safe setns(2) runs between fork and
    // exec; `nsfile` outlives the spawn, so the descriptor is valid.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("spawning {prog} in {ns}"))?;
    drop(nsfile);
    Ok(child)
}

/// SIGTERM, wait up to `grace`, then SIGKILL; always reaps.
pub fn stop_child(child: &mut Child, grace: Duration) {
    stop_child_while(child, grace, || {});
}

/// [`stop_child`], calling `meanwhile` right after the SIGTERM and then
/// every 200 ms until the child has exited.
pub fn stop_child_while(child: &mut Child, grace: Duration, mut meanwhile: impl FnMut()) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    let mut next = Instant::now();
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        if Instant::now() >= next {
            meanwhile();
            next = Instant::now() + Duration::from_millis(200);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// SIGKILL every process in the pod namespaces of the nodes whose
/// namespaces start with `prefix` (an agent names its pods'
/// `<node namespace>-p-<hex>`).
pub fn kill_pods_with_prefix(prefix: &str) {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.contains("-p-") {
            kill_pids_in(&name);
        }
    }
}

/// Kill every process whose network namespace is `ns` (never ourselves).
/// SIGKILL everything in `ns`; the pids signalled.
fn kill_pids_in(ns: &str) -> Vec<u32> {
    let Ok(out) = ip(&["netns", "pids", ns]) else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut killed = Vec::new();
    for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
        if pid as u32 != me && pid > 1 && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
            killed.push(pid as u32);
        }
    }
    killed
}

/// Wait (up to 5 s) until every pid in `pids` has exited. A SIGKILL takes
/// effect when the process next runs: until then it still owns what it
/// made, and a sweep of dead owners' namespaces passes over it.
fn wait_exited(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let children = match self.children.get_mut() {
            Ok(c) => std::mem::take(c),
            Err(p) => std::mem::take(p.into_inner()),
        };
        for mut c in children {
            stop_child(&mut c, TERM_GRACE);
        }
        kill_pids_in(&self.name);
        for _ in 0..5 {
            if ip(&["netns", "del", &self.name]).is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        eprintln!("sluice-tests: could not delete namespace {}", self.name);
    }
}

fn sweep_stale_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let n = sweep_stale();
        if n > 0 {
            eprintln!("sluice-tests: removed {n} namespaces left by dead test processes");
        }
    });
}

/// Delete `sl-*-<pid>-<n>` namespaces whose creating process is gone (a test
/// process killed without unwinding). Returns how many were removed.
pub fn sweep_stale() -> usize {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = stale_owner(&name) else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        kill_pids_in(&name);
        if ip(&["netns", "del", &name]).is_ok() {
            removed += 1;
        }
    }
    // An emulated engine's record of the link it took
    // (`/run/sluice/sluice-w-….json`), for its next start to give back:
    // with its owner dead and the namespace gone there is none to give.
    for e in std::fs::read_dir(RECORD_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(name) = file
            .strip_suffix(".json")
            .filter(|n| n.starts_with("sluice-"))
        else {
            continue;
        };
        if stale_owner(name).is_some_and(|pid| !alive(pid))
            && !std::path::Path::new("/run/netns").join(name).exists()
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
    // The kernel engines' pins and records of a cluster whose test process
    // died without its guard (killed by a signal): named after the node
    // namespaces, which carry the same owner.
    removed + remove_engine_state(|dir| stale_owner(dir).is_some_and(|pid| !alive(pid)))
}

/// Where agents pin their kernel engine's programs and maps, one directory
/// per node namespace, and where they record what they pinned.
const PIN_ROOT: &str = "/sys/fs/bpf/sluice";
const RECORD_DIR: &str = "/run/sluice";

/// Remove the kernel engine state an agent keeps across its own restarts
/// (and a killed node never removes) for every pin directory whose name
/// `doomed` picks: the directory with its pins, and the records naming it.
/// The root goes too once empty. Returns how many directories went.
pub fn remove_engine_state(doomed: impl Fn(&str) -> bool) -> usize {
    let mut removed = 0;
    for e in std::fs::read_dir(PIN_ROOT).into_iter().flatten().flatten() {
        if doomed(&e.file_name().to_string_lossy()) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    for e in std::fs::read_dir(RECORD_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = e.path();
        let ours = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["pin_dir"].as_str().map(str::to_owned))
            .is_some_and(|dir| {
                std::path::Path::new(&dir)
                    .file_name()
                    .is_some_and(|n| doomed(&n.to_string_lossy()))
            });
        if ours {
            let _ = std::fs::remove_file(path);
        }
    }
    if removed > 0 {
        // Only if empty: another cluster's agents may be using it.
        let _ = std::fs::remove_dir(PIN_ROOT);
    }
    removed
}

/// Whether `pid` runs: a zombie (killed, not yet reaped by its parent) does
/// not.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Delete every namespace whose name starts with `prefix`, killing what runs
/// in it first, and wait (bounded) until those processes have exited: an
/// emulated agent killed here owns its wire namespace outside the prefix,
/// which [`sweep_stale`] removes only once the agent is gone.
pub fn remove_namespaces_with_prefix(prefix: &str) {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    let mut killed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) {
            killed.extend(kill_pids_in(&name));
            let _ = ip(&["netns", "del", &name]);
        }
    }
    wait_exited(&killed);
}

/// The test process that owns a name, by the pid in it:
/// - ours, `sl-<tag>-<pid>-<n>`, and what is named after them: a cluster's
///   node namespaces and pin directories `sl-<tag>-<pid>-<n>-<node>`, their
///   pods' `…-p-<hex>` and `…-pod-<hex>` (the first `<pid>-<n>` after the tag);
/// - the emulated engines' private namespaces, `sluice-w-<node>-<pid>-<n>`
///   (an agent's; the node name may hold numbers, the suffix is fixed) and
///   `sluice-lbw-<pid>-<n>` (sluice-lb's), owned by the engine's process.
fn stale_owner(name: &str) -> Option<u32> {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = name.strip_prefix("sl-") {
        let parts: Vec<&str> = rest.split('-').collect();
        // parts[0] is the tag's first word: a pid never comes first.
        return (1..parts.len().saturating_sub(1))
            .find(|&i| numeric(parts[i]) && numeric(parts[i + 1]))
            .and_then(|i| parts[i].parse().ok());
    }
    let rest = name
        .strip_prefix("sluice-w-")
        .or_else(|| name.strip_prefix("sluice-lbw-"))?;
    let mut parts = rest.rsplitn(3, '-');
    let n = parts.next()?;
    let pid = parts.next()?;
    if !numeric(n) {
        return None;
    }
    // `sluice-w-` names a node before the pid; `sluice-lbw-` nothing.
    match (name.starts_with("sluice-w-"), parts.next()) {
        (true, None) => None,
        _ => pid.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::{stale_owner, sweep_stale, PIN_ROOT, RECORD_DIR};

    /// A test process killed by a signal runs no guard: the next sweep
    /// removes the kernel engine state its cluster's agents left (as a
    /// `controller_upgrade` run stopped with SIGTERM left
    /// `/sys/fs/bpf/sluice/sl-upkn-14668-0-pool-b-mdpc`).
    #[test]
    fn a_dead_test_s_pins_and_records_are_swept() {
        // A pid that has exited (and been reaped).
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let dead = child.id();
        child.wait().expect("wait");
        let dir = format!("{PIN_ROOT}/sl-swpn-{dead}-0-pool-a-x1");
        let live = format!("{PIN_ROOT}/sl-swpn-{}-0-pool-a-x1", std::process::id());
        let record = format!("{RECORD_DIR}/sl-swp-{dead}-test.json");
        let wire_record = format!("{RECORD_DIR}/sluice-w-node-1-{dead}-0.json");
        std::fs::create_dir_all(RECORD_DIR).expect("record dir");
        std::fs::write(&wire_record, "{}").expect("wire record");
        for d in [&dir, &live] {
            std::fs::create_dir_all(format!("{d}/sub")).expect("a directory on bpffs");
        }
        std::fs::create_dir_all(RECORD_DIR).expect("record dir");
        std::fs::write(&record, format!(r#"{{"pin_dir":"{dir}"}}"#)).expect("record");
        sweep_stale();
        let dead_gone = !std::path::Path::new(&dir).exists();
        let record_gone =
            !std::path::Path::new(&record).exists() && !std::path::Path::new(&wire_record).exists();
        let live_kept = std::path::Path::new(&live).exists();
        let _ = std::fs::remove_dir_all(&live);
        let _ = std::fs::remove_file(&record);
        let _ = std::fs::remove_file(&wire_record);
        let _ = std::fs::remove_dir(PIN_ROOT);
        assert!(dead_gone, "the dead owner's pins stay");
        assert!(record_gone, "the dead owner's records stay");
        assert!(live_kept, "a live owner's pins went");
    }

    #[test]
    fn owner_parsed_from_agent_pod_namespace() {
        assert_eq!(stale_owner("sl-rdy-4182-0-pod-86bbd2e9"), Some(4182));
    }

    #[test]
    fn owner_parsed_from_name() {
        assert_eq!(stale_owner("sl-n1-1234-7"), Some(1234));
        assert_eq!(stale_owner("sl-tcp-n1-1234-7"), Some(1234));
        assert_eq!(stale_owner("sl-1234-7"), None);
        assert_eq!(stale_owner("other-1-2"), None);
    }

    #[test]
    fn owner_parsed_from_a_cluster_s_node_namespaces_and_pins() {
        // A kube cluster's node `pool-b-mdpc`, its pod, its pin directory
        // (named as its namespace), and a node name holding numbers.
        assert_eq!(stale_owner("sl-upkn-14668-0-pool-b-mdpc"), Some(14668));
        assert_eq!(
            stale_owner("sl-upkn-14668-0-pool-b-mdpc-p-d02e1536"),
            Some(14668)
        );
        assert_eq!(stale_owner("sl-labn-77-3-node-1-2"), Some(77));
        assert_eq!(stale_owner("sl-upk-c-14668-1"), Some(14668));
        assert_eq!(stale_owner("sl-upkn-pool"), None);
    }

    #[test]
    fn owner_parsed_from_an_engine_s_private_namespace() {
        assert_eq!(stale_owner("sluice-w-pool-b-pqtt-22063-0"), Some(22063));
        assert_eq!(stale_owner("sluice-w-node-1-2662-0"), Some(2662));
        assert_eq!(stale_owner("sluice-w-2662-0"), None, "no node name");
        assert_eq!(stale_owner("sluice-lbw-5231-0"), Some(5231));
        assert_eq!(stale_owner("sluice-lbw-x-0"), None);
    }
}
