//! The status file: how tests, the lab and operators see what the agent has
//! applied without scraping logs.

use std::fs;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// Incremented on every successful apply.
    pub generation: u64,
    /// The last attempt applied cleanly.
    pub synced: bool,
    pub datapath: String,
    /// Why the last attempt was rejected or failed; the previous state runs.
    pub error: Option<String>,
    pub services: usize,
    pub endpoints: usize,
    pub pods: usize,
    pub counters: Vec<(String, u64)>,
    /// The drain the Node asked for, if any.
    pub drain: Option<DrainStatus>,
    /// `namespace/name:port` of `Local` Services whose health-check port is
    /// taken (by another Service or the node server): their check is not
    /// served until the conflict goes.
    pub health_port_conflicts: Vec<String>,
}

/// Where a drain stands, for the controller or an operator to decide on the
/// pods it leaves alone (E2–E5).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DrainStatus {
    pub reason: String,
    pub finished: bool,
    pub pending: Vec<String>,
    /// Refused by a PodDisruptionBudget; retried.
    pub blocked: Vec<String>,
    pub terminating: Vec<String>,
    /// `namespace/name` → `Graceful`, `Killed` or `Refused`.
    pub done: Vec<(String, String)>,
    /// `safe-to-evict: "false"` pods this drain does not evict (now).
    pub protected: Vec<String>,
}

/// Write via a temporary file and rename, so a reader never sees half a file.
pub fn write_status(path: &Path, status: &Status) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let body = serde_json::to_vec_pretty(status).map_err(std::io::Error::other)?;
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}
