//! What the machine says about itself, for the Node's status: CPUs,
//! memory, kernel, OS, architecture, and the uplink's addresses. The
//! parsers are pure; the readers around them only fetch the text.

use std::net::IpAddr;

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// `PRETTY_NAME` of `/etc/os-release`, unquoted.
pub fn parse_os_release(text: &str) -> Option<String> {
    let v = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?;
    Some(v.trim_matches(|c| c == '"' || c == '\'').to_string())
}

/// Rust's architecture name in Kubernetes' (Go's) spelling.
pub fn kube_arch(rust_arch: &str) -> String {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
    .to_string()
}

/// The global addresses of `ip -j addr show dev <link>`, first per family.
pub fn parse_ip_addr_json(v: &serde_json::Value) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    let infos = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|link| link.get("addr_info")?.as_array())
        .flatten();
    for info in infos {
        if info.get("scope").and_then(|s| s.as_str()) != Some("global") {
            continue;
        }
        let Some(ip) = info
            .get("local")
            .and_then(|s| s.as_str())
            .and_then(|s| s.parse::<IpAddr>().ok())
        else {
            continue;
        };
        if !out.iter().any(|a| a.is_ipv4() == ip.is_ipv4()) {
            out.push(ip);
        }
    }
    out
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The facts as read on this machine (anything unreadable is left empty
/// or zero: the Node is still registered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub cpus: u32,
    pub memory: u64,
    pub kernel_version: String,
    pub os_image: String,
    pub architecture: String,
    pub machine_id: String,
    pub boot_id: String,
}

impl Machine {
    pub fn read() -> Machine {
        Machine {
            cpus: std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
            memory: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| parse_meminfo(&t))
                .unwrap_or(0),
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            os_image: std::fs::read_to_string("/etc/os-release")
                .ok()
                .and_then(|t| parse_os_release(&t))
                .unwrap_or_else(|| "Linux".into()),
            architecture: kube_arch(std::env::consts::ARCH),
            machine_id: read_trimmed("/etc/machine-id"),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        }
    }
}

/// The global addresses of `link` in this network namespace.
pub fn link_addrs(link: &str) -> anyhow::Result<Vec<IpAddr>> {
    let v = crate::netlink::Netns::current()?.ip_json(&["addr", "show", "dev", link])?;
    Ok(parse_ip_addr_json(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_total_in_bytes() {
        let t = "MemTotal:       16318412 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_meminfo(t), Some(16_318_412 * 1024));
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn os_release_pretty_name_unquoted() {
        let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\n";
        assert_eq!(
            parse_os_release(t).as_deref(),
            Some("Debian GNU/Linux 13 (trixie)")
        );
        assert_eq!(parse_os_release("NAME=x\n"), None);
    }

    #[test]
    fn architectures_in_kubernetes_spelling() {
        assert_eq!(kube_arch("x86_64"), "amd64");
        assert_eq!(kube_arch("aarch64"), "arm64");
        assert_eq!(kube_arch("mips"), "mips");
    }

    #[test]
    fn global_addresses_first_per_family() {
        let v = serde_json::json!([{"ifname": "nic0", "addr_info": [
            {"family": "inet", "local": "198.18.0.11", "scope": "global"},
            {"family": "inet", "local": "198.18.0.99", "scope": "global"},
            {"family": "inet6", "local": "fe80::1", "scope": "link"},
            {"family": "inet6", "local": "fd00:18::11", "scope": "global"},
        ]}]);
        let got: Vec<String> = parse_ip_addr_json(&v)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, vec!["198.18.0.11", "fd00:18::11"]);
        assert!(parse_ip_addr_json(&serde_json::json!({})).is_empty());
    }
}
