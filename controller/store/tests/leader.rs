//! Leader election on a real etcd: two candidates, never two leaders, and
//! the survivor takes over within 15 s of the leader's death.
//!
//! Each leader runs a trivial decision loop: a tick, written with its
//! tenure's fence. From the store's point of view a candidate is leader
//! from the leader key's creation to its deletion; every accepted tick
//! must fall inside a tenure of the candidate that wrote it, and tenures
//! must not overlap.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, EventType, Txn, TxnOp, WatchOptions};
use futures::StreamExt;
use sluice_store::leader::Candidate;
use sluice_store::testing::EtcdServer;
use sluice_store::Revision;
use tokio::sync::oneshot;

const KEY: &str = "/sluice/leader";
const TICKS: &str = "/sluice/ticks";
/// The lease TTL: a dead leader's key lasts about this long.
const TTL_SECS: i64 = 5;
/// The bound on a takeover.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(15);
const WAIT: Duration = Duration::from_secs(60);

/// Accepted ticks: (candidate, revision).
type Ticks = Arc<Mutex<Vec<(String, Revision)>>>;

/// A candidate's task and the way to make it resign.
struct Running {
    task: tokio::task::JoinHandle<()>,
    resign: oneshot::Sender<()>,
}

/// Campaigns, then ticks as leader until it loses the lease or is told to
/// resign.
fn run_candidate(client: Client, id: &'static str, ticks: Ticks) -> Running {
    let (resign, mut resign_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let candidate = Candidate::new(client.clone(), KEY, id, TTL_SECS);
        let lead = candidate.campaign().await.expect("campaign");
        let mut kv = client.clone();
        loop {
            tokio::select! {
                _ = lead.lost() => return,
                _ = &mut resign_rx => {
                    lead.resign().await.expect("resign");
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
            let txn = Txn::new()
                .when([lead.fence()])
                .and_then([TxnOp::put(TICKS, id, None)]);
            let resp = kv.txn(txn).await.expect("tick");
            if !resp.succeeded() {
                return; // No longer leader in the store's eyes.
            }
            let rev = resp.header().map(|h| h.revision()).expect("header");
            ticks.lock().expect("ticks").push((id.to_owned(), rev));
        }
    });
    Running { task, resign }
}

fn ticks_of(ticks: &Ticks, id: &str) -> usize {
    ticks
        .lock()
        .expect("ticks")
        .iter()
        .filter(|(c, _)| c == id)
        .count()
}

async fn wait_for_ticks(ticks: &Ticks, id: &str, n: usize, within: Duration) {
    tokio::time::timeout(within, async {
        while ticks_of(ticks, id) < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{id} made no {n} ticks within {within:?}"));
}

/// Tenures from the leader key's history: (holder, created, deleted), with
/// `Revision::MAX` for one still open. A sentinel key next to the leader
/// key marks the end of the history to read.
async fn tenures(client: &mut Client) -> Vec<(String, Revision, Revision)> {
    let sentinel = format!("{KEY}/end");
    client
        .put(sentinel.as_str(), "", None)
        .await
        .expect("sentinel");
    let opts = WatchOptions::new().with_prefix().with_start_revision(1);
    let mut w = client.watch(KEY, Some(opts)).await.expect("watch");
    let mut out = Vec::new();
    let mut open: Option<(String, Revision)> = None;
    loop {
        let resp = tokio::time::timeout(WAIT, w.next())
            .await
            .expect("history")
            .expect("watch open")
            .expect("watch ok");
        for e in resp.events() {
            let kv = e.kv().expect("kv");
            if kv.key() == sentinel.as_bytes() {
                if let Some((who, from)) = open {
                    out.push((who, from, Revision::MAX));
                }
                return out;
            }
            match e.event_type() {
                EventType::Put if kv.create_revision() == kv.mod_revision() => {
                    assert!(open.is_none(), "a leader key created while one is held");
                    let who = kv.value_str().expect("utf8").to_owned();
                    open = Some((who, kv.mod_revision()));
                }
                EventType::Put => {}
                EventType::Delete => {
                    let (who, from) = open.take().expect("delete without a leader");
                    out.push((who, from, kv.mod_revision()));
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_takeover_after_a_crash() {
    let etcd = EtcdServer::start().await.expect("start etcd");
    let connect = || async {
        Client::connect([etcd.endpoint()], None)
            .await
            .expect("connect")
    };
    let ticks: Ticks = Arc::default();

    let a = run_candidate(connect().await, "a", ticks.clone());
    let b = run_candidate(connect().await, "b", ticks.clone());

    // Someone leads; find out who.
    tokio::time::timeout(WAIT, async {
        while ticks.lock().expect("ticks").len() < 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("no leader");
    let first = ticks.lock().expect("ticks")[0].0.clone();
    let ((leader, _), (survivor, survivor_id)) = if first == "a" {
        ((a, "a"), (b, "b"))
    } else {
        ((b, "b"), (a, "a"))
    };
    assert_eq!(ticks_of(&ticks, survivor_id), 0, "the follower ticked");

    // Crash the leader: its task and its keep-alive go, nothing resigns.
    leader.task.abort();
    let _ = leader.task.await;
    wait_for_ticks(&ticks, survivor_id, 3, TAKEOVER_WITHIN).await;

    // A new candidate in the crashed one's place; the survivor resigns,
    // and the newcomer takes over.
    let comeback_id = if survivor_id == "a" { "b" } else { "a" };
    let before = ticks_of(&ticks, comeback_id);
    let comeback = run_candidate(connect().await, comeback_id, ticks.clone());
    wait_for_ticks(&ticks, survivor_id, ticks_of(&ticks, survivor_id) + 3, WAIT).await;
    let _ = survivor.resign.send(());
    survivor.task.await.expect("survivor resigned");
    wait_for_ticks(&ticks, comeback_id, before + 3, WAIT).await;
    let _ = comeback.resign.send(());
    comeback.task.await.expect("newcomer resigned");

    let mut client = connect().await;
    let tenures = tenures(&mut client).await;
    assert_eq!(tenures.len(), 3, "tenures: {tenures:?}");
    for pair in tenures.windows(2) {
        assert!(pair[0].2 < pair[1].1, "overlapping tenures: {pair:?}");
    }
    let held: Vec<&str> = tenures.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(held, vec![first.as_str(), survivor_id, comeback_id]);
    for (who, rev) in ticks.lock().expect("ticks").iter() {
        assert!(
            tenures
                .iter()
                .any(|(w, from, to)| w == who && from < rev && rev < to),
            "tick of {who} at {rev} outside its tenures {tenures:?}"
        );
    }
}
