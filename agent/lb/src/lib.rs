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

pub mod desired;
pub mod engine;
