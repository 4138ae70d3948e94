//! One pod's life on this node: its namespace, a process per container,
//! restarts with back-off, readiness probes, and replacement by a new spec.

use std::time::Instant;

use super::pod_state::{restart_backoff, Run, Slot, RESTART_BACKOFF_RESET};
use super::reports::PodEvent;
use super::PodManager;
use crate::pods::runtime::{ExitInfo, ProbeRequest, SpawnSpec};
use crate::pods::spec::RestartPolicy;

impl PodManager {
    pub(super) fn emit(&mut self, e: PodEvent) {
        self.events.push(e);
    }

    pub(super) fn forget(&mut self, key: &str) {
        if let Some(s) = self.pods.remove(key) {
            if s.owns_netns && s.sandbox {
                if let Err(e) = self.procs.remove_netns(&s.netns) {
                    self.emit(PodEvent::Error {
                        key: key.to_string(),
                        message: format!("removing namespace {}: {e:#}", s.netns),
                    });
                }
            }
            self.emit(PodEvent::Removed {
                key: key.to_string(),
            });
        }
    }

    /// The old instance is gone; start over with the replacement spec.
    pub(super) fn replace(&mut self, key: &str, now: Instant) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let Some(spec) = s.replacement.take() else {
            return;
        };
        let mut fresh = Slot::new(spec, now);
        // Same key, same namespace: keep it (and the link) when it survived.
        if fresh.netns == s.netns && fresh.owns_netns == s.owns_netns {
            fresh.sandbox = s.sandbox;
            fresh.network_ready = s.network_ready;
        } else if s.owns_netns && s.sandbox {
            let _ = self.procs.remove_netns(&s.netns);
        }
        *s = fresh;
    }

    pub(super) fn ensure_sandbox(&mut self, key: &str) -> bool {
        let Some(s) = self.pods.get_mut(key) else {
            return false;
        };
        if s.sandbox {
            return true;
        }
        let made = if s.owns_netns {
            self.procs.create_netns(&s.netns)
        } else if s.netns_path().exists() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "network namespace {} does not exist",
                s.netns_path().display()
            ))
        };
        match made {
            Ok(()) => {
                s.sandbox = true;
                let e = PodEvent::SandboxReady {
                    key: key.to_string(),
                    netns: s.netns_path(),
                };
                self.emit(e);
                true
            }
            Err(e) => {
                let message = format!("{e:#}");
                self.emit(PodEvent::Error {
                    key: key.to_string(),
                    message,
                });
                false
            }
        }
    }

    /// Start container `i` of `key` (or, without a command, mark it
    /// running: someone else runs it, or the pod is a sandbox).
    pub(super) fn start(&mut self, key: &str, i: usize, now: Instant) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let netns = s.netns_path();
        let (Some(spec), Some(c)) = (s.spec.containers.get(i), s.ctrs.get_mut(i)) else {
            return;
        };
        let proc = if spec.argv.is_empty() {
            Ok(None)
        } else {
            self.procs
                .spawn(&SpawnSpec {
                    key: key.to_string(),
                    container: spec.name.clone(),
                    first: i == 0,
                    netns,
                    argv: spec.argv.clone(),
                    env: spec.env.clone(),
                    working_dir: spec.working_dir.clone(),
                })
                .map(Some)
        };
        match proc {
            Ok(proc) => {
                c.run = Run::Running { proc, since: now };
                c.last_started = Some(now);
                c.readiness.started(now);
                let e = PodEvent::Started {
                    key: key.to_string(),
                    container: spec.name.clone(),
                    restarts: c.restarts,
                };
                self.events.push(e);
            }
            Err(e) => {
                c.restarts = c.restarts.saturating_add(1);
                c.run = Run::Pending {
                    not_before: now + restart_backoff(c.restarts),
                };
                let message = format!("container {:?}: {e:#}", spec.name);
                self.events.push(PodEvent::Error {
                    key: key.to_string(),
                    message,
                });
            }
        }
    }

    pub(super) fn step(&mut self, key: &str, now: Instant) {
        // 1. Sandbox, then the containers.
        let Some(s) = self.pods.get(key) else {
            return;
        };
        let stopping = s.eviction.is_some() || s.evicted || s.removed;
        if !s.sandbox && !stopping && !self.ensure_sandbox(key) {
            return;
        }
        let Some(s) = self.pods.get(key) else {
            return;
        };
        let wired = s.network_ready || s.spec.ips.is_empty();
        if !stopping && wired {
            let due: Vec<usize> = (s.ctrs.iter().enumerate())
                .filter(|(_, c)| matches!(c.run, Run::Pending { not_before } if not_before <= now))
                .map(|(i, _)| i)
                .collect();
            for i in due {
                self.start(key, i, now);
            }
        }

        // 2. Which processes have ended? Each container restarts on its own
        // per restartPolicy, with its own back-off, as the kubelet does.
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let evicting = s.eviction.is_some();
        for (i, c) in s.ctrs.iter_mut().enumerate() {
            let Run::Running {
                proc: Some(p),
                since,
            } = c.run
            else {
                continue;
            };
            let x = match self.procs.try_wait(p) {
                Ok(None) => continue,
                Ok(Some(x)) => x,
                Err(e) => {
                    // The process is not ours any more: treat it as gone.
                    self.events.push(PodEvent::Error {
                        key: key.to_string(),
                        message: format!("{e:#}"),
                    });
                    ExitInfo::default()
                }
            };
            c.readiness.stopped();
            c.last_exit = Some((x, now));
            let container = s.spec.containers.get(i).map(|c| c.name.clone());
            self.events.push(PodEvent::Exited {
                key: key.to_string(),
                container: container.unwrap_or_default(),
                exit: x,
            });
            if now.saturating_duration_since(since) >= RESTART_BACKOFF_RESET {
                c.restarts = 0;
            }
            let again = match s.spec.restart_policy {
                RestartPolicy::Always => true,
                RestartPolicy::OnFailure => !x.success(),
                RestartPolicy::Never => false,
            };
            c.run = if again && !evicting {
                c.restarts = c.restarts.saturating_add(1);
                Run::Pending {
                    not_before: now + restart_backoff(c.restarts),
                }
            } else {
                Run::Stopped
            };
        }

        // 3. Eviction.
        if evicting {
            self.step_eviction(key, now, false);
        }

        // 4. Probes (they also run while terminating: `serving` follows).
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let (netns, pod_ip) = (s.netns_path(), s.spec.probe_ip());
        for (spec, c) in s.spec.containers.iter().zip(s.ctrs.iter_mut()) {
            let Some(p) = &spec.readiness else {
                continue;
            };
            if !matches!(c.run, Run::Running { .. }) || !c.readiness.due(now) {
                continue;
            }
            s.probe_seq += 1;
            c.probe_seq = s.probe_seq;
            c.readiness.probe_started(now);
            let req = ProbeRequest {
                seq: s.probe_seq,
                action: p.action.clone(),
                pod_ip,
                netns: netns.clone(),
                timeout: p.timeout,
            };
            self.prober.start(key, req);
        }

        // 5. Report readiness changes, whatever caused them.
        let ready = s.ready();
        if ready != s.reported_ready {
            s.reported_ready = ready;
            self.events.push(PodEvent::ReadinessChanged {
                key: key.to_string(),
                ready,
            });
        }
    }
}
