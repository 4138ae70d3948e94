//! What a node is made of, decided without touching the system: its
//! namespace's and links' names, its addresses, its files and its agent's
//! command line. The I/O in `system` only carries these out.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use sluice_model::k8s::jiff::Timestamp;
use sluice_nodepools::CreateNode;

use super::config::{NetnsConfig, Prefix};

/// The interface name of every node's uplink, as the agent's `--nic`.
pub const NIC: &str = "nic0";

/// The largest host index every configured family can give: IPv4 keeps
/// its network and broadcast addresses out, IPv6 its subnet-router
/// anycast (index 0); indices are `u32`.
pub fn host_capacity(v4: Option<&Prefix<Ipv4Addr>>, v6: Option<&Prefix<Ipv6Addr>>) -> u64 {
    let mut cap = u64::from(u32::MAX);
    if let Some(p) = v4 {
        let hosts = 1u64 << (32 - u32::from(p.len));
        cap = cap.min(hosts.saturating_sub(2));
    }
    if let Some(p) = v6 {
        let bits = 128 - u32::from(p.len);
        if bits < 64 {
            cap = cap.min((1u64 << bits) - 1);
        }
    }
    cap
}

/// The lowest free host index from `from` on (at least `first_host`),
/// wrapping round to `first_host`, or `None` when the prefixes are full.
///
/// The caller passes one past the index it handed out last, so a freed
/// address is given again only once the others have been, as a DHCP server
/// does: a node replacing a dead one at once would otherwise take its
/// addresses while the other nodes' neighbour entries still name the dead
/// node's MAC.
pub fn allocate(cfg: &NetnsConfig, used: &BTreeSet<u32>, from: u32) -> Option<u32> {
    let cap = host_capacity(cfg.ipv4.as_ref(), cfg.ipv6.as_ref());
    let start = from.max(cfg.first_host);
    let free = |i: &u32| !used.contains(i);
    (start..=u32::MAX)
        .take_while(|i| u64::from(*i) <= cap)
        .find(free)
        .or_else(|| (cfg.first_host..start).find(free))
}

/// Where [`allocate`] goes on from after a restart: one past the highest
/// index the adopted nodes hold (0 with none). The cursor is not stored;
/// starting over from the lowest free index would hand a node that just
/// died its addresses again, the case `allocate`'s order exists to avoid,
/// and a controller killed mid-upgrade restarts right among such deaths.
pub fn resume_from(used: &BTreeSet<u32>) -> u32 {
    used.iter().next_back().map_or(0, |i| i.saturating_add(1))
}

/// A node's addresses, one per configured family, with the prefix
/// length (`198.18.0.20/24`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddrs {
    pub v4: Option<(Ipv4Addr, u8)>,
    pub v6: Option<(Ipv6Addr, u8)>,
}

impl NodeAddrs {
    /// `addr/len` of each family, IPv4 first.
    pub fn cidrs(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((a, l)) = self.v4 {
            out.push(format!("{a}/{l}"));
        }
        if let Some((a, l)) = self.v6 {
            out.push(format!("{a}/{l}"));
        }
        out
    }

    /// The bare addresses, IPv4 first (the agent's `--node-ip`).
    pub fn ips(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((a, _)) = self.v4 {
            out.push(a.to_string());
        }
        if let Some((a, _)) = self.v6 {
            out.push(a.to_string());
        }
        out
    }
}

/// The addresses of host `index` (one [`allocate`] gave).
pub fn addresses(cfg: &NetnsConfig, index: u32) -> NodeAddrs {
    NodeAddrs {
        v4: cfg.ipv4.map(|p| {
            (
                Ipv4Addr::from(u32::from(p.network).wrapping_add(index)),
                p.len,
            )
        }),
        v6: cfg.ipv6.map(|p| {
            (
                Ipv6Addr::from(u128::from(p.network).wrapping_add(u128::from(index))),
                p.len,
            )
        }),
    }
}

