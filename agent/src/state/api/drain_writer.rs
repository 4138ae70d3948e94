//! The I/O side of the agent's drains through the API ([`super::drain`]):
//! [`KubeDrainer`] takes the sync loop's [`Request`]s, makes them on the
//! agent's tokio runtime (cordon and uncordon as merge patches of the Node,
//! evictions as `POST pods/<name>/eviction`, forced ones as a graceful
//! `DELETE`, each with the pod's uid as precondition) and hands back what
//! the API answered. The sync loop never waits on the network.

use std::sync::mpsc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use sluice_model::k8s::{Node, Pod};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{info, warn};

use super::drain::{Answer, Request, DRAIN_CORDONED_ANNOTATION};
use super::DrainCalls;

/// Calls in flight at once (a drain of a full node is 110 evictions).
const PARALLEL: usize = 16;
/// A call not answered by then counts as failed (and is retried): a hung
/// connection must not hold a drain.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The field manager of the agent's writes.
const MANAGER: &str = "sluice-agent";

/// Makes the drain's calls and collects the answers.
pub struct KubeDrainer {
    tx: UnboundedSender<Request>,
    answers: mpsc::Receiver<(Request, Answer)>,
    task: tokio::task::JoinHandle<()>,
}

impl KubeDrainer {
    /// Calls for node `node` through `client`, on `rt`.
    pub fn spawn(rt: &tokio::runtime::Handle, client: Client, node: &str) -> KubeDrainer {
        let (tx, rx) = unbounded_channel();
        let (answer_tx, answers) = mpsc::channel();
        let task = rt.spawn(call_loop(client, node.to_string(), rx, answer_tx));
        KubeDrainer { tx, answers, task }
    }
}

impl DrainCalls for KubeDrainer {
    fn send(&self, req: Request) {
        // The task is gone only when the runtime shuts down.
        let _ = self.tx.send(req);
    }

    fn answers(&self) -> Vec<(Request, Answer)> {
        self.answers.try_iter().collect()
    }
}

impl Drop for KubeDrainer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn call_loop(
    client: Client,
    node: String,
    rx: UnboundedReceiver<Request>,
    answers: mpsc::Sender<(Request, Answer)>,
) {
    let requests =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let calls = requests
        .map(|req| {
            let client = client.clone();
            let node = node.clone();
            async move {
                let answer =
                    match tokio::time::timeout(CALL_TIMEOUT, call(&client, &node, &req)).await {
                        Ok(a) => a,
                        Err(_) => Answer::Failed(format!("no answer within {CALL_TIMEOUT:?}")),
                    };
                (req, answer)
            }
        })
        .buffer_unordered(PARALLEL);
    futures::pin_mut!(calls);
    while let Some((req, answer)) = calls.next().await {
        log(&node, &req, &answer);
        if answers.send((req, answer)).is_err() {
            return;
        }
    }
}

