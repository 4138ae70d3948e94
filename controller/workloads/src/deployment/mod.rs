//! Deployment decisions (in progress).
