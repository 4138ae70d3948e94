//! Fakes the sync-loop tests share: an engine and the pods' processes that
//! record what the loop asked of them, optionally in one journal so a test
//! can check the order across both.
#![allow(dead_code)]

pub mod manifests;
pub mod runner_loop;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_agent::engine::{Engine, MapContent, PodLink};
use sluice_agent::pods::runtime::{ExitInfo, ProbeRequest, ProbeResult, ProcId, Sig, SpawnSpec};
use sluice_agent::pods::{Prober, ProcessControl};

/// What the fakes did, in order: `apply`, `apply failed`, `spawn <key>`,
/// `<signal><note>`.
pub type Journal = Arc<Mutex<Vec<String>>>;

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
pub struct EngineLog {
    pub applies: usize,
    pub last: Option<MapContent>,
    pub plugged: BTreeSet<String>,
    /// The pods plugged at each `release_unclaimed`.
    pub released: Vec<BTreeSet<String>>,
    /// Make every apply fail (the maps unavailable).
    pub fail_apply: bool,
    /// Frontends the engine can hold (`check_capacity`); `None`: any.
    pub max_frontends: Option<usize>,
}

/// An engine that keeps the last content it was given.
#[derive(Clone, Default)]
pub struct FakeEngine {
    log: Arc<Mutex<EngineLog>>,
    journal: Journal,
}

impl FakeEngine {
    pub fn with_journal(journal: Journal) -> Self {
        FakeEngine {
            journal,
            ..Default::default()
        }
    }

    pub fn log(&self) -> MutexGuard<'_, EngineLog> {
        lock(&self.log)
    }

    /// (ready, terminating) endpoints of the frontend on `port`.
    pub fn frontend(&self, port: u16) -> Option<(u32, u32)> {
        let log = self.log();
        let c = log.last.as_ref()?;
        c.tables
            .services
            .iter()
            .find(|(k, _)| k.port == port)
            .map(|(_, v)| (v.ready, v.terminating))
    }
}

impl Engine for FakeEngine {
    fn kind(&self) -> &'static str {
        "fake"
    }
    fn apply(&mut self, content: &MapContent) -> anyhow::Result<()> {
        let mut log = self.log();
        if log.fail_apply {
            lock(&self.journal).push("apply failed".into());
            anyhow::bail!("maps unavailable");
        }
        log.applies += 1;
        log.last = Some(content.clone());
        lock(&self.journal).push("apply".into());
        Ok(())
    }
    fn check_capacity(&self, content: &MapContent) -> anyhow::Result<()> {
        let want = content
            .tables
            .services
            .keys()
            .filter(|k| k.port != 0)
            .count();
        match self.log().max_frontends {
            Some(max) if want > max => {
                anyhow::bail!(
                    "{want} frontends do not fit: the engine holds {max} (raise --fake-max)"
                )
            }
            _ => Ok(()),
        }
    }
    fn plug_pod(&mut self, pod: &PodLink) -> anyhow::Result<()> {
        self.log().plugged.insert(pod.key.clone());
        Ok(())
    }
    fn unplug_pod(&mut self, key: &str) -> anyhow::Result<()> {
        self.log().plugged.remove(key);
        Ok(())
    }
    fn release_unclaimed(&mut self) -> anyhow::Result<()> {
        let mut log = self.log();
        let plugged = log.plugged.clone();
        log.released.push(plugged);
        lock(&self.journal).push("release unclaimed".into());
        Ok(())
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    fn snat_exhaustion(&self) -> Vec<(sluice_datapath::maps::SnatExhaustKey, u64)> {
        Vec::new()
    }
    fn shutdown(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

#[derive(Default)]
pub struct Procs {
    next: ProcId,
    /// id → (pod key, running)
    procs: BTreeMap<ProcId, (String, bool)>,
    exits: BTreeMap<ProcId, ExitInfo>,
    pub signals: Vec<(String, Sig)>,
    pub spawned: Vec<String>,
}

/// Written after the signal's name in the journal, computed at the moment
/// the signal goes out (what a load balancer probing then would be told).
pub type SignalNote = Arc<dyn Fn() -> String + Send + Sync>;

/// Processes that run until signalled and then exit cleanly; no probes.
#[derive(Clone, Default)]
pub struct FakePods {
    procs: Arc<Mutex<Procs>>,
    journal: Journal,
    note: Option<SignalNote>,
}

impl FakePods {
    pub fn with_journal(journal: Journal, note: Option<SignalNote>) -> Self {
        FakePods {
            journal,
            note,
            ..Default::default()
        }
    }

    pub fn w(&self) -> MutexGuard<'_, Procs> {
        lock(&self.procs)
    }

    pub fn signals(&self, key: &str) -> Vec<Sig> {
        self.w()
            .signals
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| *s)
            .collect()
    }

    pub fn running(&self) -> usize {
        self.w().procs.values().filter(|(_, r)| *r).count()
    }
}

impl ProcessControl for FakePods {
    fn create_netns(&mut self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }
    fn remove_netns(&mut self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }
    fn spawn(&mut self, spec: &SpawnSpec) -> anyhow::Result<ProcId> {
        let mut w = self.w();
        w.next += 1;
        let id = w.next;
        w.procs.insert(id, (spec.key.clone(), true));
        w.spawned.push(spec.key.clone());
        lock(&self.journal).push(format!("spawn {}", spec.key));
        Ok(id)
    }
    fn signal(&mut self, id: ProcId, sig: Sig) -> anyhow::Result<()> {
        // Before taking the lock: the note may ask a server the loop runs.
        let note = self.note.as_ref().map(|f| f()).unwrap_or_default();
        let mut w = self.w();
        let Some((key, running)) = w.procs.get(&id).cloned() else {
            return Ok(());
        };
        w.signals.push((key.clone(), sig));
        lock(&self.journal).push(format!("{sig:?}{note}"));
        if running {
            w.procs.insert(id, (key, false));
            w.exits.insert(
                id,
                ExitInfo {
                    code: Some(0),
                    signal: None,
                },
            );
        }
        Ok(())
    }
    fn try_wait(&mut self, id: ProcId) -> anyhow::Result<Option<ExitInfo>> {
        Ok(self.w().exits.remove(&id))
    }
}

impl Prober for FakePods {
    fn start(&mut self, _key: &str, _req: ProbeRequest) {}
    fn poll(&mut self) -> Vec<(String, u64, ProbeResult)> {
        Vec::new()
    }
}
