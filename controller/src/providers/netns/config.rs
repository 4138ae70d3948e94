//! The netns provider's configuration file (`--node-provider
//! netns:<file>`), read and checked before anything is made: every error
//! names the field.
//!
//! ```yaml
//! fabric: {namespace: sl-lab-fabric, bridge: br0}
//! addresses: {ipv4: 198.18.0.0/24, ipv6: "fd00:18::/64", firstHost: 20}
//! agent:
//!   binary: /usr/local/bin/sluice-agent
//!   args: [--datapath, emulated]
//! server: https://198.18.0.2:6443
//! stateDir: /var/lib/sluice/lab-nodes
//! namePrefix: sl-lab1-
//! maxNodes: 8          # optional: the quota
//! cluster: sluice      # optional: the kubeconfigs' cluster name
//! ```

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file as written (camelCase keys; unknown keys are refused).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    fabric: FabricFile,
    addresses: AddressesFile,
    agent: AgentFile,
    server: String,
    state_dir: PathBuf,
    name_prefix: String,
    #[serde(default)]
    max_nodes: Option<u32>,
    #[serde(default)]
    cluster: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FabricFile {
    namespace: String,
    bridge: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AddressesFile {
    #[serde(default)]
    ipv4: Option<String>,
    #[serde(default)]
    ipv6: Option<String>,
    first_host: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentFile {
    binary: PathBuf,
    #[serde(default)]
    args: Vec<String>,
}

/// A checked configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsConfig {
    /// The namespace holding the lab's bridge.
    pub fabric_namespace: String,
    pub bridge: String,
    pub ipv4: Option<Prefix<Ipv4Addr>>,
    pub ipv6: Option<Prefix<Ipv6Addr>>,
    /// The host index of the first node's addresses (`198.18.0.0/24` and
    /// 20: the first node is 198.18.0.20).
    pub first_host: u32,
    pub agent_binary: PathBuf,
    /// Appended to the flags the provider sets.
    pub agent_args: Vec<String>,
    /// What the agents' kubeconfigs point at.
    pub server: String,
    /// Kubeconfigs, logs, status files of the nodes.
    pub state_dir: PathBuf,
    /// Every namespace the provider makes starts with this.
    pub name_prefix: String,
    /// At most this many nodes at once (all pools): the quota.
    pub max_nodes: Option<u32>,
    pub cluster: String,
}

/// An address prefix of one family: its network address and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix<A> {
    pub network: A,
    pub len: u8,
}

/// A field of the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// Dotted, as in the file (`addresses.ipv4`); empty when the file
    /// itself could not be read or parsed.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.field,
                self.message
            )
        }
    }
}

impl std::error::Error for ConfigError {}

/// Flags the provider sets itself; `agent.args` may not repeat them.
pub const RESERVED_AGENT_FLAGS: &[&str] = &[
    "--kubeconfig",
    "--state",
    "--config",
    "--node-name",
    "--node-ip",
    "--zone",
    "--pool",
    "--node-version",
    "--cpu",
    "--memory",
    "--node-labels",
    "--register-with-taints",
    "--nic",
    "--status-file",
    "--pod-log-dir",
    "--pod-netns-prefix",
    "--bpf-pin-dir",
];

/// Interface names are at most 15 bytes (IFNAMSIZ less the NUL).
const IFNAME_MAX: usize = 15;

