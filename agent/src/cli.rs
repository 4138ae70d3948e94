//! Command-line flags. Every flag also reads from a `SLUICE_*` environment
//! variable so a unit file can configure the agent without a wrapper, and
//! from the YAML file `--config` names.
//!
//! Precedence, highest first: the command line, the environment, the config
//! file, the defaults. The file's keys are the flags' names without the
//! dashes, kebab-case (`node-name`) or camelCase (`nodeName`); an unknown key
//! is an error naming it, so a typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgGroup, CommandFactory, Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatapathMode {
    /// The packet program as eBPF in the kernel (TC hooks).
    Kernel,
    /// The packet program in user space (AF_PACKET + TAP).
    Emulated,
    /// Kernel where it loads, emulated otherwise.
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Parser)]
#[command(name = "sluice-agent", version, about = "Sluice node agent")]
// Exactly one source of desired state.
#[command(group = ArgGroup::new("source").required(true).multiple(false))]
pub struct Args {
    /// A YAML file of settings (keys: the flags' names, kebab-case or
    /// camelCase). Flags and `SLUICE_*` variables win over it.
    #[arg(long, env = "SLUICE_CONFIG")]
    pub config: Option<PathBuf>,

    /// This node's name, as in the state's Node objects and `spec.nodeName`
    /// (default: the host name, lowercased, as the kubelet's).
    #[arg(long, env = "SLUICE_NODE_NAME", default_value_t = default_node_name())]
    pub node_name: String,

    /// Desired state: a YAML file of Kubernetes manifests (Node, Pod,
    /// Service, EndpointSlice), re-read when it changes. Or `--kubeconfig`.
    #[arg(long, env = "SLUICE_STATE", group = "source")]
    pub state: Option<PathBuf>,

    /// Desired state from the API server this kubeconfig names (its node
    /// identity, `system:node:<name>`): the agent watches Nodes, Services,
    /// EndpointSlices, its Pods and PodDisruptionBudgets, registers its
    /// Node and renews its Lease. Or `--state`.
    #[arg(long, env = "SLUICE_KUBECONFIG", group = "source")]
    pub kubeconfig: Option<PathBuf>,

    /// With `--kubeconfig`: the Node's InternalIP addresses (one per family;
    /// repeat or comma-separate for dual-stack). Default: the global
    /// addresses of `--nic`.
    #[arg(long, env = "SLUICE_NODE_IP", value_delimiter = ',')]
    pub node_ip: Vec<IpAddr>,

    /// With `--kubeconfig`: the Node's `cpu` capacity in whole CPUs
    /// (default: the CPUs this process may run on).
    #[arg(long, env = "SLUICE_CPU", value_parser = clap::value_parser!(u32).range(1..))]
    pub cpu: Option<u32>,

    /// With `--kubeconfig`: the Node's `memory` capacity, a quantity of
    /// bytes such as `8Gi` (default: the machine's). Nodes that share a
    /// host (the lab's namespaces) take their pool's.
    #[arg(long, env = "SLUICE_MEMORY", value_parser = crate::register::flags::memory)]
    pub memory: Option<u64>,

