//! Link, address, route and network-namespace operations.
//!
//! Everything is synchronous. Operations are carried out with iproute2
//! (`ip`, JSON output where something is read back) run *inside* a chosen
//! network namespace: the child process enters it with `setns` before
//! `exec`, so callers never depend on which namespace their own thread is
//! in. Work that must happen in-process inside a namespace (opening a TAP,
//! creating an `AF_PACKET` socket, writing a per-namespace sysctl) runs on a
//! short-lived scoped thread that entered it ([`Netns::run`]); a thread's
//! network namespace is its own, so the rest of the process is untouched.
//!
//! The free functions ([`add_route`], [`del_route`], [`link_index`], …) act
//! on the calling thread's namespace.

pub mod snapshot;
pub mod sysctl;

use std::ffi::CString;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// A handle on a network namespace (an open nsfs file).
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
    label: String,
}

impl Netns {
    /// The calling thread's network namespace.
    pub fn current() -> Result<Self> {
        Self::open(Path::new("/proc/thread-self/ns/net")).map(|mut n| {
            n.label = "current".to_string();
            n
        })
    }

    /// A namespace by path (`/run/netns/NAME`, `/proc/PID/ns/net`, …).
    pub fn open(path: &Path) -> Result<Self> {
        let f = std::fs::File::open(path)
            .with_context(|| format!("opening network namespace {}", path.display()))?;
        Ok(Netns {
            fd: OwnedFd::from(f),
            label: path.display().to_string(),
        })
    }