impl NetnsConfig {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<NetnsConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            field: String::new(),
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(path, &text)
    }

    /// Check `text`, the contents of `path` (named in errors; the agent
    /// binary's existence is checked, not the other paths').
    pub fn parse(path: &Path, text: &str) -> Result<NetnsConfig, ConfigError> {
        let err = |field: &str, message: String| ConfigError {
            file: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        // serde_yaml's messages name the unknown or missing key and where.
        let f: File = serde_yaml::from_str(text).map_err(|e| err("", e.to_string()))?;

        if f.fabric.namespace.is_empty() || f.fabric.namespace.contains('/') {
            return Err(err(
                "fabric.namespace",
                format!("{:?} is not a network namespace name", f.fabric.namespace),
            ));
        }
        if f.fabric.bridge.is_empty()
            || f.fabric.bridge.len() > IFNAME_MAX
            || f.fabric.bridge.contains(['/', ' '])
        {
            return Err(err(
                "fabric.bridge",
                format!(
                    "{:?} is not an interface name (1 to {IFNAME_MAX} characters, no '/' or space)",
                    f.fabric.bridge
                ),
            ));
        }
        let ipv4 = f
            .addresses
            .ipv4
            .as_deref()
            .map(|s| parse_v4(s).map_err(|m| err("addresses.ipv4", m)))
            .transpose()?;
        let ipv6 = f
            .addresses
            .ipv6
            .as_deref()
            .map(|s| parse_v6(s).map_err(|m| err("addresses.ipv6", m)))
            .transpose()?;
        if ipv4.is_none() && ipv6.is_none() {
            return Err(err(
                "addresses",
                "give ipv4, ipv6 or both (the nodes' prefixes)".into(),
            ));
        }
        let first = f.addresses.first_host;
        let capacity = super::plan::host_capacity(ipv4.as_ref(), ipv6.as_ref());
        if first == 0 || u64::from(first) > capacity {
            return Err(err(
                "addresses.firstHost",
                format!("{first} is not a host index of the prefixes (1 to {capacity})"),
            ));
        }

        if !f.agent.binary.is_absolute() {
            return Err(err(
                "agent.binary",
                format!("{} is not an absolute path", f.agent.binary.display()),
            ));
        }
        if !f.agent.binary.is_file() {
            return Err(err(
                "agent.binary",
                format!("{} is not a file", f.agent.binary.display()),
            ));
        }
        for a in &f.agent.args {
            let flag = a.split_once('=').map_or(a.as_str(), |(k, _)| k);
            if RESERVED_AGENT_FLAGS.contains(&flag) {
                return Err(err(
                    "agent.args",
                    format!("{flag} is set by the provider for each node"),
                ));
            }
        }

        let Some(host) = server_host(&f.server) else {
            return Err(err(
                "server",
                format!("{:?}: expected https://<host>:<port>", f.server),
            ));
        };
        // The controller's own address handed to a node would cut the
        // lab off from its API.
        if let Some(i) = host_index(&host, ipv4.as_ref(), ipv6.as_ref()) {
            if i >= u128::from(first) {
                return Err(err(
                    "server",
                    format!(
                        "{host} is host {i} of the nodes' prefix, which nodes get from \
                         addresses.firstHost ({first}) on: give the controller an address below it"
                    ),
                ));
            }
        }
        if !f.state_dir.is_absolute() {
            return Err(err(
                "stateDir",
                format!("{} is not an absolute path", f.state_dir.display()),
            ));
        }
        // Namespace names end up in /run/netns and in `ip` arguments:
        // keep them to what node names are made of.
        let prefix_ok = !f.name_prefix.is_empty()
            && f.name_prefix.len() <= 40
            && f.name_prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && f.name_prefix.starts_with(|c: char| c.is_ascii_lowercase());
        if !prefix_ok {
            return Err(err(
                "namePrefix",
                format!(
                    "{:?}: 1 to 40 characters of a-z, 0-9 and '-', starting with a letter",
                    f.name_prefix
                ),
            ));
        }
        if f.max_nodes == Some(0) {
            return Err(err(
                "maxNodes",
                "0 would allow no node; leave it out for no limit".into(),
            ));
        }
        let cluster = f.cluster.unwrap_or_else(|| "sluice".into());
        if !crate::identity::is_dns_subdomain(&cluster) {
            return Err(err("cluster", format!("{cluster:?} is not a valid name")));
        }
        Ok(NetnsConfig {
            fabric_namespace: f.fabric.namespace,
            bridge: f.fabric.bridge,
            ipv4,
            ipv6,
            first_host: first,
            agent_binary: f.agent.binary,
            agent_args: f.agent.args,
            server: f.server.trim_end_matches('/').to_string(),
            state_dir: f.state_dir,
            name_prefix: f.name_prefix,
            max_nodes: f.max_nodes,
            cluster,
        })
    }
}

/// The host of `https://<host>:<port>[/]` (brackets removed), if the URL
/// is one.
fn server_host(s: &str) -> Option<String> {
    let rest = s.strip_prefix("https://")?.trim_end_matches('/');
    if rest.contains('/') {
        return None;
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(r) => r.split_once("]:")?,
        None => rest.rsplit_once(':')?,
    };
    port.parse::<u16>().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| host.to_string())
}

