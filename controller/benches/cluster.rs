//! The controller's loops at scale, through the API, in one process:
//! `cargo bench -p sluice-controller --bench cluster`
//! (`SLUICE_BENCH_NODES`, default 5 000 `sim` nodes in two zones;
//! `SLUICE_BENCH_PENDING`, default 50 000 pods per phase;
//! `SLUICE_BENCH_STORES`: `embedded` (default) or `etcd`;
//! `SLUICE_BENCH_PHASES`: `pending,interleaved` (default) or either).
//!
//! 1. A NodePool of the `sim` provider (no boot delay) makes the nodes;
//!    printed: how long until all are `Ready`. The pure decision
//!    (`sluice_scheduler::schedule_all`, in this process, no API) over
//!    those Nodes and the phase's pods is timed: the baseline of the
//!    pending phase.
//! 2. `pending`, as kube-scheduler's scheduler_perf measures throughput:
//!    every Node is cordoned, the pods (100m CPU, 64Mi each; 10 per node
//!    on average) are created by 64 concurrent kube-rs clients and wait
//!    until each shows `PodScheduled=False` (the scheduler has tried it
//!    once: the backlog is really pending), then every Node is
//!    uncordoned. Bound pods per second are counted from the first
//!    uncordon (the moment scheduling can start) to the last bind, as a
//!    watch sees them.
//! 3. `interleaved`, as earlier runs measured: as many pods again are
//!    created while the scheduler binds them; the create rate is the
//!    baseline (the scheduler cannot bind faster than pods arrive).
//! 4. The controller's RSS with every node and pod in it, and its CPU time
//!    during each phase.

#[path = "../tests/common/mod.rs"]
#[macro_use]
#[allow(unused_macros)]
mod common;
#[path = "support/proc_stats.rs"]
mod proc_stats;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, Server};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use proc_stats::{cpu_time, pct, rss_mib};
use sluice_model::k8s::{Node, Pod};

const CONCURRENCY: usize = 64;
/// Every wait is bounded; the bench fails rather than hangs.
const LIMIT: Duration = Duration::from_secs(900);

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod(prefix: &str, i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{prefix}{i}"), "namespace": "default",
                     "labels": {"app": format!("a{}", i % 100)}},
        "spec": {"containers": [{"name": "c", "image": "x",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }))
    .expect("pod")
}

fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn marked_unschedulable(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
}

/// What the bench's pod watch has seen, by pod name.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    unschedulable: HashSet<String>,
    /// Changes seen of pods not bound yet (their unschedulable reports).
    unbound_changes: usize,
}

type Shared = Arc<Mutex<Seen>>;

fn seen(s: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    s.lock().expect("lock")
}

/// Records what `p` shows.
fn record(seen: &Shared, p: &Pod) {
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut s = self::seen(seen);
    if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
        s.bound.entry(name).or_insert_with(Instant::now);
    } else {
        s.unbound_changes += 1;
        if marked_unschedulable(p) {
            s.unschedulable.insert(name);
        }
    }
}

/// Watches every pod until aborted, recording binds and
/// `PodScheduled=False`; a watch whose resourceVersion is compacted away
/// (410) starts again from a new list.
fn watch_pods(pods: Api<Pod>, rv: String, seen: Shared) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rv = rv;
        loop {
            let Ok(stream) = pods.watch(&WatchParams::default().timeout(290), &rv).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let mut stream = stream.boxed();
            while let Ok(Some(ev)) = stream.try_next().await {
                match ev {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                        rv = p.metadata.resource_version.clone().unwrap_or_default();
                        record(&seen, &p);
                    }
                    WatchEvent::Error(e) if e.code == 410 => {
                        let Ok(list) = pods.list(&ListParams::default()).await else {
                            break;
                        };
                        for p in &list.items {
                            record(&seen, p);
                        }
                        rv = list.metadata.resource_version.unwrap_or_default();
                        break;
                    }
                    _ => {}
                }
            }
        }
    })
}