/// Everything named after one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNames {
    /// The node's network namespace: `<namePrefix><node>`.
    pub namespace: String,
    /// The veth end in the fabric namespace, on the bridge (15 bytes at
    /// most, so a hash of the namespace's name rather than the name).
    pub fabric_veth: String,
    /// The agent's `--pod-netns-prefix`: its pods' namespaces are
    /// `<this>-<8 hex>`.
    pub pod_netns_prefix: String,
    pub kubeconfig: PathBuf,
    /// What a restarted controller adopts the node from.
    pub record: PathBuf,
    pub log: PathBuf,
    pub status: PathBuf,
    pub pod_logs: PathBuf,
    /// The agent's `--bpf-pin-dir` (used by its kernel datapath only).
    pub bpf_pin_dir: PathBuf,
}

pub fn names(cfg: &NetnsConfig, node: &str) -> NodeNames {
    let namespace = format!("{}{node}", cfg.name_prefix);
    let d = |suffix: &str| cfg.state_dir.join(format!("{node}{suffix}"));
    NodeNames {
        fabric_veth: format!("nv{:08x}", fnv1a(namespace.as_bytes())),
        pod_netns_prefix: format!("{namespace}-p"),
        kubeconfig: d(".kubeconfig"),
        record: d(".json"),
        log: d(".log"),
        status: d(".status.json"),
        pod_logs: d(".pods"),
        bpf_pin_dir: PathBuf::from("/sys/fs/bpf/sluice").join(&namespace),
        namespace,
    }
}

/// The prefix of the wire namespaces the agent `pid` of `node` makes on
/// its emulated datapath (`sluice-w-<node>-<pid>-<n>`, the agent's
/// `engine::emulated`): an agent killed outright leaves them, with its
/// uplink inside. The pid keeps another lab's node of the same name out.
pub fn wire_netns_prefix(node: &str, pid: u32) -> String {
    format!("{}{pid}-", wire_netns_base(node))
}

/// `sluice-w-<node>-`, the node's name as the agent's `podnet::sanitize`
/// cleans it: alphanumerics and '-', 40 at most.
fn wire_netns_base(node: &str) -> String {
    let clean: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    format!("sluice-w-{clean}-")
}

/// The wire namespaces of `node` to remove once its agent is stopped:
/// those of the agent `pid`, and those of any other agent of the node that
/// no longer runs (`alive` says whether a pid does). An agent killed before
/// its pid was recorded (a controller killed while making the node), or a
/// node's earlier agent, leaves one with no record to find it by; another
/// lab's node of the same name has a live agent, and its namespace stays.
/// `existing` is every namespace's name. Pure.
pub fn wire_namespaces_to_remove(
    node: &str,
    pid: Option<u32>,
    existing: &[String],
    alive: impl Fn(u32) -> bool,
) -> Vec<String> {
    // `sluice-w-<node>-<pid>-<n>`: the node's own prefix with the pid
    // dropped; what follows must be exactly `<pid>-<n>`, so node `n1`
    // never takes node `n1-5`'s namespaces.
    let prefix = wire_netns_base(node);
    existing
        .iter()
        .filter(|name| {
            let Some(rest) = name.strip_prefix(prefix.as_str()) else {
                return false;
            };
            let Some((owner, n)) = rest.split_once('-') else {
                return false;
            };
            let (Ok(owner), Ok(_)) = (owner.parse::<u32>(), n.parse::<u32>()) else {
                return false;
            };
            Some(owner) == pid || !alive(owner)
        })
        .cloned()
        .collect()
}

/// The Kubernetes version as a kubelet reports it (`1.33.2` →
/// `v1.33.2`); empty when the pool gives none.
pub fn kubelet_version(version: &str) -> Option<String> {
    match version {
        "" => None,
        v if v.starts_with('v') => Some(v.to_string()),
        v => Some(format!("v{v}")),
    }
}