/// `host`'s index in the nodes' prefix of its family, if it is an
/// address inside one.
fn host_index(
    host: &str,
    v4: Option<&Prefix<Ipv4Addr>>,
    v6: Option<&Prefix<Ipv6Addr>>,
) -> Option<u128> {
    match host.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(a) => {
            let p = v4?;
            let mask = u32::MAX << (32 - p.len);
            (u32::from(a) & mask == u32::from(p.network)).then(|| u128::from(u32::from(a) & !mask))
        }
        std::net::IpAddr::V6(a) => {
            let p = v6?;
            let mask = u128::MAX << (128 - p.len);
            (u128::from(a) & mask == u128::from(p.network)).then(|| u128::from(a) & !mask)
        }
    }
}

fn split(s: &str) -> Result<(&str, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: expected <address>/<length>"))?;
    let len = len
        .parse::<u8>()
        .map_err(|_| format!("{s:?}: the length is not a number"))?;
    Ok((addr, len))
}

/// The lab's IPv4 space: 198.18.0.0/15 (RFC 2544, benchmarking).
fn parse_v4(s: &str) -> Result<Prefix<Ipv4Addr>, String> {
    let (addr, len) = split(s)?;
    let a: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("{s:?}: {addr:?} is not an IPv4 address"))?;
    if !(15..=30).contains(&len) {
        return Err(format!(
            "{s:?}: the length must be 15 to 30 (inside 198.18.0.0/15, room for a host)"
        ));
    }
    let mask = u32::MAX << (32 - len);
    if u32::from(a) & !mask != 0 {
        return Err(format!("{s:?}: host bits are set"));
    }
    if u32::from(a) & (u32::MAX << 17) != u32::from(Ipv4Addr::new(198, 18, 0, 0)) {
        return Err(format!("{s:?}: not inside 198.18.0.0/15"));
    }
    Ok(Prefix { network: a, len })
}

