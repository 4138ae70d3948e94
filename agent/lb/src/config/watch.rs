//! The configuration from the API server (`--kubeconfig`): a kube-rs
//! watcher and reflector per kind, read as dynamic objects (the load
//! balancer's identity may only get, list and watch these four kinds), and
//! a task that joins them again after each burst of changes and hands the
//! result over through a `watch` channel. Faults are logged when they
//! appear and when they go away, not at every build.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use super::join::join;
use super::objects::{read_all, Fault, Kind};
use super::LbConfig;

/// Changes closer together than this are joined once.
const SETTLE: Duration = Duration::from_millis(100);

struct Stores {
    lbs: Store<DynamicObject>,
    checks: Store<DynamicObject>,
    negs: Store<DynamicObject>,
    groups: Store<DynamicObject>,
}

/// Starts the watchers and the joiner on the current runtime. The
/// receiver sees `None` until every kind's initial list is in.
pub fn spawn(
    client: Client,
) -> (
    watch::Receiver<Option<LbConfig>>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let changed = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    let mut store = |kind| reflect(&client, kind, &changed, &mut tasks);
    let stores = Stores {
        lbs: store(Kind::L4LoadBalancer),
        checks: store(Kind::HealthCheck),
        negs: store(Kind::NetworkEndpointGroup),
        groups: store(Kind::InstanceGroup),
    };
    let (tx, rx) = watch::channel(None);
    tasks.push(tokio::spawn(join_loop(stores, changed, tx)));
    (rx, tasks)
}

fn reflect(
    client: &Client,
    kind: Kind,
    changed: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<DynamicObject> {
    let ar = kind.api_resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let writer = reflector::store::Writer::new(ar);
    let reader = writer.as_reader();
    let changed = changed.clone();
    let run = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o: &mut DynamicObject| o.metadata.managed_fields = None)
        .reflect(writer)
        .for_each(move |ev| {
            match ev {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))
                | Ok(watcher::Event::InitDone) => changed.notify_one(),
                Ok(_) => {}
                Err(e) => warn!(kind = kind.name(), error = %e, "watch failed; retrying"),
            }
            std::future::ready(())
        });
    tasks.push(tokio::spawn(run));
    reader
}

async fn join_loop(stores: Stores, changed: Arc<Notify>, tx: watch::Sender<Option<LbConfig>>) {
    for s in [&stores.lbs, &stores.checks, &stores.negs, &stores.groups] {
        if s.wait_until_ready().await.is_err() {
            return;
        }
    }
    let mut reported = BTreeSet::new();
    loop {
        let (lbs, checks, negs, groups) = (
            stores.lbs.state(),
            stores.checks.state(),
            stores.negs.state(),
            stores.groups.state(),
        );
        let (objects, mut faults) = read_all(
            lbs.iter().map(|o| &**o),
            checks.iter().map(|o| &**o),
            negs.iter().map(|o| &**o),
            groups.iter().map(|o| &**o),
        );
        let (config, join_faults) = join(&objects);
        faults.extend(join_faults);
        reported = report(reported, faults);
        tx.send_if_modified(|old| {
            let new = Some(config);
            let differs = *old != new;
            *old = new;
            differs
        });
        if tx.is_closed() {
            return;
        }
        changed.notified().await;
        // A burst of changes (a Service's NEGs written one by one) is
        // joined once.
        loop {
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep(SETTLE) => break,
            }
        }
    }
}

/// Logs faults that are new and those that went away; returns the set now.
fn report(before: BTreeSet<Fault>, now: Vec<Fault>) -> BTreeSet<Fault> {
    let now: BTreeSet<Fault> = now.into_iter().collect();
    for f in now.difference(&before) {
        warn!(object = %f.object, "left out: {}", f.reason);
    }
    for f in before.difference(&now) {
        info!(object = %f.object, "no longer left out (was: {})", f.reason);
    }
    now
}