    /// With `--kubeconfig`: labels put on the Node, comma-separated
    /// `key=value` (the kubelet's `--node-labels`). Set at each
    /// registration, under the agent's own hostname, zone and pool labels.
    #[arg(long, env = "SLUICE_NODE_LABELS", value_delimiter = ',',
          value_parser = crate::register::flags::label)]
    pub node_labels: Vec<(String, String)>,

    /// With `--kubeconfig`: taints the Node is created with,
    /// comma-separated `key=value:Effect` or `key:Effect` (the kubelet's
    /// `--register-with-taints`). Only when the agent creates the Node.
    #[arg(long, env = "SLUICE_REGISTER_WITH_TAINTS", value_delimiter = ',',
          value_parser = crate::register::flags::taint)]
    pub register_with_taints: Vec<k8s_openapi::api::core::v1::Taint>,

    /// With `--kubeconfig`: the Node's `pods` capacity (the kubelet's
    /// `--max-pods`).
    #[arg(long, env = "SLUICE_MAX_PODS", default_value_t = 110,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_pods: u32,

    /// With `--kubeconfig`: the Node's `topology.kubernetes.io/zone` label.
    #[arg(long, env = "SLUICE_ZONE")]
    pub zone: Option<String>,

    /// With `--kubeconfig`: the Node's `cloud.google.com/gke-nodepool` label.
    #[arg(long, env = "SLUICE_POOL")]
    pub pool: Option<String>,

    /// With `--kubeconfig`: the Node's `status.nodeInfo.kubeletVersion` and
    /// `kubeProxyVersion` (default: the agent's version, `v0.1.0`).
    #[arg(long, env = "SLUICE_NODE_VERSION")]
    pub node_version: Option<String>,

    /// With `--kubeconfig`: the Lease's `leaseDurationSeconds` (the
    /// kubelet's `nodeLeaseDurationSeconds`); it is renewed every quarter
    /// of it, as the kubelet does. The controller's
    /// `--node-monitor-grace-period` must be longer than the renewal.
    #[arg(long, env = "SLUICE_NODE_LEASE_DURATION_SECONDS", default_value_t = 40,
          value_parser = clap::value_parser!(u32).range(4..=3600))]
    pub node_lease_duration_seconds: u32,

    /// The node's uplink, where load-balanced traffic arrives.
    #[arg(long, env = "SLUICE_NIC", default_value = "nic0")]
    pub nic: String,

    #[arg(long, env = "SLUICE_DATAPATH", value_enum, default_value = "auto")]
    pub datapath: DatapathMode,

    /// The BPF object the kernel engine loads. Default: `sluice.bpf.o` next
    /// to the agent's executable, else
    /// `<exe dir>/../bpf/bpfel-unknown-none/release/sluice` (what `cargo
    /// xtask build-ebpf --release` writes, seen from `target/<profile>`).
    #[arg(long, env = "SLUICE_BPF_OBJECT")]
    pub bpf_object: Option<PathBuf>,

    /// Where the kernel engine pins its maps and links on bpffs (default
    /// `/sys/fs/bpf/sluice/<node name>`). A restarted agent with the same
    /// directory adopts them: established connections survive.
    #[arg(long, env = "SLUICE_BPF_PIN_DIR")]
    pub bpf_pin_dir: Option<PathBuf>,

    /// Kernel engine: keys of the services map (`SLUICE_SERVICES`), one per
    /// Service port and VIP plus one per VIP. A preallocated hash map,
    /// about 120 bytes of kernel memory a key (65 536: 7.5 MiB).
    #[arg(long, env = "SLUICE_BPF_SERVICE_ENTRIES",
          default_value_t = sluice_datapath::maps::SERVICES_MAX_ENTRIES,
          value_parser = clap::value_parser!(u32).range(2..=4_194_304))]
    pub bpf_service_entries: u32,

    /// Kernel engine: endpoint slots (`SLUICE_ENDPOINTS`, 24 bytes each;
    /// 524 288: 12 MiB). Each Service port's slots take a power-of-two
    /// block (10 endpoints: 16 slots).
    #[arg(long, env = "SLUICE_BPF_ENDPOINT_ENTRIES",
          default_value_t = sluice_datapath::maps::ENDPOINTS_MAX_ENTRIES,
          value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub bpf_endpoint_entries: u32,

    /// Kernel engine: Maglev entries (`SLUICE_MAGLEV`, 4 bytes each;
    /// 16 777 216: 64 MiB), rounded up to a multiple of 256. Each Service
    /// port with ready endpoints takes a power-of-two block of at least 256
    /// (its table: the smallest listed prime ≥ 100 × ready endpoints, 251
    /// for 1 or 2, 1021 for 10).
    #[arg(long, env = "SLUICE_BPF_MAGLEV_ENTRIES",
          default_value_t = sluice_datapath::maps::MAGLEV_MAX_ENTRIES,
          value_parser = clap::value_parser!(u32).range(256..=268_435_456))]
    pub bpf_maglev_entries: u32,

    /// Source ports for `Cluster` flows' SNAT, FIRST-LAST. Keep it clear of
    /// the node's ephemeral range (`net.ipv4.ip_local_port_range`,
    /// 32768-60999 by default): the agent warns when they overlap. A port
    /// serves one flow per endpoint at a time and is handed on when the
    /// flow ends, as soon as the endpoint's TIME_WAIT takes the new SYN.
    #[arg(long, env = "SLUICE_SNAT_PORT_RANGE", default_value = "61000-65535")]
    pub snat_port_range: crate::control::SnatPorts,

    /// Written after every sync attempt (JSON: generation, synced, error).
    #[arg(long, env = "SLUICE_STATUS_FILE")]
    pub status_file: Option<PathBuf>,

    /// How often the state source is polled, in milliseconds.
    #[arg(long, env = "SLUICE_POLL_MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub poll_ms: u64,

    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Where `/healthz` and `/livez` are served (kube-proxy's 10256).
    #[arg(
        long,
        env = "SLUICE_HEALTHZ_BIND_ADDRESS",
        default_value = "[::]:10256"
    )]
    pub healthz_bind_address: SocketAddr,

    /// Where `/metrics` is served (kube-proxy's 10249).
    #[arg(
        long,
        env = "SLUICE_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:10249"
    )]
    pub metrics_bind_address: SocketAddr,

    /// The sync period, in seconds: the datapath counts as unhealthy when an
    /// update has waited longer than twice this (kube-proxy's default: 30).
    #[arg(long, env = "SLUICE_SYNC_PERIOD_S", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sync_period_s: u64,

    /// Where the output of the pods the agent runs is written.
    #[arg(
        long,
        env = "SLUICE_POD_LOG_DIR",
        default_value = "/var/log/sluice/pods"
    )]
    pub pod_log_dir: PathBuf,

    /// Names of the network namespaces the agent makes for its pods start
    /// with this; agents sharing one host need distinct prefixes.
    #[arg(long, env = "SLUICE_POD_NETNS_PREFIX", default_value = "sl-pod")]
    pub pod_netns_prefix: String,

    /// On the agent's own shutdown (SIGTERM), its pods get SIGTERM and, if
    /// still running after min(terminationGracePeriodSeconds, this many
    /// seconds), SIGKILL.
    #[arg(long, env = "SLUICE_SHUTDOWN_GRACE_S", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace: u64,
}

