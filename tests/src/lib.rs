//! Network-namespace test bed for Sluice.
//!
//! - [`netns`]: namespace guards and helpers (addresses, routes, sysctls,
//!   bridges, veths with offloads off, running code inside a namespace);
//! - [`whoami`]: the server pods run and bounded TCP/UDP clients;
//! - [`frames`]: raw Ethernet frames (an `AF_PACKET` socket, header
//!   builders, a generator of hostile frames);
//! - [`traffic`]: a client looping over a VIP on its own thread, counting;
//! - [`cluster`]: a client, a bridge and N nodes running `sluice-agent`, with
//!   pods, Services and EndpointSlices generated as Kubernetes manifests.
//!
//! Everything lives in namespaces named `sl-<tag>-<pid>-<n>` and goes away
//! when its guard drops, also when a test fails.

pub mod cluster;
pub mod frames;
pub mod http_probe;
pub mod kube_cluster;
pub mod limits;
pub mod netns;
pub mod scratch;
pub mod traffic;
pub mod upgrade_scene;
pub mod whoami;

pub use cluster::{
    agent_bin, controller_bin, node_name, sluice_cli_bin, whoami_bin, AgentStatus, Cluster,
    ClusterSpec, EndpointSpec, Engine, Family, Policy, Proto, ServiceSpec,
};
pub use http_probe::{http_get, HttpAnswer};
pub use limits::raise_nofile_limit;
pub use netns::{exec, in_ns, syn_retransmits, tcp_ext_counter, Netns, Offloads};
pub use scratch::ScratchDir;
pub use traffic::Traffic;
pub use whoami::{tcp_request, udp_request, Reply, TcpConn, TcpOutcome, UdpOutcome, WhoAmI};
