//! The I/O side of the pod status: [`KubeStatusSink`] computes each pod's
//! status in the sync loop's thread (pure, [`StatusBook`]) and hands the
//! changes to a task on the agent's tokio runtime, which writes them:
//! `pods/<name>/status` as a merge patch (field manager `sluice-agent`),
//! and the final delete of a pod whose graceful deletion is over (grace 0,
//! uid precondition, as the kubelet does). The sync loop never waits on
//! the network.
//!
//! A burst of changes is coalesced (the newest status per pod wins) for at
//! most [`COALESCE`] after its first change, so a readiness change reaches
//! the API server within milliseconds. A failed write is retried with
//! back-off ([`RETRY_FIRST`] doubling to [`RETRY_MAX`]); a pod that no
//! longer exists (404) or was replaced (uid precondition, 409) is dropped.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use sluice_model::k8s::Pod;
use sluice_model::k8s_openapi::api::core::v1::PodStatus;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{debug, warn};

use super::pod_status::{PodReport, StatusBook, WallClock, Write};
use super::PodStatusSink;

/// How long a burst of changes is gathered before writing.
pub const COALESCE: Duration = Duration::from_millis(10);
/// First retry after a failed write, doubled per failure up to
/// [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(200);
pub const RETRY_MAX: Duration = Duration::from_secs(10);
/// Writes in flight at once.
const PARALLEL: usize = 8;
/// The field manager of the agent's writes.
const MANAGER: &str = "sluice-agent";

/// Writes pod status (and the end of graceful deletions) to the API
/// server.
pub struct KubeStatusSink {
    book: StatusBook,
    clock: WallClock,
    tx: UnboundedSender<Write>,
    task: tokio::task::JoinHandle<()>,
}

impl KubeStatusSink {
    pub fn spawn(rt: &tokio::runtime::Handle, client: Client) -> KubeStatusSink {
        let (tx, rx) = unbounded_channel();
        let task = rt.spawn(write_loop(client, rx));
        KubeStatusSink {
            book: StatusBook::default(),
            clock: WallClock::new(Instant::now(), SystemTime::now()),
            tx,
            task,
        }
    }
}

impl PodStatusSink for KubeStatusSink {
    fn report(&mut self, pods: &[PodReport]) {
        for w in self.book.writes(pods, &self.clock, SystemTime::now()) {
            if self.tx.send(w).is_err() {
                // The task is gone (the runtime is shutting down): there is
                // nobody to write to any more.
                return;
            }
        }
    }
}

impl Drop for KubeStatusSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What is due for one pod.
#[derive(Debug, Default)]
struct Pending {
    status: Option<Box<PodStatus>>,
    delete: Option<String>,
    failures: u32,
    not_before: Option<Instant>,
}

fn take(pending: &mut BTreeMap<String, Pending>, w: Write) {
    match w {
        Write::Status { key, status } => pending.entry(key).or_default().status = Some(status),
        Write::Delete { key, uid } => pending.entry(key).or_default().delete = Some(uid),
    }
}

/// How one pod's writes went.
enum Outcome {
    Done,
    /// The pod is gone or replaced: nothing more to write.
    Gone,
    Failed(Pending),
}

async fn write_loop(client: Client, mut rx: UnboundedReceiver<Write>) {
    let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
    loop {
        let retry = pending.values().filter_map(|p| p.not_before).min();
        let got = match retry {
            Some(at) => tokio::select! {
                w = rx.recv() => w.map(Some),
                _ = tokio::time::sleep_until(at.into()) => Some(None),
            },
            None => rx.recv().await.map(Some),
        };
        let Some(first) = got else {
            return;
        };
        if let Some(w) = first {
            take(&mut pending, w);
            // The rest of the burst (one tick's changes come together).
            tokio::time::sleep(COALESCE).await;
        }
        while let Ok(w) = rx.try_recv() {
            take(&mut pending, w);
        }
        let now = Instant::now();
        let due: Vec<String> = pending
            .iter()
            .filter(|(_, p)| p.not_before.is_none_or(|t| t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        let jobs: Vec<(String, Pending)> = due
            .into_iter()
            .filter_map(|k| pending.remove(&k).map(|p| (k, p)))
            .collect();
        let results: Vec<(String, Outcome)> = futures::stream::iter(jobs)
            .map(|(key, p)| {
                let client = client.clone();
                async move {
                    let out = write_one(&client, &key, p).await;
                    (key, out)
                }
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        for (key, out) in results {
            let Outcome::Failed(mut p) = out else {
                continue;
            };
            // A newer status that came meanwhile replaces the failed one.
            if let Some(newer) = pending.remove(&key) {
                p.status = newer.status.or(p.status);
                p.delete = newer.delete.or(p.delete);
            }
            p.not_before = Some(Instant::now() + backoff(p.failures));
            p.failures = p.failures.saturating_add(1);
            pending.insert(key, p);
        }
    }
}

/// The wait before the retry that follows `failures` earlier failures.
fn backoff(failures: u32) -> Duration {
    crate::backoff::doubling(RETRY_FIRST, RETRY_MAX, failures)
}

fn is(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

async fn write_one(client: &Client, key: &str, mut p: Pending) -> Outcome {
    let Some((ns, name)) = key.split_once('/') else {
        return Outcome::Gone;
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    if let Some(status) = p.status.take() {
        let pp = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        let body = serde_json::json!({ "status": status });
        match api.patch_status(name, &pp, &Patch::Merge(&body)).await {
            Ok(_) => debug!(pod = %key, "status written"),
            Err(e) if is(&e, 404) => return Outcome::Gone,
            Err(e) => {
                warn!(pod = %key, error = %e, "writing pod status failed; retrying");
                p.status = Some(status);
                return Outcome::Failed(p);
            }
        }
    }
    if let Some(uid) = p.delete.take() {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => debug!(pod = %key, "deleted: its containers have ended"),
            // Gone already, or a new pod under the name (another uid).
            Err(e) if is(&e, 404) || is(&e, 409) => return Outcome::Gone,
            Err(e) => {
                warn!(pod = %key, error = %e, "deleting the stopped pod failed; retrying");
                p.delete = Some(uid);
                return Outcome::Failed(p);
            }
        }
    }
    Outcome::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_doubling_to_a_cap() {
        assert_eq!(backoff(0), RETRY_FIRST);
        assert_eq!(backoff(1), RETRY_FIRST * 2);
        assert_eq!(backoff(5), RETRY_MAX.min(RETRY_FIRST * 32));
        assert_eq!(backoff(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn the_newest_status_per_pod_wins_and_a_delete_rides_along() {
        let mut pending = BTreeMap::new();
        let status = |phase: &str| {
            Box::new(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            })
        };
        take(
            &mut pending,
            Write::Status {
                key: "default/a".into(),
                status: status("Pending"),
            },
        );
        take(
            &mut pending,
            Write::Status {
                key: "default/a".into(),
                status: status("Running"),
            },
        );
        take(
            &mut pending,
            Write::Delete {
                key: "default/a".into(),
                uid: "u".into(),
            },
        );
        let p = &pending["default/a"];
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert_eq!(p.delete.as_deref(), Some("u"));
        assert_eq!(pending.len(), 1);
    }
}
