//! Host-only helpers (feature `host`): byte-buffer packets with software
//! checksum helpers, in-memory maps, the service table builder (with
//! Maglev), clocks, how the emulated engine's relay takes offloaded frames
//! ([`offload`]: checksum-partial and GSO frames kept whole or finished in
//! software) and its receive coalescing ([`gro`]).

mod clock;
pub mod gro;
mod lru;
mod maglev;
mod maps;
pub mod offload;
mod packet;
mod tables;

pub use clock::{SystemClock, TestClock};
pub use lru::LruMap;
pub use maglev::{build_maglev, maglev_table_size, MAGLEV_PRIMES};
pub use maps::{HostMaps, DEFAULT_AFFINITY_CAPACITY, DEFAULT_CT_CAPACITY};
pub use packet::{FramePacket, VecPacket};
pub use tables::{ServiceSpec, ServiceTables};
