//! The API server under load, on both stores, through kube-rs:
//! `cargo bench -p sluice-controller --bench api`
//! (`SLUICE_BENCH_SERVICES`, `SLUICE_BENCH_PODS`, `SLUICE_BENCH_WATCHERS`
//! scale it; defaults are issue 9's 10 000 Services, 100 000 Pods, 100
//! watchers; `SLUICE_BENCH_STORES=embedded` or `etcd` runs one store;
//! `SLUICE_BENCH_SERVE_BIN=PATH` serves with another build, for an A/B;
//! `SLUICE_BENCH_LISTS=N` lists the bytes N times, median printed, 3 by
//! default; `SLUICE_BENCH_CONTROLLERS=1` runs the decision loops in the
//! server too: by default it serves the API alone).
//!
//! Printed: create rates, list times (decoded by kube-rs, and the body's
//! bytes only: the server's part), write-to-event latency over the
//! watchers (p50/p99) next to the write's own acknowledgement (p50: no
//! event can come before its commit) and the server's CPU time per watched
//! write (user and system, from /proc: what load on a shared machine does
//! not change much), the controller's RSS; for etcd, the rate of plain
//! etcd puts from the same client concurrency, measured in the same run, as
//! the baseline the API's create rate is a ratio of.

#[path = "../tests/common/mod.rs"]
#[macro_use]
#[allow(unused_macros)]
mod common;
#[path = "support/proc_stats.rs"]
mod proc_stats;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, Server};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use proc_stats::{cpu_time, pct, rss_mib};
use sluice_model::k8s::{Pod, Service};

const CONCURRENCY: usize = 64;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "default", "labels": {"app": format!("a{}", i % 100)}},
        "spec": {"nodeName": format!("node-{}", i % 50), "containers": [{"name": "c", "image": "x"}]},
    }))
    .expect("pod")
}

/// A LoadBalancer without node ports: each gets a cluster IP from the test
/// bed's /16, and 10 000 node ports would not fit in 30000-32767.
fn service(i: usize) -> Service {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("s{i}"), "namespace": "default"},
        "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }))
    .expect("service")
}

struct Row {
    backend: &'static str,
    svc_rate: f64,
    pod_rate: f64,
    list_s: f64,
    list_bytes_s: f64,
    list_mb: f64,
    paged_s: f64,
    ack_p50: Duration,
    cpu_per_write: Duration,
    p50: Duration,
    p99: Duration,
    rss: f64,
    baseline_rate: Option<f64>,
}

