//! Command-line flags. Every flag also reads from a `SLUICE_*` environment
//! variable so a unit file can configure the agent without a wrapper.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

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
pub struct Args {
    /// This node's name, as in the state's Node objects and `spec.nodeName`.
    #[arg(long, env = "SLUICE_NODE_NAME")]
    pub node_name: String,

    /// Desired state: a YAML file of Kubernetes manifests (Node, Pod,
    /// Service, EndpointSlice), re-read when it changes.
    #[arg(long, env = "SLUICE_STATE")]
    pub state: PathBuf,

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
