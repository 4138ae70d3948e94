//! The netns provider's I/O: `ip` commands, the agent process, and
//! removing what a node left. Blocking; the provider calls these on
//! tokio's blocking threads.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::config::NetnsConfig;
use super::plan::{NodeAddrs, NodeNames, NIC};

const NETNS_DIR: &str = "/run/netns";

/// Run a command to completion; its stdout, or an error with its stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args)
}

pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// The node's namespace, its uplink on the fabric's bridge, its
/// addresses and forwarding. On error the caller removes the namespace
/// (which takes the veth pair with it).
pub fn make_network(cfg: &NetnsConfig, n: &NodeNames, addrs: &NodeAddrs) -> Result<(), String> {
    if !netns_exists(&cfg.fabric_namespace) {
        return Err(format!(
            "the fabric namespace {} does not exist",
            cfg.fabric_namespace
        ));
    }
    let ns = n.namespace.as_str();
    // The first `ip netns add` on a host makes /run/netns a shared mount;
    // concurrent first calls can trip over each other: retry a little.
    let mut added = ip(&["netns", "add", ns]);
    for _ in 0..4 {
        if added.is_ok() || netns_exists(ns) {
            break;
        }
        thread::sleep(Duration::from_millis(100));
        added = ip(&["netns", "add", ns]);
    }
    added?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    // Made inside the namespaces, never in the controller's own.
    ip(&[
        "-n",
        ns,
        "link",
        "add",
        NIC,
        "type",
        "veth",
        "peer",
        "name",
        &n.fabric_veth,
        "netns",
        &cfg.fabric_namespace,
    ])?;
    let fab = cfg.fabric_namespace.as_str();
    ip(&[
        "-n",
        fab,
        "link",
        "set",
        &n.fabric_veth,
        "master",
        &cfg.bridge,
    ])?;
    // Packets the emulated datapath reads from an AF_PACKET socket must
    // carry whole checksums and be unsegmented (as the test bed's veths).
    offloads_off(ns, NIC);
    offloads_off(fab, &n.fabric_veth);
    ip(&["-n", fab, "link", "set", &n.fabric_veth, "up"])?;
    if let Some((a, l)) = addrs.v4 {
        ip(&["-n", ns, "addr", "add", &format!("{a}/{l}"), "dev", NIC])?;
    }
    if let Some((a, l)) = addrs.v6 {
        // No duplicate address detection: the address is usable at once.
        let cidr = format!("{a}/{l}");
        ip(&["-n", ns, "-6", "addr", "add", &cidr, "dev", NIC, "nodad"])?;
    }
    // Nodes are routers (pods behind them, as the test bed's nodes). A
    // node announces its addresses when its link comes up (gratuitous ARP,
    // unsolicited neighbour advertisements): a replacement node may be
    // given a dead node's addresses, and the other nodes' neighbour
    // entries for them would otherwise point at the dead MAC until their
    // own probes fail, seconds in which pod traffic routed via the new
    // node is lost. `default` covers the TAP the emulated datapath puts in
    // the link's place.
    let mut keys = vec![
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.arp_notify=1",
        "net.ipv4.conf.default.arp_notify=1",
    ];
    let nic_arp = format!("net.ipv4.conf.{NIC}.arp_notify=1");
    let nic_nd = format!("net.ipv6.conf.{NIC}.ndisc_notify=1");
    keys.push(&nic_arp);
    if addrs.v6.is_some() {
        keys.extend([
            "net.ipv6.conf.all.forwarding=1",
            "net.ipv6.conf.all.ndisc_notify=1",
            "net.ipv6.conf.default.ndisc_notify=1",
            nic_nd.as_str(),
        ]);
    }
    let mut args = vec!["netns", "exec", ns, "sysctl", "-qw"];
    args.extend(keys);
    ip(&args)?;
    ip(&["-n", ns, "link", "set", NIC, "up"])?;
    Ok(())
}

/// `ethtool -K <dev> tx off tso off gso off` in `ns`; a host without
/// ethtool keeps the offloads (the kernel datapath does not need this).
fn offloads_off(ns: &str, dev: &str) {
    let r = ip(&[
        "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
    ]);
    if let Err(e) = r {
        tracing::debug!(error = %e, ns, dev, "offloads left on");
    }
}

/// Start `argv` inside namespace `ns`, its output appended to `log`.
///
/// Only the network namespace is entered (`setns` between fork and exec),
/// not `ip netns exec`'s private mount namespace: the namespaces the agent
/// makes (its pods', its emulated wire) must be visible here, to be
/// removed when it is killed outright. Its own process group keeps a
/// terminal's Ctrl-C to the controller, which stops its agents in order.
pub fn spawn_agent(ns: &str, argv: &[String], log: &Path) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    let (prog, rest) = argv
        .split_first()
        .ok_or_else(|| "empty agent command".to_string())?;
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let path = Path::new(NETNS_DIR).join(ns);
    let nsfile = File::open(&path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let fd = nsfile.as_raw_fd();
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
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
        .map_err(|e| format!("starting {prog} in {ns}: {e}"))?;
    drop(nsfile);
    Ok(child)
}

/// SIGTERM, up to `grace` for it to exit, then SIGKILL; always reaped.
pub fn stop(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// SIGKILL every process in namespace `ns` but this one.
fn kill_pids_in(ns: &str) {
    let Ok(out) = ip(&["netns", "pids", ns]) else {
        return;
    };
    let me = std::process::id();
    for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
        if pid > 1 && u32::try_from(pid).ok() != Some(me) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Whether process `pid` runs: a zombie (killed, not yet reaped) does not.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Wait up to `limit` for process `pid` to be gone (a SIGKILL is
/// delivered, not awaited).
pub fn wait_gone(pid: u32, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while process_alive(pid) && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
}

/// Kill what runs in `ns` and delete it; absent is fine.
pub fn remove_namespace(ns: &str) -> Result<(), String> {
    if !netns_exists(ns) {
        return Ok(());
    }
    kill_pids_in(ns);
    let mut last = Ok(String::new());
    // Processes just killed may still hold it for a moment.
    for _ in 0..10 {
        last = ip(&["netns", "del", ns]);
        if last.is_ok() || !netns_exists(ns) {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(100));
    }
    last.map(drop)
}

/// Every namespace whose name starts with `prefix` (what a node's agent
/// made, or what a previous run left).
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Delete a link of the fabric namespace; absent is fine (deleting a
/// node's namespace deletes the pair already).
pub fn remove_link(fabric: &str, dev: &str) {
    if ip(&["-n", fabric, "link", "show", dev]).is_ok() {
        let _ = ip(&["-n", fabric, "link", "del", dev]);
    }
}