/// Why the agent's settings could not be read.
#[derive(Debug)]
pub enum CliError {
    /// Flags or environment (including `--help` and `--version`).
    Clap(clap::Error),
    /// The config file: missing, not YAML, an unknown key, a bad value.
    Config(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Clap(e) => write!(f, "{e}"),
            CliError::Config(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for CliError {}

impl Args {
    /// The process's settings: flags, environment, `--config` file.
    pub fn load() -> Result<Args, CliError> {
        Self::load_from(std::env::args_os())
    }

    /// As [`Args::load`], from `argv` (the program name first).
    pub fn load_from<I, T>(argv: I) -> Result<Args, CliError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
        // Nothing required yet: only `--config` and where each value came
        // from matter here. Any error is reported by the real parse.
        let Ok(seen) = loose_command(true).try_get_matches_from(&argv) else {
            return Args::try_parse_from(argv).map_err(CliError::Clap);
        };
        let Some(path) = seen.get_one::<PathBuf>("config").cloned() else {
            return Args::try_parse_from(argv).map_err(CliError::Clap);
        };
        let settings = read_config(&path)?;

        let program = argv
            .first()
            .cloned()
            .unwrap_or_else(|| "sluice-agent".into());
        let mut from_file: Vec<OsString> = vec![program.clone()];
        for (id, (long, value)) in &settings {
            let given = matches!(
                seen.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            if !given {
                from_file.push(format!("--{long}={value}").into());
            }
        }
        // The file's values on their own first, so a bad one is reported as
        // the file's, not as a flag the user never typed.
        loose_command(false)
            .try_get_matches_from(&from_file)
            .map_err(|e| {
                CliError::Config(format!(
                    "config file {}: {}",
                    path.display(),
                    clap_message(&e)
                ))
            })?;
        from_file.extend(argv.into_iter().skip(1));
        Args::try_parse_from(from_file).map_err(CliError::Clap)
    }
}

/// The host name as the kubelet takes it for the node's name: this UTS
/// namespace's, lowercased. Empty when it cannot be read; the agent then
/// asks for `--node-name`.
fn default_node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .unwrap_or_default()
}

/// clap's message without its usage footer.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    first.trim_start_matches("error: ").to_string()
}

/// `Args`' command with nothing required; `env: false` also ignores the
/// environment (to check the file's values alone).
fn loose_command(env: bool) -> clap::Command {
    let mut cmd = Args::command();
    let ids: Vec<clap::Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
    // The source group too: `--state` may come from the file.
    cmd = cmd.mut_group("source", |g| g.required(false));
    for id in ids {
        cmd = cmd.mut_arg(id, |a| {
            let a = a.required(false);
            if env {
                a
            } else {
                a.env(None)
            }
        });
    }
    cmd
}

/// `nodeName` → `node-name`; kebab-case passes unchanged.
fn kebab(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The file's settings: arg id → (flag name, value).
fn read_config(path: &Path) -> Result<BTreeMap<String, (String, String)>, CliError> {
    let fail = |m: String| CliError::Config(format!("config file {}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| fail(format!("not valid YAML: {e}")))?;
    let map = match doc {
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => return Err(fail("must be a map of settings (key: value)".into())),
    };
    let cmd = Args::command();
    let known: BTreeMap<String, String> = cmd
        .get_arguments()
        .filter_map(|a| Some((a.get_long()?.to_string(), a.get_id().to_string())))
        .filter(|(long, _)| long != "config" && long != "help" && long != "version")
        .collect();
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let key = k
            .as_str()
            .ok_or_else(|| fail("keys must be strings".into()))?
            .to_string();
        let long = kebab(&key);
        let Some(id) = known.get(&long) else {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            return Err(fail(format!(
                "unknown key {key:?} (known: {})",
                names.join(", ")
            )));
        };
        let value = match v {
            serde_yaml::Value::String(s) => s,
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::Bool(b) => b.to_string(),
            _ => return Err(fail(format!("{key}: must be a single value"))),
        };
        if out.insert(id.clone(), (long.clone(), value)).is_some() {
            return Err(fail(format!("{long} is set twice")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config file removed when the guard goes, also on a failed assert.
    struct TempConfig(PathBuf);

    impl TempConfig {
        fn new(name: &str, body: &str) -> Self {
            let p =
                std::env::temp_dir().join(format!("sluice-cli-{}-{name}.yaml", std::process::id()));
            std::fs::write(&p, body).expect("write temp config");
            TempConfig(p)
        }
        fn arg(&self) -> String {
            format!("--config={}", self.0.display())
        }
    }

    impl Drop for TempConfig {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn config_err(r: Result<Args, CliError>) -> String {
        match r {
            Err(CliError::Config(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn file_supplies_settings_and_flags_win() {
        let f = TempConfig::new(
            "precedence",
            "nodeName: node-a\nstate: /etc/sluice/state.yaml\npoll-ms: 500\ndatapath: emulated\n",
        );
        let a = Args::load_from(["sluice-agent", &f.arg()]).expect("file alone");
        assert_eq!(a.node_name, "node-a");
        assert_eq!(a.state, Some(PathBuf::from("/etc/sluice/state.yaml")));
        assert_eq!(a.poll_ms, 500);
        assert_eq!(a.datapath, DatapathMode::Emulated);
        assert_eq!(a.nic, "nic0", "defaults fill the rest");
        assert_eq!(a.bpf_maglev_entries, 16_777_216);
        assert_eq!(a.bpf_endpoint_entries, 524_288);
        assert_eq!(a.bpf_service_entries, 65_536);

        let a = Args::load_from([
            "sluice-agent",
            &f.arg(),
            "--poll-ms",
            "50",
            "--node-name=node-b",
        ])
        .expect("flags too");
        assert_eq!(a.poll_ms, 50);
        assert_eq!(a.node_name, "node-b");
        let a = Args::load_from([
            "sluice-agent",
            &f.arg(),
            "--bpf-maglev-entries=33554432",
            "--bpf-endpoint-entries",
            "1048576",
        ])
        .expect("map sizes");
        assert_eq!(a.bpf_maglev_entries, 33_554_432);
        assert_eq!(a.bpf_endpoint_entries, 1_048_576);
        assert!(
            Args::load_from(["sluice-agent", &f.arg(), "--bpf-maglev-entries=100"]).is_err(),
            "below one Maglev element"
        );
        assert_eq!(a.state, Some(PathBuf::from("/etc/sluice/state.yaml")));
    }

    #[test]
    fn config_errors_name_the_file_and_key() {
        let f = TempConfig::new("unknown", "nodeName: a\nstate: /s\npollMillis: 5\n");
        let m = config_err(Args::load_from(["sluice-agent", &f.arg()]));
        assert!(m.contains("unknown key \"pollMillis\""), "{m}");
        assert!(m.contains(&f.0.display().to_string()), "{m}");

        let f = TempConfig::new("range", "nodeName: a\nstate: /s\npollMs: 5\n");
        let m = config_err(Args::load_from(["sluice-agent", &f.arg()]));
        assert!(m.contains("poll-ms") && m.contains('5'), "{m}");
        // A flag overriding the bad value makes the file's value moot.
        assert!(Args::load_from(["sluice-agent", &f.arg(), "--poll-ms=100"]).is_ok());

        let f = TempConfig::new("yaml", "nodeName: [a\n");
        assert!(config_err(Args::load_from(["sluice-agent", &f.arg()])).contains("not valid YAML"));

        let f = TempConfig::new("list", "nic: [a, b]\n");
        assert!(config_err(Args::load_from(["sluice-agent", &f.arg()])).contains("nic"));

        let f = TempConfig::new("twice", "nodeName: a\nnode-name: b\n");
        assert!(config_err(Args::load_from(["sluice-agent", &f.arg()])).contains("twice"));

        let missing = std::env::temp_dir().join("sluice-cli-does-not-exist.yaml");
        let m = config_err(Args::load_from([
            "sluice-agent".to_string(),
            format!("--config={}", missing.display()),
        ]));
        assert!(m.contains("cannot read"), "{m}");
    }

    #[test]
    fn without_a_file_flags_alone_decide() {
        let a =
            Args::load_from(["sluice-agent", "--node-name", "n", "--state", "/s"]).expect("flags");
        assert!(a.config.is_none());
        assert!(matches!(
            Args::load_from(["sluice-agent", "--node-name", "n"]),
            Err(CliError::Clap(_))
        ));
    }

    fn clap_err(r: Result<Args, CliError>) -> String {
        match r {
            Err(CliError::Clap(e)) => e.to_string(),
            other => panic!("expected a flag error, got {other:?}"),
        }
    }

    #[test]
    fn exactly_one_source_state_file_or_kubeconfig() {
        let a = Args::load_from(["sluice-agent", "--node-name=n", "--kubeconfig=/k"])
            .expect("kubeconfig alone");
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(a.state, None);
        assert_eq!(a.max_pods, 110);
        assert!(a.node_ip.is_empty() && a.cpu.is_none() && a.zone.is_none());

        let m = clap_err(Args::load_from([
            "sluice-agent",
            "--node-name=n",
            "--kubeconfig=/k",
            "--state=/s",
        ]));
        assert!(m.contains("--kubeconfig") && m.contains("--state"), "{m}");
        assert!(m.contains("cannot be used with"), "{m}");

        let m = clap_err(Args::load_from(["sluice-agent", "--node-name=n"]));
        assert!(m.contains("--state") && m.contains("--kubeconfig"), "{m}");

        // From the file as from the flags.
        let f = TempConfig::new("kubeconfig", "kubeconfig: /k\nstate: /s\n");
        let m = config_err(Args::load_from(["sluice-agent", &f.arg()]));
        assert!(m.contains("cannot be used with"), "{m}");
        let f = TempConfig::new(
            "kubeconfig-only",
            "kubeconfig: /k\nnodeIp: 198.18.0.11,fd00:18::11\n",
        );
        let a = Args::load_from(["sluice-agent", &f.arg()]).expect("file");
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(a.node_ip.len(), 2);
    }

    #[test]
    fn the_node_name_defaults_to_the_host_name() {
        let a = Args::load_from(["sluice-agent", "--state=/s"]).expect("no --node-name");
        assert_eq!(a.node_name, default_node_name());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
        assert_eq!(a.node_name, host.trim().to_lowercase());
        assert!(!a.node_name.is_empty());
    }
}