fn log(node: &str, req: &Request, answer: &Answer) {
    match (req, answer) {
        (Request::Cordon, Answer::Done) => info!(node, "cordoned for the drain"),
        (Request::Uncordon, Answer::Done) => info!(node, "uncordoned: the drain ended"),
        (Request::Evict { key, grace, .. }, Answer::Done) => {
            info!(pod = %key, grace_s = grace.as_secs(), "evicted through the Eviction API")
        }
        (Request::Delete { key, grace, .. }, Answer::Done) => {
            info!(pod = %key, grace_s = grace.as_secs(), "deleted past its disruption budget")
        }
        (Request::Evict { key, .. }, Answer::Refused) => {
            info!(pod = %key, "eviction refused by a PodDisruptionBudget; retrying")
        }
        (_, Answer::Failed(e)) => {
            warn!(node, request = ?req, error = %e, "drain call failed; retrying")
        }
        _ => {}
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// A 409 that is the uid precondition failing: the pod of that name is
/// another one now, so this one is gone. (A 409 from an eviction whose
/// budget kept changing is worth another try.)
fn precondition_failed(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.message.contains("recondition"))
}

fn delete_params(uid: &Option<String>, grace: Duration) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(u32::try_from(grace.as_secs()).unwrap_or(u32::MAX)),
        preconditions: uid.as_ref().map(|u| Preconditions {
            uid: Some(u.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// A `policy/v1` Eviction of pod `ns/name`: its grace and its uid as
/// precondition in `deleteOptions`.
fn eviction(ns: &str, name: &str, uid: &Option<String>, grace: Duration) -> Vec<u8> {
    let body = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
        "deleteOptions": delete_params(uid, grace),
    });
    body.to_string().into_bytes()
}

fn pods(client: &Client, key: &str) -> Option<(Api<Pod>, String)> {
    let (ns, name) = key.split_once('/')?;
    Some((Api::namespaced(client.clone(), ns), name.to_string()))
}

fn pod_answer<T>(r: Result<T, kube::Error>) -> Answer {
    match r {
        Ok(_) => Answer::Done,
        Err(e) => match code(&e) {
            Some(429) => Answer::Refused,
            Some(404) => Answer::Gone,
            Some(409) if precondition_failed(&e) => Answer::Gone,
            _ => Answer::Failed(e.to_string()),
        },
    }
}

async fn call(client: &Client, node: &str, req: &Request) -> Answer {
    let pp = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    match req {
        Request::Cordon | Request::Uncordon => {
            let cordon = matches!(req, Request::Cordon);
            let body = if cordon {
                json!({"metadata": {"annotations": {DRAIN_CORDONED_ANNOTATION: "true"}},
                       "spec": {"unschedulable": true}})
            } else {
                json!({"metadata": {"annotations": {DRAIN_CORDONED_ANNOTATION: null}},
                       "spec": {"unschedulable": null}})
            };
            let api: Api<Node> = Api::all(client.clone());
            match api.patch(node, &pp, &Patch::Merge(&body)).await {
                Ok(_) => Answer::Done,
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
        Request::Evict { key, uid, grace } => {
            let Some((ns, name)) = key.split_once('/') else {
                return Answer::Gone;
            };
            // Built here rather than with kube's `Api::evict`, whose body
            // names the options `delete_options`: an API server reads
            // `deleteOptions` and would drop the grace and the uid.
            let body = eviction(ns, name, uid, *grace);
            let path = format!("/api/v1/namespaces/{ns}/pods/{name}/eviction");
            let req = match kube::core::Request::new(path).create(&PostParams::default(), body) {
                Ok(r) => r,
                Err(e) => return Answer::Failed(e.to_string()),
            };
            pod_answer(client.request::<kube::core::Status>(req).await)
        }
        Request::Delete { key, uid, grace } => {
            let Some((api, name)) = pods(client, key) else {
                return Answer::Gone;
            };
            pod_answer(api.delete(&name, &delete_params(uid, *grace)).await)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn answers_as_kubectl_drain_reads_them() {
        assert_eq!(pod_answer(Ok(())), Answer::Done);
        assert_eq!(
            pod_answer::<()>(Err(api_error(429, "budget"))),
            Answer::Refused
        );
        assert_eq!(
            pod_answer::<()>(Err(api_error(404, "not found"))),
            Answer::Gone
        );
        assert_eq!(
            pod_answer::<()>(Err(api_error(
                409,
                "Precondition failed: UID in precondition: a, UID in object meta: b"
            ))),
            Answer::Gone
        );
        assert!(matches!(
            pod_answer::<()>(Err(api_error(409, "its PodDisruptionBudget kept changing"))),
            Answer::Failed(_)
        ));
        assert!(matches!(
            pod_answer::<()>(Err(api_error(500, "boom"))),
            Answer::Failed(_)
        ));
    }

    #[test]
    fn an_eviction_says_delete_options_as_the_api_reads_them() {
        let body: serde_json::Value = serde_json::from_slice(&eviction(
            "ns",
            "web",
            &Some("u1".into()),
            Duration::from_secs(7),
        ))
        .expect("json");
        assert_eq!(body["kind"], "Eviction");
        assert_eq!(body["apiVersion"], "policy/v1");
        assert_eq!(body["metadata"]["name"], "web");
        assert_eq!(body["deleteOptions"]["gracePeriodSeconds"], 7);
        assert_eq!(body["deleteOptions"]["preconditions"]["uid"], "u1");
    }

    #[test]
    fn the_grace_and_the_uid_go_in_the_delete_options() {
        let dp = delete_params(&Some("u1".into()), Duration::from_secs(600));
        assert_eq!(dp.grace_period_seconds, Some(600));
        assert_eq!(dp.preconditions.and_then(|p| p.uid).as_deref(), Some("u1"));
        assert!(delete_params(&None, Duration::ZERO).preconditions.is_none());
    }
}
