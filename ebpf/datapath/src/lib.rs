//! The Sluice packet program.
//!
//! One source, two engines: compiled for `bpfel-unknown-none` and wrapped by
//! thin aya-ebpf entry points (`ebpf/programs`), or compiled for the host and
//! driven by the agent's user-space engine. Everything here is generic over
//! the small traits in [`env`], never allocates, never panics and only loops
//! with constant bounds, so the verifier and the host see the same logic.
#![cfg_attr(not(feature = "std"), no_std)]

pub mod env;
pub mod maps;

#[cfg(feature = "host")]
pub mod host;
