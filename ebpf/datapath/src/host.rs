//! Host-only helpers (feature `host`): byte-buffer packets with software
//! checksum helpers, in-memory maps, the service table builder (with
//! Maglev), clocks, and the software finishing of offloaded frames
//! ([`offload`]: what the emulated engine does before the program sees a
//! checksum-partial or GSO frame).

mod clock;
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