    /// A namespace named as `ip netns` names them.
    pub fn named(name: &str) -> Result<Self> {
        Self::open(&Path::new("/run/netns").join(name))
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A path other processes can open to reach this namespace (for
    /// `ip link set … netns PATH`) while this handle is open.
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
    }

    /// Run `f` on a thread that entered this namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T> {
        let fd = self.fd.as_fd();
        std::thread::scope(|s| {
            let h = s.spawn(move || -> Result<T> {
                nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET)
                    .context("setns into the network namespace")?;
                Ok(f())
            });
            h.join()
                .map_err(|_| anyhow!("thread inside network namespace panicked"))?
        })
        .with_context(|| format!("in network namespace {}", self.label))
    }

    /// `ip ARGS…` inside this namespace; returns stdout.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        run_ip(Some(self.fd.as_raw_fd()), args)
    }

    /// `ip -j ARGS…` inside this namespace, parsed.
    pub fn ip_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut a = vec!["-j"];
        a.extend_from_slice(args);
        let out = self.ip(&a)?;
        if out.trim().is_empty() {
            return Ok(serde_json::Value::Array(Vec::new()));
        }
        serde_json::from_str(&out).with_context(|| format!("parsing output of ip {}", a.join(" ")))
    }

    pub fn link_exists(&self, name: &str) -> bool {
        self.ip(&["link", "show", "dev", name]).is_ok()
    }

    /// The link's MAC address.
    pub fn link_mac(&self, name: &str) -> Result<[u8; 6]> {
        let v = self.ip_json(&["link", "show", "dev", name])?;
        let text = v
            .get(0)
            .and_then(|l| l.get("address"))
            .and_then(|a| a.as_str())
            .with_context(|| format!("no MAC address on {name}"))?;
        parse_mac(text).with_context(|| format!("MAC address {text:?} of {name}"))
    }

    /// Give the link `mac`.
    pub fn set_link_mac(&self, name: &str, mac: [u8; 6]) -> Result<()> {
        self.ip(&["link", "set", "dev", name, "address", &format_mac(mac)])
            .map(|_| ())
            .with_context(|| format!("setting the MAC of {name}"))
    }

    pub fn link_index(&self, name: &str) -> Result<u32> {
        let name = name.to_string();
        self.run(move || link_index(&name))?
    }

    /// Delete a link; a link that does not exist is not an error.
    pub fn del_link_if_exists(&self, name: &str) -> Result<()> {
        if !self.link_exists(name) {
            return Ok(());
        }
        self.ip(&["link", "del", "dev", name])
            .map(|_| ())
            .with_context(|| format!("deleting link {name}"))
    }

    pub fn add_route(&self, dst: &str, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
        self.ip(&route_args("replace", dst, via, dev)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>())
            .map(|_| ())
    }

    /// Delete a route; one already gone is not an error (see
    /// [`del_route`]).
    pub fn del_route(&self, dst: &str, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
        match self.ip(&route_args("del", dst, via, dev)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>())
        {
            Ok(_) => Ok(()),
            Err(e) if is_no_such_route(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// `aa:bb:cc:dd:ee:ff`.
fn format_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn run_ip(netns_fd: Option<i32>, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    if let Some(fd) = netns_fd {
        // SAFETY: only an async-signal-safe syscall between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = cmd
        .output()
        .with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS…` in the calling thread's namespace.
pub fn ip(args: &[&str]) -> Result<String> {
    run_ip(None, args)
}

fn route_args(verb: &str, dst: &str, via: Option<IpAddr>, dev: Option<&str>) -> Vec<String> {
    let v6 = match via {
        Some(a) => a.is_ipv6(),
        None => dst.contains(':'),
    };
    let mut a: Vec<String> = Vec::new();
    if v6 {
        a.push("-6".into());
    }
    a.push("route".into());
    a.push(verb.into());
    a.push(dst.into());
    if let Some(v) = via {
        a.push("via".into());
        a.push(v.to_string());
    }
    if let Some(d) = dev {
        a.push("dev".into());
        a.push(d.into());
    }
    a
}

/// Add (or replace) a route in the calling thread's namespace:
/// `dst_cidr` (`"198.19.2.0/24"`, `"default"`), optionally via a gateway
/// and/or out of a device.
pub fn add_route(dst_cidr: &str, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
    let a = route_args("replace", dst_cidr, via, dev);
    ip(&a.iter().map(String::as_str).collect::<Vec<_>>()).map(|_| ())
}

/// Delete a route in the calling thread's namespace; a route that is
/// already gone is not an error. (The kernel answers ESRCH, "No such
/// process", when no route matches: the prefix was taken over by a route
/// via another gateway, as when a dead node's pod CIDR goes to its
/// replacement, or someone else removed it. Failing on that would stop
/// every later route change of the agent, retried forever.)
pub fn del_route(dst_cidr: &str, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
    let a = route_args("del", dst_cidr, via, dev);
    match ip(&a.iter().map(String::as_str).collect::<Vec<_>>()) {
        Ok(_) => Ok(()),
        Err(e) if is_no_such_route(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `ip route del`'s answer when nothing matches.
fn is_no_such_route(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("No such process")
}

/// The interface index of `name` in the calling thread's namespace.
pub fn link_index(name: &str) -> Result<u32> {
    let c = CString::new(name).with_context(|| format!("bad interface name {name:?}"))?;
    // SAFETY: a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("no interface named {name}"));
    }
    Ok(idx)
}

/// Create a named namespace (`ip netns add`) and open it.
pub fn netns_add(name: &str) -> Result<Netns> {
    ip(&["netns", "add", name]).with_context(|| format!("creating network namespace {name}"))?;
    Netns::named(name)
}

/// Delete a named namespace; absent is fine.
pub fn netns_del(name: &str) -> Result<()> {
    if !Path::new("/run/netns").join(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name])
        .map(|_| ())
        .with_context(|| format!("deleting network namespace {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace of this test's own, deleted also on failure.
    struct TestNs(String);
    impl Drop for TestNs {
        fn drop(&mut self) {
            let _ = netns_del(&self.0);
        }
    }

    #[test]
    fn deleting_a_route_already_gone_or_taken_over_is_not_an_error() {
        // Needs root (namespaces), as every netns test here does.
        let name = format!("sl-rt-del-{}", std::process::id());
        let guard = TestNs(name.clone());
        let ns = netns_add(&guard.0).expect("a namespace");
        ns.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"])
            .expect("a veth pair");
        ns.ip(&["link", "set", "d1", "up"]).expect("up");
        ns.ip(&["link", "set", "d0", "up"]).expect("up");
        ns.ip(&["addr", "add", "198.18.9.1/24", "dev", "d0"])
            .expect("addr");
        let a: IpAddr = "198.18.9.14".parse().unwrap();
        let b: IpAddr = "198.18.9.16".parse().unwrap();
        // A dead node's pod CIDR, taken over by its replacement's route.
        ns.add_route("198.19.9.0/24", Some(a), None).expect("via a");
        ns.add_route("198.19.9.0/24", Some(b), None).expect("via b");
        ns.del_route("198.19.9.0/24", Some(a), None)
            .expect("the route via a is gone: not an error");
        let routes = ns.ip(&["route", "show", "198.19.9.0/24"]).expect("routes");
        assert!(routes.contains("via 198.18.9.16"), "{routes}");
        // Deleted twice.
        ns.del_route("198.19.9.0/24", Some(b), None)
            .expect("deleted");
        ns.del_route("198.19.9.0/24", Some(b), None)
            .expect("already gone: not an error");
        // Other failures still are.
        assert!(ns.del_route("not-a-prefix", Some(b), None).is_err());
        drop(ns);
    }

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:4e:00:0a:ff:01"),
            Some([0x02, 0x4e, 0, 0x0a, 0xff, 1])
        );
        for bad in [
            "",
            "02:4e:00:0a:ff",
            "02:4e:00:0a:ff:01:02",
            "zz:4e:00:0a:ff:01",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
        let mac = [0x02, 0x4e, 0, 0x0a, 0xff, 1];
        assert_eq!(format_mac(mac), "02:4e:00:0a:ff:01");
        assert_eq!(parse_mac(&format_mac(mac)), Some(mac));
    }

    #[test]
    fn route_args_pick_family() {
        assert_eq!(
            route_args(
                "replace",
                "198.19.2.0/24",
                Some("198.18.0.3".parse().unwrap()),
                None
            ),
            ["route", "replace", "198.19.2.0/24", "via", "198.18.0.3"]
        );
        assert_eq!(
            route_args("del", "fd00:1::/64", None, Some("slp1")),
            ["-6", "route", "del", "fd00:1::/64", "dev", "slp1"]
        );
    }
}
