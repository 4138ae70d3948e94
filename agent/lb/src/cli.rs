//! `sluice-lb`'s flags. Each also reads a `SLUICE_LB_*` environment
//! variable, so a unit file needs no wrapper.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgGroup, Parser, ValueEnum};

use crate::metrics::DEFAULT_METRICS_ADDRESS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// The packet program as a TC classifier on the interface (eBPF).
    Kernel,
    /// The same program in user space, on the interface's frames.
    Emulated,
    /// The kernel engine if its program loads and attaches here, else the
    /// emulated one (as the agent's `--datapath auto`).
    Auto,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "sluice-lb",
    version,
    about = "Sluice's L4 passthrough load balancer: Maglev over healthy nodes, L2 delivery"
)]
#[command(group = ArgGroup::new("source").required(true).multiple(false))]
pub struct Args {
    /// The one interface frames for the VIPs arrive on and leave by, on the
    /// nodes' segment.
    #[arg(long, env = "SLUICE_LB_INTERFACE")]
    pub interface: String,

    /// Configuration from the API server this kubeconfig names (the
    /// `system:sluice:load-balancer` identity): L4LoadBalancers,
    /// HealthChecks, NetworkEndpointGroups and InstanceGroups. Or `--config`.
    #[arg(long, env = "SLUICE_LB_KUBECONFIG", group = "source")]
    pub kubeconfig: Option<PathBuf>,

    /// Configuration from a YAML file (Services, frontends, health checks,
    /// backends), read once at start. Or `--kubeconfig`.
    #[arg(long, env = "SLUICE_LB_CONFIG", group = "source")]
    pub config: Option<PathBuf>,

    /// The packet path's engine.
    #[arg(long, env = "SLUICE_LB_ENGINE", value_enum, default_value_t = EngineKind::Kernel)]
    pub engine: EngineKind,

    /// The eBPF object to load (kernel engine only; default: the engine's
    /// own choice).
    #[arg(long, env = "SLUICE_LB_BPF_OBJECT")]
    pub bpf_object: Option<PathBuf>,

    /// Where `/metrics` listens.
    #[arg(long, env = "SLUICE_LB_METRICS_BIND_ADDRESS", default_value = DEFAULT_METRICS_ADDRESS)]
    pub metrics_bind_address: SocketAddr,
}

/// Flags that parse but do not go together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CliError {
    #[error("--bpf-object is for --engine kernel, not {0}")]
    ObjectWithoutKernel(&'static str),
    #[error("--interface must not be empty")]
    NoInterface,
    #[error("--interface {0:?}: an interface name has at most 15 bytes and no '/', ' ' or ':'")]
    BadInterface(String),
}

impl Args {
    /// Checks what clap cannot.
    pub fn check(&self) -> Result<(), CliError> {
        if self.interface.is_empty() {
            return Err(CliError::NoInterface);
        }
        if self.interface.len() > 15
            || self
                .interface
                .chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(CliError::BadInterface(self.interface.clone()));
        }
        if self.bpf_object.is_some() && self.engine == EngineKind::Emulated {
            return Err(CliError::ObjectWithoutKernel("emulated"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        let mut all = vec!["sluice-lb"];
        all.extend_from_slice(args);
        Args::try_parse_from(all).map_err(|e| e.to_string())
    }

    #[test]
    fn exactly_one_source_is_required() {
        let e = parse(&["--interface", "lb0"]).expect_err("no source");
        assert!(e.contains("--kubeconfig") || e.contains("--config"), "{e}");
        let e = parse(&["--interface", "lb0", "--config", "a", "--kubeconfig", "b"])
            .expect_err("two sources");
        assert!(e.contains("cannot be used with"), "{e}");
        let a = parse(&["--interface", "lb0", "--config", "lb.yaml"]).expect("ok");
        assert_eq!(a.engine, EngineKind::Kernel);
        assert_eq!(
            a.metrics_bind_address,
            DEFAULT_METRICS_ADDRESS.parse().expect("default")
        );
        assert_eq!(a.check(), Ok(()));
    }

    #[test]
    fn bad_flags_are_named() {
        let e = parse(&["--interface", "lb0", "--config", "f", "--engine", "xdp"])
            .expect_err("no such engine");
        assert!(e.contains("--engine"), "{e}");
        let e = parse(&[
            "--interface",
            "lb0",
            "--config",
            "f",
            "--metrics-bind-address",
            "10260",
        ])
        .expect_err("a port alone is no address");
        assert!(e.contains("--metrics-bind-address"), "{e}");
        let a = parse(&[
            "--interface",
            "lb0",
            "--config",
            "f",
            "--engine",
            "emulated",
            "--bpf-object",
            "lb.o",
        ])
        .expect("parses");
        assert_eq!(a.check(), Err(CliError::ObjectWithoutKernel("emulated")));
        let a = parse(&["--interface", "a-name-far-too-long", "--config", "f"]).expect("parses");
        assert!(matches!(a.check(), Err(CliError::BadInterface(_))));
    }
}
