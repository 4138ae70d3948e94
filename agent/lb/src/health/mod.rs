//! Health checking of the backends, GCE's way (spec H4, H5): the checks
//! steer new connections only; established flows stay where the flow table
//! put them.
//!
//! - `machine.rs`: one backend's verdict from consecutive results against
//!   the thresholds (pure).
//! - `board.rs`: every (Service, node)'s machine and the shared, phased
//!   probes with their timeouts, on a clock passed in (pure).
//! - `probe.rs`: the HTTP/1.1 GET itself (tokio).

pub mod board;
pub mod machine;
pub mod probe;

pub use board::{Board, Change, ProbeKey, ProbeStart};
pub use machine::{Machine, Thresholds, Transition};
pub use probe::{probe, Outcome};