/// The lab's IPv6 space: fd00::/8 (unique local addresses).
fn parse_v6(s: &str) -> Result<Prefix<Ipv6Addr>, String> {
    let (addr, len) = split(s)?;
    let a: Ipv6Addr = addr
        .parse()
        .map_err(|_| format!("{s:?}: {addr:?} is not an IPv6 address"))?;
    if !(8..=126).contains(&len) {
        return Err(format!(
            "{s:?}: the length must be 8 to 126 (inside fd00::/8, room for a host)"
        ));
    }
    let mask = u128::MAX << (128 - len);
    if u128::from(a) & !mask != 0 {
        return Err(format!("{s:?}: host bits are set"));
    }
    if a.octets()[0] != 0xfd {
        return Err(format!("{s:?}: not inside fd00::/8"));
    }
    Ok(Prefix { network: a, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that exists, for `agent.binary`.
    fn agent() -> String {
        std::env::current_exe()
            .expect("the test binary")
            .display()
            .to_string()
    }

    fn good() -> String {
        format!(
            "fabric: {{namespace: sl-fab, bridge: br0}}
addresses: {{ipv4: 198.18.0.0/24, ipv6: 'fd00:18::/64', firstHost: 20}}
agent: {{binary: {}, args: [--datapath, emulated]}}
server: https://198.18.0.2:6443
stateDir: /tmp/lab
namePrefix: sl-lab1-
maxNodes: 4
",
            agent()
        )
    }

    fn parse(text: &str) -> Result<NetnsConfig, ConfigError> {
        NetnsConfig::parse(Path::new("lab.yaml"), text)
    }

    #[test]
    fn a_good_file_reads() {
        let c = parse(&good()).expect("good config");
        assert_eq!(c.fabric_namespace, "sl-fab");
        assert_eq!(c.bridge, "br0");
        assert_eq!(
            c.ipv4,
            Some(Prefix {
                network: Ipv4Addr::new(198, 18, 0, 0),
                len: 24
            })
        );
        assert_eq!(c.ipv6.map(|p| p.len), Some(64));
        assert_eq!(c.first_host, 20);
        assert_eq!(c.agent_args, vec!["--datapath", "emulated"]);
        assert_eq!(c.max_nodes, Some(4));
        assert_eq!(c.cluster, "sluice");
        assert_eq!(c.name_prefix, "sl-lab1-");
        // Below firstHost, outside the prefixes, or a name: all fine.
        for server in [
            "https://198.18.0.19:6443",
            "https://198.18.1.30:6443",
            "https://[fd00:18::2]:6443",
            "https://api.lab:443",
        ] {
            let text = good().replace("https://198.18.0.2:6443", server);
            parse(&text).unwrap_or_else(|e| panic!("{server}: {e}"));
        }
    }

    #[test]
    fn one_family_is_enough() {
        let text = good().replace(", ipv6: 'fd00:18::/64'", "");
        assert_eq!(parse(&text).expect("v4 only").ipv6, None);
        let text = good().replace("ipv4: 198.18.0.0/24, ", "");
        assert_eq!(parse(&text).expect("v6 only").ipv4, None);
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("198.18.0.0/24", "10.0.0.0/24", "addresses.ipv4"),
            ("198.18.0.0/24", "198.18.0.1/24", "addresses.ipv4"),
            ("198.18.0.0/24", "198.18.0.0/31", "addresses.ipv4"),
            ("198.18.0.0/24", "198.18.0.0", "addresses.ipv4"),
            ("fd00:18::/64", "2001:db8::/64", "addresses.ipv6"),
            ("firstHost: 20", "firstHost: 0", "addresses.firstHost"),
            ("firstHost: 20", "firstHost: 255", "addresses.firstHost"),
            (
                "bridge: br0",
                "bridge: a-very-long-bridge-name",
                "fabric.bridge",
            ),
            ("namespace: sl-fab", "namespace: ''", "fabric.namespace"),
            (
                "https://198.18.0.2:6443",
                "http://198.18.0.2:6443",
                "server",
            ),
            ("https://198.18.0.2:6443", "https://198.18.0.2", "server"),
            (
                "https://198.18.0.2:6443",
                "https://198.18.0.20:6443",
                "server",
            ),
            (
                "https://198.18.0.2:6443",
                "https://[fd00:18::99]:6443",
                "server",
            ),
            ("stateDir: /tmp/lab", "stateDir: lab", "stateDir"),
            ("namePrefix: sl-lab1-", "namePrefix: Lab_1", "namePrefix"),
            ("maxNodes: 4", "maxNodes: 0", "maxNodes"),
            (
                "args: [--datapath, emulated]",
                "args: [--zone=x]",
                "agent.args",
            ),
            (
                "args: [--datapath, emulated]",
                "args: [--node-name, x]",
                "agent.args",
            ),
        ];
        for (from, to, field) in cases {
            let text = good().replace(from, to);
            assert_ne!(text, good(), "{from} not in the sample");
            let e = parse(&text).expect_err(to);
            assert_eq!(e.field, *field, "{to}: {e}");
            assert!(e.to_string().starts_with("lab.yaml: "), "{e}");
        }
    }

    #[test]
    fn the_agent_binary_must_exist_and_be_absolute() {
        let e = parse(&good().replace(&agent(), "/nonexistent/sluice-agent")).expect_err("missing");
        assert_eq!(e.field, "agent.binary");
        let e = parse(&good().replace(&agent(), "sluice-agent")).expect_err("relative");
        assert_eq!(e.field, "agent.binary");
    }

    #[test]
    fn unknown_missing_and_unfamiliar_keys_are_refused() {
        let e = parse(&format!("{}colour: blue\n", good())).expect_err("unknown key");
        assert!(e.to_string().contains("colour"), "{e}");
        let e = parse(&good().replace("server: https://198.18.0.2:6443\n", ""))
            .expect_err("missing key");
        assert!(e.to_string().contains("server"), "{e}");
        let text = good().replace(
            "addresses: {ipv4: 198.18.0.0/24, ipv6: 'fd00:18::/64', firstHost: 20}",
            "addresses: {firstHost: 20}",
        );
        assert_eq!(parse(&text).expect_err("no family").field, "addresses");
        let e = parse("[not, a, map]").expect_err("not a map");
        assert_eq!(e.field, "");
    }

    #[test]
    fn unreadable_files_say_so() {
        let e = NetnsConfig::load(Path::new("/nonexistent/lab.yaml")).expect_err("missing");
        assert!(e.to_string().contains("cannot read it"), "{e}");
    }
}
