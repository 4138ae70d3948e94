//! kube-rs, unchanged, against the server: its client writes Pods and its
//! watcher (what every kube-rs controller runs on) follows them through a
//! compaction of the store and a `kill -9` restart of the controller, and
//! ends up with exactly what the server holds: no event missed, none
//! invented. The compaction makes the watcher's resume fail with the
//! in-stream 410 it relists on.

#[macro_use]
mod common;
use common::{start_etcd, Backend, Server};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use sluice_model::k8s::Pod;

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }))
    .expect("pod")
}

#[test]
fn the_watcher_misses_nothing_through_compaction_and_restart() {
    let etcd = start_etcd();
    let mut s = Server::start_with("kube", Some(etcd.endpoint()), Some("k"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let endpoint = etcd.endpoint().to_string();

    // What the watcher believes exists: name → resourceVersion.
    let seen: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    // Completed (re)lists: 1 at start, 2 once the 410 made it relist.
    let lists = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listed = lists.clone();
    let api: Api<Pod> =
        rt.block_on(async { Api::namespaced(common::kube_client(&s).await, "default") });
    let view = seen.clone();
    let watch_api = api.clone();
    let watching = rt.spawn(async move {
        let mut stream = watcher(watch_api, watcher::Config::default()).boxed();
        let mut fresh: Option<BTreeMap<String, String>> = None;
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else { continue };
            let name_rv = |p: &Pod| {
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    p.metadata.resource_version.clone().unwrap_or_default(),
                )
            };
            let mut v = view.lock().unwrap_or_else(|p| p.into_inner());
            match ev {
                watcher::Event::Apply(p) => {
                    let (n, rv) = name_rv(&p);
                    v.insert(n, rv);
                }
                watcher::Event::Delete(p) => {
                    v.remove(&name_rv(&p).0);
                }
                watcher::Event::Init => fresh = Some(BTreeMap::new()),
                watcher::Event::InitApply(p) => {
                    let (n, rv) = name_rv(&p);
                    fresh.get_or_insert_with(BTreeMap::new).insert(n, rv);
                }
                watcher::Event::InitDone => {
                    // A relist replaces the whole view.
                    *v = fresh.take().unwrap_or_default();
                    listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    });

    let names = |from: usize, to: usize| (from..to).map(|i| format!("p{i}")).collect::<Vec<_>>();
    rt.block_on(async {
        for n in names(0, 10) {
            api.create(&PostParams::default(), &pod(&n))
                .await
                .expect("create");
        }
    });
    // Kill the controller, so the watcher must resume; meanwhile the store
    // moves on and forgets the history it would resume from.
    s.kill9();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([endpoint.as_str()], None)
            .await
            .expect("etcd");
        for i in 0..5 {
            c.put(format!("/elsewhere/{i}"), "x", None)
                .await
                .expect("put");
        }
        let rev = c
            .get("x", None)
            .await
            .expect("get")
            .header()
            .map_or(0, |h| h.revision());
        c.compact(rev, None).await.expect("compact");
    });
    s.respawn();
    rt.block_on(async {
        for n in names(10, 15) {
            api.create(&PostParams::default(), &pod(&n))
                .await
                .expect("create after restart");
        }
        api.delete("p0", &DeleteParams::default())
            .await
            .expect("delete");
    });

    // The watcher converges on exactly what the server lists.
    let truth: BTreeMap<String, String> = rt.block_on(async {
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(|p| {
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    p.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    });
    assert_eq!(truth.len(), 14, "{truth:?}");
    let start = Instant::now();
    loop {
        let v = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if v == truth {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the watcher did not converge:\nwatcher {v:?}\nserver  {truth:?}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        lists.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the watcher relisted after the 410"
    );
    watching.abort();
}

on_both_stores!(racing_patches_all_land);

/// Patches that name no resourceVersion, racing on one object: each is
/// applied again to what is stored when its write loses the race, as
/// kube-apiserver does, so none answers 409 and every label is kept. One
/// that names a stale version is a precondition and gets its 409.
fn racing_patches_all_land(backend: Backend) {
    let s = Server::start(&format!("race-{backend:?}").to_lowercase(), backend);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let api: Api<Pod> = Api::namespaced(common::kube_client(&s).await, "default");
        let created = api
            .create(&PostParams::default(), &pod("raced"))
            .await
            .expect("create");
        let stale = created
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let n = 24;
        let results = futures::future::join_all((0..n).map(|i| {
            let api = api.clone();
            async move {
                let p = serde_json::json!({"metadata": {"labels": {format!("l{i}"): "x"}}});
                api.patch("raced", &PatchParams::default(), &Patch::Merge(&p))
                    .await
            }
        }))
        .await;
        for r in &results {
            assert!(r.is_ok(), "{r:?}\n{}", s.log());
        }
        let got = api.get("raced").await.expect("get");
        let labels = got.metadata.labels.unwrap_or_default();
        assert_eq!(labels.len(), n, "{labels:?}");

        let pinned =
            serde_json::json!({"metadata": {"resourceVersion": stale, "labels": {"late": "x"}}});
        match api
            .patch("raced", &PatchParams::default(), &Patch::Merge(&pinned))
            .await
        {
            Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (409, "Conflict")),
            other => panic!("a patch with a stale resourceVersion: {other:?}"),
        }
    });
}
