//! The Sluice node agent.

pub mod backoff;
pub mod cli;
pub mod control;
pub mod engine;
pub mod health;
pub mod mem;
pub mod metrics;
pub mod metrics_server;
pub mod netlink;
pub mod pods;
pub mod register;
pub mod runner;
pub mod state;
pub mod status;
