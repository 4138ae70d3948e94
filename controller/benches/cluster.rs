//! The controller's loops at scale, through the API, in one process:
//! `cargo bench -p sluice-controller --bench cluster`
//! (`SLUICE_BENCH_NODES`, default 5 000 `sim` nodes in two zones, and
//! `SLUICE_BENCH_PENDING`, default 50 000 pods; `SLUICE_BENCH_STORES`:
//! `embedded` (default) or `etcd`).
//!
//! 1. A NodePool of the `sim` provider (no boot delay) makes the nodes;
//!    printed: how long until all are `Ready`.
//! 2. The pods (100m CPU, 64Mi each; 10 per node on average) are created
//!    by 64 concurrent kube-rs clients while a watch records when each is
//!    bound. Printed: the create rate (the baseline, same run: the
//!    scheduler cannot bind faster than pods arrive), the bind rate from
//!    the first create to the last bind and its ratio to the create rate,
//!    how long the last bind came after the last create, and the
//!    create→bind latency p50/p99.
//! 3. The controller's RSS with every node and pod in it, and its CPU time.

#[path = "../tests/common/mod.rs"]
#[macro_use]
#[allow(unused_macros)]
mod common;
#[path = "support/proc_stats.rs"]
mod proc_stats;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, Server};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
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

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "default",
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

async fn run(s: &Server, store: &str) {
    let (n_nodes, n_pods) = (
        env("SLUICE_BENCH_NODES", 5_000),
        env("SLUICE_BENCH_PENDING", 50_000),
    );
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
    loop {
        let list = nodes.list(&ListParams::default()).await.expect("nodes");
        let ready = list.items.iter().filter(|n| is_ready(n)).count();
        if ready >= per_zone * 2 {
            break;
        }
        assert!(t.elapsed() < LIMIT, "only {ready} nodes Ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let nodes_s = t.elapsed().as_secs_f64();
    let cpu0 = cpu_time(s.pid());

    // 2. The pods, with a watch recording each bind.
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let rv = pods
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let watcher = {
        let pods = pods.clone();
        let bound = bound.clone();
        tokio::spawn(async move {
            let mut rv = rv;
            while bound.lock().expect("lock").len() < n_pods {
                let Ok(stream) = pods.watch(&WatchParams::default().timeout(290), &rv).await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let mut stream = stream.boxed();
                while let Ok(Some(ev)) = stream.try_next().await {
                    let (WatchEvent::Added(p) | WatchEvent::Modified(p)) = ev else {
                        continue;
                    };
                    rv = p.metadata.resource_version.clone().unwrap_or_default();
                    if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        bound
                            .lock()
                            .expect("lock")
                            .entry(name)
                            .or_insert_with(Instant::now);
                    }
                    if bound.lock().expect("lock").len() >= n_pods {
                        return;
                    }
                }
            }
        })
    };
    let t = Instant::now();
    futures::stream::iter(0..n_pods)
        .map(|i| {
            let pods = pods.clone();
            let created = created.clone();
            async move {
                let p = pod(i);
                let name = format!("p{i}");
                created.lock().expect("lock").insert(name, Instant::now());
                pods.create(&PostParams::default(), &p).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("creates");
    let created_s = t.elapsed().as_secs_f64();
    tokio::time::timeout(LIMIT, watcher)
        .await
        .expect("every pod bound in time")
        .expect("watcher");
    let last_bind = bound
        .lock()
        .expect("lock")
        .values()
        .max()
        .copied()
        .unwrap_or(t);
    let bound_s = last_bind.duration_since(t).as_secs_f64();
    let mut lat: Vec<Duration> = {
        let c = created.lock().expect("lock");
        let b = bound.lock().expect("lock");
        b.iter()
            .filter_map(|(k, at)| c.get(k).map(|c0| at.saturating_duration_since(*c0)))
            .collect()
    };
    lat.sort();
    let cpu = cpu_time(s.pid()).saturating_sub(cpu0);
    // Let the loops settle (status writes, slices) before reading RSS.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss = rss_mib(s.pid());

    let create_rate = n_pods as f64 / created_s;
    let bind_rate = n_pods as f64 / bound_s;
    println!("| store | nodes Ready s | Pods created /s (baseline) | Pods bound /s (ratio) | last bind after last create s | create→bind p50 ms | p99 ms | controller CPU s | RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {store} | {nodes_s:.1} | {create_rate:.0} | {bind_rate:.0} ({:.2}×) | {:.2} | {:.1} | {:.1} | {:.1} | {rss:.0} |",
        bind_rate / create_rate,
        bound_s - created_s,
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        pct(&lat, 0.99).as_secs_f64() * 1e3,
        cpu.as_secs_f64(),
    );
    println!("{n_nodes} sim nodes, {n_pods} pods, client concurrency {CONCURRENCY}");
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
