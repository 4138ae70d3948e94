//! Sluice's L4 passthrough load balancer (issue 11): a one-armed,
//! Katran-shaped load balancer in front of the nodes. It spreads VIP traffic
//! over the healthy backends of each LoadBalancer Service with Maglev on the
//! 5-tuple, keeps a flow table so an established connection stays on its
//! node, and delivers frames at L2 with the destination IP unchanged, so the
//! node's packet program sees the VIP and replies go straight to the client.
//!
//! - [`desired`]: what the engines carry out (frontends, backends, health).
//! - [`engine`]: the packet path, as a TC program (kernel) or in user space
//!   (emulated), both running `sluice_datapath::lb`.
//!
//! The control side, GKE's internal passthrough Network Load Balancer's
//! behaviour:
//!
//! - [`config`]: what to serve, from the API's `sluice.dev/v1` objects or a
//!   file, as one pure [`config::LbConfig`].
//! - [`health`]: GCE-style health checks (thresholds, timeouts, shared and
//!   phased probes) and the HTTP probe.
//! - [`neighbours`]: backends' MACs from the namespace's neighbour table.
//! - [`ids`]: stable backend ids.
//! - [`build`]: configuration + verdicts + MACs + ids → [`desired::LbDesired`].
//! - [`metrics`]: the `/metrics` endpoint.
//! - [`cli`], [`run`]: the flags and the process's loop.

pub mod build;
pub mod cli;
pub mod config;
pub mod control;
pub mod desired;
pub mod draining;
pub mod engine;
pub mod health;
pub mod ids;
pub mod metrics;
pub mod neighbours;
pub mod run;