/// Polls `f` until it holds, at most [`LIMIT`].
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates `{prefix}0..n` with [`CONCURRENCY`] clients; returns when each
/// was sent, and the seconds the whole took.
async fn create_pods(pods: &Api<Pod>, prefix: &str, n: usize) -> (HashMap<String, Instant>, f64) {
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (pods, created) = (pods.clone(), created.clone());
            async move {
                let p = pod(prefix, i);
                let name = format!("{prefix}{i}");
                created.lock().expect("lock").insert(name, Instant::now());
                pods.create(&PostParams::default(), &p).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("creates");
    let secs = t.elapsed().as_secs_f64();
    let created = std::mem::take(&mut *created.lock().expect("lock"));
    (created, secs)
}

/// Cordons (`true`) or uncordons every one of `names`, as `kubectl
/// cordon` does, [`CONCURRENCY`] at a time.
async fn cordon(nodes: &Api<Node>, names: &[String], on: bool) {
    let patch = if on {
        serde_json::json!({"spec": {"unschedulable": true}})
    } else {
        serde_json::json!({"spec": {"unschedulable": null}})
    };
    futures::stream::iter(names)
        .map(|n| {
            let (nodes, patch) = (nodes.clone(), &patch);
            async move {
                nodes
                    .patch(n, &PatchParams::default(), &Patch::Merge(patch))
                    .await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("cordon");
}

/// The latest bind among `names`, and the sorted delays from `from[name]`
/// (or from `start`) to each bind.
fn binds(
    seen: &Seen,
    prefix: &str,
    start: Instant,
    from: &HashMap<String, Instant>,
) -> (Instant, Vec<Duration>) {
    let mine = seen.bound.iter().filter(|(k, _)| k.starts_with(prefix));
    let last = mine.clone().map(|(_, at)| *at).max().unwrap_or(start);
    let mut lat: Vec<Duration> = mine
        .map(|(k, at)| at.saturating_duration_since(from.get(k).copied().unwrap_or(start)))
        .collect();
    lat.sort();
    (last, lat)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn run(s: &Server, store: &str) {
    let (n_nodes, n_pods) = (
        env("SLUICE_BENCH_NODES", 5_000),
        env("SLUICE_BENCH_PENDING", 50_000),
    );
    let phases =
        std::env::var("SLUICE_BENCH_PHASES").unwrap_or_else(|_| "pending,interleaved".into());
    let c = common::kube_client(s).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");

    // 1. The nodes.
    let per_zone = n_nodes.div_ceil(2);
    let pool = common::write(
        s,
        "pool.yaml",
        &format!(
            "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {{name: bench}}
spec:
  locations: [zone-a, zone-b]
  initialNodeCount: {per_zone}
  config: {{capacity: {{cpu: '4', memory: 16Gi}}}}
"
        ),
    );
    let t = Instant::now();
    common::ok(s, "admin", &["apply", "-f", &pool]);
    let node_list = loop {
        let list = nodes.list(&ListParams::default()).await.expect("nodes");
        let ready = list.items.iter().filter(|n| is_ready(n)).count();
        if ready >= per_zone * 2 {
            break list.items;
        }
        assert!(t.elapsed() < LIMIT, "only {ready} nodes Ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let nodes_s = t.elapsed().as_secs_f64();
    let names: Vec<String> = node_list
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();

    // The pure decision over the same Nodes and as many pods, no API: the
    // most the loop could do.
    let decide_rate = {
        let (mut view, _) =
            sluice_scheduler::Cluster::from_objects(node_list.iter(), std::iter::empty());
        let batch: Vec<Pod> = (0..n_pods).map(|i| pod("d", i)).collect();
        let t = Instant::now();
        let decided = sluice_scheduler::schedule_all(&mut view, &batch);
        let secs = t.elapsed().as_secs_f64();
        let placed = decided
            .iter()
            .filter(|(_, d)| matches!(d, sluice_scheduler::Decision::Bind { .. }))
            .count();
        assert_eq!(placed, n_pods, "the pure decision placed every pod");
        n_pods as f64 / secs
    };

    eprintln!(
        "{} nodes Ready after {nodes_s:.1} s; pure decisions {decide_rate:.0}/s",
        names.len()
    );
    let watched: Shared = Arc::default();
    let rv = pods
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let watcher = watch_pods(pods.clone(), rv, watched.clone());
    let mut rows = Vec::new();

    // 2. A backlog of pending pods, then scheduling let go.
    if phases.contains("pending") {
        cordon(&nodes, &names, true).await;
        // The scheduler's Node cache follows the cordons within a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (_, created_s) = create_pods(&pods, "p", n_pods).await;
        let t = Instant::now();
        until("every pod PodScheduled=False", || {
            let s = seen(&watched);
            s.unschedulable.len() + s.bound.len() >= n_pods
        })
        .await;
        let marked_s = t.elapsed().as_secs_f64();
        eprintln!("pending: {n_pods} pods created and marked; uncordoning");
        let (early, reports0) = {
            let s = seen(&watched);
            (s.bound.len(), s.unbound_changes)
        };
        let cpu0 = cpu_time(s.pid());
        let own0 = cpu_time(std::process::id());
        let start = Instant::now();
        cordon(&nodes, &names, false).await;
        let uncordon_s = start.elapsed().as_secs_f64();
        until("every pod bound", || seen(&watched).bound.len() >= n_pods).await;
        let cpu = cpu_time(s.pid()).saturating_sub(cpu0);
        let own = cpu_time(std::process::id()).saturating_sub(own0);
        eprintln!("pending: every pod bound");
        let (last, lat) = binds(&seen(&watched), "p", start, &HashMap::new());
        let reports = seen(&watched).unbound_changes - reports0;
        let bound_s = last.duration_since(start).as_secs_f64();
        // Binds per 5 s from the release: where the time goes.
        let mut per_5s = vec![0usize; (bound_s / 5.0) as usize + 1];
        for d in &lat {
            if let Some(b) = per_5s.get_mut((d.as_secs_f64() / 5.0) as usize) {
                *b += 1;
            }
        }
        eprintln!(
            "pending: binds per 5 s after the release: {per_5s:?}; \
             unschedulable reports of unbound pods after the release: {reports}"
        );
        let rate = (n_pods - early) as f64 / bound_s;
        let create_rate = n_pods as f64 / created_s;
        rows.push(format!(
            "pending: {n_pods} pods pending, then every Node uncordoned\n
| store | nodes Ready s | pure decisions /s (baseline) | pods created /s | all PodScheduled=False s after last create | bound before release | uncordon s | pods bound /s (ratio to decisions; to creates) | bound after release: first / p50 / last ms | controller CPU s (share of wall) | bench client CPU s |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| {store} | {nodes_s:.1} | {decide_rate:.0} | {create_rate:.0} | {marked_s:.1} | {early} | {uncordon_s:.1} | {rate:.0} ({:.3}×; {:.2}×) | {:.0} / {:.0} / {:.0} | {:.1} ({:.0} %) | {:.1} |",
            rate / decide_rate,
            rate / create_rate,
            ms(lat.first().copied().unwrap_or_default()),
            ms(pct(&lat, 0.5)),
            ms(pct(&lat, 1.0)),
            cpu.as_secs_f64(),
            100.0 * cpu.as_secs_f64() / bound_s,
            own.as_secs_f64(),
        ));
    }

    // 3. Pods created while the scheduler binds them.
    if phases.contains("interleaved") {
        let before = seen(&watched).bound.len();
        eprintln!("interleaved: creating {n_pods} pods");
        let cpu0 = cpu_time(s.pid());
        let start = Instant::now();
        let (created, created_s) = create_pods(&pods, "q", n_pods).await;
        until("every pod bound", || {
            seen(&watched).bound.len() >= before + n_pods
        })
        .await;
        let cpu = cpu_time(s.pid()).saturating_sub(cpu0);
        let (last, lat) = binds(&seen(&watched), "q", start, &created);
        let bound_s = last.duration_since(start).as_secs_f64();
        let create_rate = n_pods as f64 / created_s;
        let bind_rate = n_pods as f64 / bound_s;
        rows.push(format!(
            "interleaved: {n_pods} pods created while the scheduler binds\n
| store | pods already bound | pods created /s (baseline) | pods bound /s (ratio) | last bind after last create s | create→bind p50 / p99 ms | controller CPU s (share of wall) |
|---|---:|---:|---:|---:|---:|---:|
| {store} | {before} | {create_rate:.0} | {bind_rate:.0} ({:.2}×) | {:.2} | {:.0} / {:.0} | {:.1} ({:.0} %) |",
            bind_rate / create_rate,
            bound_s - created_s,
            ms(pct(&lat, 0.5)),
            ms(pct(&lat, 0.99)),
            cpu.as_secs_f64(),
            100.0 * cpu.as_secs_f64() / bound_s,
        ));
    }
    watcher.abort();
    // Let the loops settle (status writes, slices) before reading RSS.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss = rss_mib(s.pid());

    for r in rows {
        println!("{r}\n");
    }
    println!("{n_nodes} sim nodes, {n_pods} pods per phase, client concurrency {CONCURRENCY}; controller RSS at the end {rss:.0} MiB");
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let stores = std::env::var("SLUICE_BENCH_STORES").unwrap_or_else(|_| "embedded".into());
    let args = ["--controllers=true", "--node-provider", "sim:0"];
    for store in stores.split(',').map(str::trim) {
        match store {
            "embedded" => {
                let s = Server::start_on("bench-cl-emb", Backend::Embedded, &args);
                rt.block_on(run(&s, "embedded"));
            }
            "etcd" => {
                let s = Server::start_on("bench-cl-etcd", Backend::Etcd, &args);
                rt.block_on(run(&s, "etcd"));
            }
            other => panic!("SLUICE_BENCH_STORES: {other:?} is not embedded or etcd"),
        }
    }
}
