//! Host-only helpers: in-memory maps, a Vec-backed packet, the Maglev builder.
