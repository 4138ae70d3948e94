//! A node's agent process, started by this controller or adopted from a
//! previous one, and the record (`<stateDir>/<node>.json`) that lets a
//! controller restarted after a crash adopt it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// What a restarted controller needs to list a node it did not make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeRecord {
    pub pool: String,
    pub zone: String,
    pub version: String,
    /// RFC 3339.
    pub created_at: String,
    /// Its host index (its addresses).
    pub index: u32,
    /// Its agent's process id.
    pub pid: u32,
    /// RFC 3339: when its run ends and the provider removes it (GKE's
    /// `maxRunDuration` from `createdAt`), kept here so that a restarted
    /// controller still ends it then. Absent: it runs until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ends_at: Option<String>,
}

impl NodeRecord {
    pub fn read(path: &Path) -> Result<NodeRecord, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string(self).map_err(|e| e.to_string())?;
        let tmp = path.with_extension("json-tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

/// A node's agent.
#[derive(Debug)]
pub enum Agent {
    /// Started by this process: waited for, so its exit is seen exactly.
    Child(Child),
    /// Started by a previous controller: known by its pid and the
    /// namespace it runs in (a reused pid runs elsewhere).
    Adopted { pid: u32, namespace: String },
}

impl Agent {
    pub fn id(&self) -> u32 {
        match self {
            Agent::Child(c) => c.id(),
            Agent::Adopted { pid, .. } => *pid,
        }
    }

    /// Why it is no longer running, if it is not.
    pub fn exited(&mut self) -> Option<String> {
        match self {
            Agent::Child(c) => match c.try_wait() {
                Ok(Some(s)) => Some(format!("its agent exited ({s})")),
                Ok(None) => None,
                Err(e) => Some(format!("its agent cannot be waited for: {e}")),
            },
            Agent::Adopted { pid, namespace } => (!runs_in(*pid, namespace))
                .then(|| "its agent (adopted after a controller restart) is gone".to_string()),
        }
    }

    /// SIGTERM, up to `grace` for it to exit, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) {
        match self {
            Agent::Child(c) => super::system::stop(c, grace),
            Agent::Adopted { pid, namespace } => {
                if !runs_in(*pid, namespace) {
                    return;
                }
                let Ok(raw) = i32::try_from(*pid) else {
                    return;
                };
                let _ = kill(Pid::from_raw(raw), Signal::SIGTERM);
                let deadline = Instant::now() + grace;
                while Instant::now() < deadline {
                    if !runs_in(*pid, namespace) {
                        return;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                if runs_in(*pid, namespace) {
                    let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
                }
            }
        }
    }
}

/// Process `pid` is alive (not a zombie) in network namespace `ns`.
pub fn runs_in(pid: u32, ns: &str) -> bool {
    let proc_ns = Path::new("/proc").join(pid.to_string()).join("ns/net");
    let named = Path::new("/run/netns").join(ns);
    let same = match (std::fs::metadata(&proc_ns), std::fs::metadata(&named)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    // A zombie keeps its /proc entry but has exited.
    same && super::system::process_alive(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_unknown_keys() {
        let dir = std::env::temp_dir().join(format!("sluice-noderec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let r = NodeRecord {
            pool: "p".into(),
            zone: "zone-a".into(),
            version: "1.33.2".into(),
            created_at: "2026-11-23T12:00:00Z".into(),
            index: 21,
            pid: 4242,
            run_ends_at: None,
        };
        let path = dir.join("n.json");
        r.write(&path).expect("write");
        assert_eq!(NodeRecord::read(&path), Ok(r.clone()));
        // spec: A5 — the end of a node's run survives a restart; a record
        // written before the field existed still reads.
        let limited = NodeRecord {
            run_ends_at: Some("2026-11-23T13:00:00Z".into()),
            ..r.clone()
        };
        limited.write(&path).expect("write");
        assert_eq!(NodeRecord::read(&path), Ok(limited));
        std::fs::write(
            &path,
            r#"{"pool":"p","zone":"zone-a","version":"1.33.2","createdAt":"2026-11-23T12:00:00Z","index":21,"pid":4242}"#,
        )
        .expect("write");
        assert_eq!(NodeRecord::read(&path), Ok(r));
        std::fs::write(&path, r#"{"pool":"p","colour":1}"#).expect("write");
        assert!(NodeRecord::read(&path).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_process_runs_in_its_namespace_only() {
        // This process is in no named namespace called so.
        assert!(!runs_in(std::process::id(), "sluice-no-such-namespace"));
        assert!(!runs_in(u32::MAX, "sluice-no-such-namespace"));
    }
}
