//! Network-namespace test bed.