/// The agent's command line, program first.
pub fn agent_argv(
    cfg: &NetnsConfig,
    req: &CreateNode,
    addrs: &NodeAddrs,
    n: &NodeNames,
) -> Vec<String> {
    let p = |p: &PathBuf| p.display().to_string();
    let mut argv = vec![
        p(&cfg.agent_binary),
        "--kubeconfig".into(),
        p(&n.kubeconfig),
        "--node-name".into(),
        req.name.clone(),
    ];
    for ip in addrs.ips() {
        argv.extend(["--node-ip".into(), ip]);
    }
    argv.extend([
        "--zone".into(),
        req.zone.clone(),
        "--pool".into(),
        req.pool.clone(),
    ]);
    if let Some(v) = kubelet_version(&req.version) {
        argv.extend(["--node-version".into(), v]);
    }
    // The Node's cpu capacity is the pool's, in whole CPUs (rounded up: a
    // pool of 500m nodes still gets nodes that run something).
    if req.config.cpu_milli > 0 {
        let cpus = (req.config.cpu_milli + 999) / 1000;
        argv.extend(["--cpu".into(), cpus.to_string()]);
    }
    // The rest of the pool's config, as GKE puts it on its nodes: the
    // nodes share one host, so the machine's memory would be every node's.
    if req.config.memory_bytes > 0 {
        argv.extend(["--memory".into(), req.config.memory_bytes.to_string()]);
    }
    if !req.config.labels.is_empty() {
        let labels: Vec<String> = req
            .config
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        argv.extend(["--node-labels".into(), labels.join(",")]);
    }
    if !req.config.taints.is_empty() {
        let taints: Vec<String> = req
            .config
            .taints
            .iter()
            .map(|t| match t.value.as_str() {
                "" => format!("{}:{}", t.key, t.effect.kubernetes()),
                v => format!("{}={v}:{}", t.key, t.effect.kubernetes()),
            })
            .collect();
        argv.extend(["--register-with-taints".into(), taints.join(",")]);
    }
    argv.extend([
        "--nic".into(),
        NIC.into(),
        "--pod-netns-prefix".into(),
        n.pod_netns_prefix.clone(),
        "--status-file".into(),
        p(&n.status),
        "--pod-log-dir".into(),
        p(&n.pod_logs),
        "--bpf-pin-dir".into(),
        p(&n.bpf_pin_dir),
    ]);
    argv.extend(cfg.agent_args.iter().cloned());
    argv
}

/// The nodes whose run is over at `now` (A5: the provider ends a node at
/// `createdAt` + its `maxRunDuration`, as GKE deletes a flex-start VM),
/// from each node's end, if it has one. In name order.
pub fn runs_over<'a>(
    ends: impl IntoIterator<Item = (&'a str, Option<Timestamp>)>,
    now: Timestamp,
) -> Vec<String> {
    let mut over: Vec<String> = ends
        .into_iter()
        .filter(|(_, end)| run_over(*end, now))
        .map(|(name, _)| name.to_string())
        .collect();
    over.sort();
    over
}

/// Whether a run that ends at `end` (`None`: never) is over at `now`.
pub fn run_over(end: Option<Timestamp>, now: Timestamp) -> bool {
    end.is_some_and(|end| end <= now)
}

/// A recorded end of a run, read back: one that does not parse is no
/// end (the node is then removed only when deleted) rather than a node
/// removed at once on a restart.
pub fn read_run_end(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| t.parse().ok())
}