async fn run(s: &Server, backend: &'static str, etcd: Option<&str>) -> Row {
    let (n_svc, n_pod, n_watch) = (
        env("SLUICE_BENCH_SERVICES", 10_000),
        env("SLUICE_BENCH_PODS", 100_000),
        env("SLUICE_BENCH_WATCHERS", 100),
    );
    let c = common::kube_client(s).await;
    let svcs: Api<Service> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");

    let t = Instant::now();
    futures::stream::iter(0..n_svc)
        .map(|i| {
            let svcs = svcs.clone();
            async move { svcs.create(&PostParams::default(), &service(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("services");
    let svc_rate = n_svc as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    futures::stream::iter(0..n_pod)
        .map(|i| {
            let pods = pods.clone();
            async move { pods.create(&PostParams::default(), &pod(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("pods");
    let pod_rate = n_pod as f64 / t.elapsed().as_secs_f64();

    let t = Instant::now();
    let all = pods.list(&ListParams::default()).await.expect("list");
    let list_s = t.elapsed().as_secs_f64();
    assert_eq!(all.items.len(), n_pod);
    drop(all);
    // The same list as bytes only: what the server takes to answer, without
    // the client's decoding of 100 000 typed Pods.
    // The median of a few: one list is one sample of a shared machine.
    eprintln!("{backend}: {n_pod} Pods created; listing");
    let mut times = Vec::new();
    let mut list_mb = 0.0;
    for _ in 0..env("SLUICE_BENCH_LISTS", 3).max(1) {
        let t = Instant::now();
        let req = axum::http::Request::get("/api/v1/namespaces/default/pods")
            .body(Vec::new())
            .expect("request");
        let body = c.request_text(req).await.expect("list bytes");
        times.push(t.elapsed().as_secs_f64());
        assert!(body.len() > n_pod * 100, "the whole list came back");
        list_mb = body.len() as f64 / 1e6;
    }
    times.sort_by(f64::total_cmp);
    let list_bytes_s = times[times.len() / 2];
    let t = Instant::now();
    let mut n = 0;
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = pods.list(&lp).await.expect("page");
        n += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    let paged_s = t.elapsed().as_secs_f64();
    assert_eq!(n, n_pod);

    // Watchers on one pod; each write's latency to each watcher.
    let target = "p0";
    // From the current revision: p0's own is long compacted away after
    // 100 000 writes (the embedded store keeps 20 000 revisions).
    let start_rv = pods
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let writes = 100;
    let stamps: Arc<std::sync::Mutex<Vec<(String, Instant)>>> = Arc::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    for _ in 0..n_watch {
        let pods = pods.clone();
        let tx = tx.clone();
        let rv = start_rv.clone();
        tokio::spawn(async move {
            let wp = WatchParams::default().fields(&format!("metadata.name={target}"));
            let mut st = pods.watch(&wp, &rv).await.expect("watch").boxed();
            while let Some(Ok(ev)) = st.next().await {
                if let WatchEvent::Modified(p) = ev {
                    let _ = tx.send((
                        p.metadata.resource_version.unwrap_or_default(),
                        Instant::now(),
                    ));
                }
            }
        });
    }
    drop(tx);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut acks = Vec::with_capacity(writes);
    let cpu0 = cpu_time(s.pid());
    for i in 0..writes {
        let t0 = Instant::now();
        let p = pods
            .patch(
                target,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {"seq": i.to_string()}}})),
            )
            .await
            .expect("patch");
        acks.push(t0.elapsed());
        stamps
            .lock()
            .expect("stamps")
            .push((p.metadata.resource_version.unwrap_or_default(), t0));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut lat = Vec::new();
    let cpu_per_write = (cpu_time(s.pid()) - cpu0) / writes as u32;
    let deadline = Instant::now() + Duration::from_secs(30);
    let sent: std::collections::HashMap<String, Instant> =
        stamps.lock().expect("stamps").iter().cloned().collect();
    while lat.len() < writes * n_watch && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some((rv, at))) => {
                if let Some(t0) = sent.get(&rv) {
                    lat.push(at.duration_since(*t0));
                }
            }
            _ => break,
        }
    }
    assert_eq!(lat.len(), writes * n_watch, "every watcher saw every write");
    lat.sort();
    acks.sort();

    let baseline_rate = match etcd {
        None => None,
        Some(ep) => {
            let c = etcd_client::Client::connect([ep], None)
                .await
                .expect("etcd");
            let t = Instant::now();
            futures::stream::iter(0..n_pod)
                .map(|i| {
                    let mut c = c.clone();
                    async move { c.put(format!("/bench/{i}"), vec![b'x'; 400], None).await }
                })
                .buffer_unordered(CONCURRENCY)
                .try_collect::<Vec<_>>()
                .await
                .expect("puts");
            Some(n_pod as f64 / t.elapsed().as_secs_f64())
        }
    };
    Row {
        backend,
        svc_rate,
        pod_rate,
        list_s,
        list_bytes_s,
        list_mb,
        paged_s,
        ack_p50: pct(&acks, 0.5),
        cpu_per_write,
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        rss: rss_mib(s.pid()),
        baseline_rate,
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rows = Vec::new();
    let stores = std::env::var("SLUICE_BENCH_STORES").unwrap_or_default();
    let wanted = |name: &str| stores.is_empty() || stores.split(',').any(|s| s.trim() == name);
    // The API alone by default (the test bed's `--controllers=false`), as
    // issue 9's aims are about it; SLUICE_BENCH_CONTROLLERS=1 serves with
    // the decision loops in the process too.
    let loops: &[&str] = if std::env::var_os("SLUICE_BENCH_CONTROLLERS").is_some() {
        &["--controllers=true"]
    } else {
        &[]
    };
    if wanted("embedded") {
        let s = Server::start_on("bench-emb", Backend::Embedded, loops);
        rows.push(rt.block_on(run(&s, "embedded", None)));
    }
    if wanted("etcd") {
        let etcd = common::start_etcd();
        let s = Server::start_with_args("bench-etcd", Some(etcd.endpoint()), Some("b"), loops);
        let ep = etcd.endpoint().to_string();
        rows.push(rt.block_on(run(&s, "etcd", Some(&ep))));
    }
    println!(
        "Services {}, Pods {}, watchers {}, client concurrency {CONCURRENCY}",
        env("SLUICE_BENCH_SERVICES", 10_000),
        env("SLUICE_BENCH_PODS", 100_000),
        env("SLUICE_BENCH_WATCHERS", 100)
    );
    println!("| store | Services/s | Pods/s (ratio to etcd puts) | list all Pods s (bytes only; MB) | paged (500) s | write ack p50 ms | write→event p50 ms | p99 ms | server CPU ms per watched write | controller RSS MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let ratio = r.baseline_rate.map_or(String::new(), |b| {
            format!(" ({:.2}; etcd puts {:.0}/s)", r.pod_rate / b, b)
        });
        println!(
            "| {} | {:.0} | {:.0}{} | {:.2} ({:.2}; {:.0}) | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
            r.backend,
            r.svc_rate,
            r.pod_rate,
            ratio,
            r.list_s,
            r.list_bytes_s,
            r.list_mb,
            r.paged_s,
            r.ack_p50.as_secs_f64() * 1e3,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.cpu_per_write.as_secs_f64() * 1e3,
            r.rss
        );
    }
}