/// 32-bit FNV-1a: stable across runs and builds (std's hasher is not).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nodepools::NodeSpec;

    fn cfg(v4: Option<(&str, u8)>, v6: Option<(&str, u8)>, first: u32) -> NetnsConfig {
        NetnsConfig {
            fabric_namespace: "sl-fab".into(),
            bridge: "br0".into(),
            ipv4: v4.map(|(a, len)| Prefix {
                network: a.parse().expect("v4"),
                len,
            }),
            ipv6: v6.map(|(a, len)| Prefix {
                network: a.parse().expect("v6"),
                len,
            }),
            first_host: first,
            agent_binary: "/opt/sluice/sluice-agent".into(),
            agent_args: vec!["--datapath".into(), "emulated".into()],
            server: "https://198.18.0.2:6443".into(),
            state_dir: "/tmp/lab".into(),
            name_prefix: "sl-lab1-".into(),
            max_nodes: None,
            cluster: "sluice".into(),
        }
    }

    #[test]
    fn a_node_s_run_is_over_at_its_end_and_not_before() {
        // spec: A5
        let t = |s: &str| -> Timestamp { s.parse().expect("time") };
        let end = t("2026-11-23T13:00:00Z");
        let nodes = [
            ("p-b-x7kq", Some(end)),
            ("p-a-bcdf", Some(end)),
            ("p-a-ghjk", Some(t("2026-11-23T14:00:00Z"))),
            ("p-a-unlimited", None),
        ];
        assert!(runs_over(nodes, t("2026-11-23T12:59:59.999Z")).is_empty());
        assert_eq!(runs_over(nodes, end), ["p-a-bcdf", "p-b-x7kq"]);
        assert_eq!(
            runs_over(nodes, t("2030-01-01T00:00:00Z")),
            ["p-a-bcdf", "p-a-ghjk", "p-b-x7kq"]
        );
        assert_eq!(read_run_end(Some("2026-11-23T13:00:00Z")), Some(end));
        assert_eq!(read_run_end(Some("soon")), None);
        assert_eq!(read_run_end(None), None);
    }

    #[test]
    fn indices_are_the_lowest_free_from_the_first_host() {
        let c = cfg(Some(("198.18.0.0", 24)), Some(("fd00:18::", 64)), 20);
        let mut used = BTreeSet::new();
        assert_eq!(allocate(&c, &used, 0), Some(20));
        used.extend([20, 21, 23]);
        assert_eq!(allocate(&c, &used, 0), Some(22));
        used.insert(22);
        assert_eq!(allocate(&c, &used, 0), Some(24));
    }

    #[test]
    fn after_a_restart_indices_go_on_past_the_adopted_ones() {
        let c = cfg(Some(("198.18.0.0", 24)), None, 11);
        // Nodes 11 and 14 adopted; 12 and 13 died just before the restart.
        let used: BTreeSet<u32> = [11, 14].into();
        assert_eq!(resume_from(&used), 15);
        assert_eq!(allocate(&c, &used, resume_from(&used)), Some(15));
        assert_eq!(resume_from(&BTreeSet::new()), 0);
    }

    #[test]
    fn a_freed_index_comes_back_only_after_the_rest() {
        // A /29 holds hosts 1..=6.
        let c = cfg(Some(("198.18.0.8", 29)), None, 1);
        // 1..=4 handed out, 3 freed: the next goes on from 5.
        let used: BTreeSet<u32> = [1, 2, 4].into();
        assert_eq!(allocate(&c, &used, 5), Some(5));
        assert_eq!(allocate(&c, &[1, 2, 4, 5].into(), 6), Some(6));
        // The end of the range wraps round to the lowest free.
        assert_eq!(allocate(&c, &[1, 2, 4, 5, 6].into(), 7), Some(3));
        assert_eq!(allocate(&c, &[1, 2, 3, 4, 5, 6].into(), 4), None);
    }

    #[test]
    fn the_smallest_family_bounds_the_indices() {
        // A /29 holds hosts 1..=6.
        let c = cfg(Some(("198.18.0.8", 29)), Some(("fd00:18::", 64)), 5);
        let used: BTreeSet<u32> = [5].into();
        assert_eq!(allocate(&c, &used, 0), Some(6));
        let used: BTreeSet<u32> = [5, 6].into();
        assert_eq!(
            allocate(&c, &used, 0),
            None,
            "the broadcast address is never a node's"
        );
        // An IPv6 /126 holds 1..=3.
        let c = cfg(None, Some(("fd00:18::", 126)), 3);
        assert_eq!(allocate(&c, &[3].into(), 0), None);
        assert_eq!(host_capacity(None, c.ipv6.as_ref()), 3);
        // A short IPv6 prefix is bounded by u32 indices.
        let c = cfg(None, Some(("fd00::", 8)), 1);
        assert_eq!(host_capacity(None, c.ipv6.as_ref()), u64::from(u32::MAX));
    }

    #[test]
    fn addresses_of_both_families_share_the_index() {
        let c = cfg(Some(("198.18.0.0", 24)), Some(("fd00:18::", 64)), 20);
        let a = addresses(&c, 21);
        assert_eq!(a.cidrs(), vec!["198.18.0.21/24", "fd00:18::15/64"]);
        assert_eq!(a.ips(), vec!["198.18.0.21", "fd00:18::15"]);
        let c = cfg(Some(("198.19.1.0", 24)), None, 20);
        assert_eq!(addresses(&c, 300 - 256).cidrs(), vec!["198.19.1.44/24"]);
    }

    #[test]
    fn names_are_prefixed_and_links_fit_ifnamsiz() {
        let c = cfg(Some(("198.18.0.0", 24)), None, 20);
        let long = format!("pool-{}-a-bcdf", "x".repeat(50));
        for node in ["pool-a-a-bcdf", long.as_str()] {
            let n = names(&c, node);
            assert_eq!(n.namespace, format!("sl-lab1-{node}"));
            assert!(n.fabric_veth.len() <= 15, "{}", n.fabric_veth);
            assert_eq!(n.pod_netns_prefix, format!("sl-lab1-{node}-p"));
            assert_eq!(n.log, PathBuf::from(format!("/tmp/lab/{node}.log")));
            assert_eq!(
                n.kubeconfig,
                PathBuf::from(format!("/tmp/lab/{node}.kubeconfig"))
            );
        }
        assert_ne!(
            names(&c, "a").fabric_veth,
            names(&c, "b").fabric_veth,
            "distinct nodes, distinct links"
        );
        assert_eq!(names(&c, "a").fabric_veth, names(&c, "a").fabric_veth);
    }

    #[test]
    fn a_node_s_wire_namespaces_of_dead_agents_are_found_and_no_others() {
        let names: Vec<String> = [
            "sluice-w-pool-b-xn5s-3369-0", // recorded agent
            "sluice-w-pool-b-xn5s-12-0",   // an earlier agent, dead
            "sluice-w-pool-b-xn5s-77-1",   // another lab's, alive
            "sluice-w-pool-b-xn5s-2-12-0", // node `pool-b-xn5s-2`'s
            "sluice-w-pool-b-xn5s-x-0",    // not an agent's
            "sluice-w-pool-b-xn5s-12",     // not an agent's
            "sluice-w-pool-b-xn50-12-0",   // node `pool-b-xn50`'s
            "sluice-lbw-12-0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let alive = |pid: u32| pid == 77 || pid == 3369;
        assert_eq!(
            wire_namespaces_to_remove("pool-b-xn5s", Some(3369), &names, alive),
            vec!["sluice-w-pool-b-xn5s-3369-0", "sluice-w-pool-b-xn5s-12-0"]
        );
        // No record: only the dead agents'.
        assert_eq!(
            wire_namespaces_to_remove("pool-b-xn5s", None, &names, alive),
            vec!["sluice-w-pool-b-xn5s-12-0"]
        );
    }

    #[test]
    fn wire_namespaces_are_named_as_the_agent_names_them() {
        assert_eq!(
            wire_netns_prefix("pool-a-b-x7kq", 42),
            "sluice-w-pool-a-b-x7kq-42-"
        );
        assert_eq!(wire_netns_prefix("n1.zone", 7), "sluice-w-n1-zone-7-");
        let long = "a".repeat(60);
        assert_eq!(
            wire_netns_prefix(&long, 1),
            format!("sluice-w-{}-1-", "a".repeat(40))
        );
    }

    #[test]
    fn the_agent_gets_the_pool_zone_version_and_its_files() {
        let c = cfg(Some(("198.18.0.0", 24)), Some(("fd00:18::", 64)), 20);
        let req = CreateNode {
            pool: "pool-a".into(),
            zone: "zone-b".into(),
            name: "pool-a-b-x7kq".into(),
            version: "1.33.2".into(),
            config: NodeSpec {
                cpu_milli: 2000,
                memory_bytes: 1 << 30,
                labels: Default::default(),
                taints: Vec::new(),
                spot: false,
            },
        };
        let n = names(&c, &req.name);
        let argv = agent_argv(&c, &req, &addresses(&c, 20), &n);
        let want: Vec<String> = [
            "/opt/sluice/sluice-agent",
            "--kubeconfig",
            "/tmp/lab/pool-a-b-x7kq.kubeconfig",
            "--node-name",
            "pool-a-b-x7kq",
            "--node-ip",
            "198.18.0.20",
            "--node-ip",
            "fd00:18::14",
            "--zone",
            "zone-b",
            "--pool",
            "pool-a",
            "--node-version",
            "v1.33.2",
            "--cpu",
            "2",
            "--memory",
            "1073741824",
            "--nic",
            "nic0",
            "--pod-netns-prefix",
            "sl-lab1-pool-a-b-x7kq-p",
            "--status-file",
            "/tmp/lab/pool-a-b-x7kq.status.json",
            "--pod-log-dir",
            "/tmp/lab/pool-a-b-x7kq.pods",
            "--bpf-pin-dir",
            "/sys/fs/bpf/sluice/sl-lab1-pool-a-b-x7kq",
            "--datapath",
            "emulated",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(argv, want);

        let unversioned = CreateNode {
            version: String::new(),
            ..req
        };
        let argv = agent_argv(&c, &unversioned, &addresses(&c, 20), &n);
        assert!(!argv.iter().any(|a| a == "--node-version"), "{argv:?}");
        let mut small = unversioned.clone();
        small.config.cpu_milli = 500;
        let argv = agent_argv(&c, &small, &addresses(&c, 20), &n);
        let at = argv.iter().position(|a| a == "--cpu").expect("--cpu");
        assert_eq!(argv[at + 1], "1", "rounded up");
        assert_eq!(kubelet_version("v1.2.3").as_deref(), Some("v1.2.3"));

        // The pool's labels and taints, in the kubelet's spelling.
        let mut labelled = small;
        labelled.config.labels = [
            ("team".to_string(), "web".to_string()),
            ("tier".to_string(), String::new()),
        ]
        .into();
        labelled.config.taints = vec![
            sluice_model::node_pool::NodeTaint {
                key: "dedicated".into(),
                value: "gpu".into(),
                effect: sluice_model::node_pool::TaintEffect::NoSchedule,
            },
            sluice_model::node_pool::NodeTaint {
                key: "spot".into(),
                value: String::new(),
                effect: sluice_model::node_pool::TaintEffect::PreferNoSchedule,
            },
        ];
        let argv = agent_argv(&c, &labelled, &addresses(&c, 20), &n);
        let after = |flag: &str| {
            let at = argv.iter().position(|a| a == flag).expect(flag);
            argv[at + 1].clone()
        };
        assert_eq!(after("--node-labels"), "team=web,tier=");
        assert_eq!(
            after("--register-with-taints"),
            "dedicated=gpu:NoSchedule,spot:PreferNoSchedule"
        );
    }
}
