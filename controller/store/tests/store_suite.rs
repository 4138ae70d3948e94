//! One behaviour per function, run on both stores: the embedded redb file
//! and a real etcd started for the test.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sluice_store::testing::EtcdServer;
use sluice_store::{
    EtcdStore, Event, EventKind, ListOptions, RedbOptions, RedbStore, Revision, Store, StoreError,
    WatchCache, WatchCacheOptions, WatchStream, Write,
};

/// Bound on any wait for watch events (not a timing assertion: a stuck
/// watch fails the test instead of hanging it).
const WAIT: Duration = Duration::from_secs(60);

/// What keeps a store alive: its file's directory or its etcd.
type Backing = Box<dyn std::any::Any + Send>;

async fn redb() -> (Arc<dyn Store>, Backing) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = RedbStore::open(dir.path().join("store.redb"), RedbOptions::default())
        .expect("open redb store");
    (Arc::new(store), Box::new(dir))
}

async fn etcd() -> (Arc<dyn Store>, Backing) {
    let server = EtcdServer::start().await.expect("start etcd");
    let store = EtcdStore::connect(&[server.endpoint().to_owned()])
        .await
        .expect("connect to etcd");
    (Arc::new(store), Box::new(server))
}

/// A store behind the watch cache: the same contract (issue 9: the
/// watch fan-out keeps events in order, none lost).
async fn cached(backend: (Arc<dyn Store>, Backing)) -> (Arc<dyn Store>, Backing) {
    let (store, backing) = backend;
    let cache = WatchCache::start(store, "/registry/", WatchCacheOptions::default())
        .await
        .expect("start the watch cache");
    (Arc::new(cache), backing)
}

async fn cached_redb() -> (Arc<dyn Store>, Backing) {
    cached(redb().await).await
}

async fn cached_etcd() -> (Arc<dyn Store>, Backing) {
    cached(etcd().await).await
}

async fn next_events(w: &mut WatchStream, n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let item = tokio::time::timeout(WAIT, w.next())
            .await
            .unwrap_or_else(|_| panic!("no event after {} of {n}", out.len()))
            .expect("watch ended early");
        out.push(std::sync::Arc::unwrap_or_clone(item.expect("watch error")));
    }
    out
}

fn page<'a>(
    prefix: &'a str,
    limit: usize,
    after: Option<&'a str>,
    at: Option<Revision>,
) -> ListOptions<'a> {
    ListOptions {
        prefix,
        limit: Some(limit),
        start_after: after,
        at_revision: at,
    }
}

async fn crud_and_conflicts(s: Arc<dyn Store>) {
    let base = s.current_revision().await.unwrap();
    let k = "/registry/pods/default/a";
    assert_eq!(s.get(k).await.unwrap(), None);

    let r1 = s.create(k, b"v1".to_vec()).await.unwrap();
    assert_eq!(r1, base + 1);
    let got = s.get(k).await.unwrap().unwrap();
    assert_eq!(
        (got.value.as_slice(), got.create_rev, got.mod_rev),
        (&b"v1"[..], r1, r1)
    );
    assert!(matches!(
        s.create(k, b"again".to_vec()).await,
        Err(StoreError::AlreadyExists { .. })
    ));

    let r2 = s.update(k, b"v2".to_vec(), r1).await.unwrap();
    assert_eq!(r2, r1 + 1);
    match s.update(k, b"stale".to_vec(), r1).await {
        Err(StoreError::Conflict {
            expected, current, ..
        }) => assert_eq!((expected, current), (r1, r2)),
        other => panic!("stale update: {other:?}"),
    }
    assert!(matches!(
        s.update("/registry/pods/default/none", b"x".to_vec(), 0)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    let got = s.get(k).await.unwrap().unwrap();
    assert_eq!(
        (got.value.as_slice(), got.create_rev, got.mod_rev),
        (&b"v2"[..], r1, r2)
    );

    assert!(matches!(
        s.delete(k, Some(r1)).await,
        Err(StoreError::Conflict { current, .. }) if current == r2
    ));
    let (r3, last) = s.delete(k, Some(r2)).await.unwrap();
    assert_eq!(
        (r3, last.value.as_slice(), last.mod_rev),
        (r2 + 1, &b"v2"[..], r2)
    );
    assert_eq!(s.get(k).await.unwrap(), None);
    assert!(matches!(
        s.delete(k, None).await,
        Err(StoreError::NotFound { .. })
    ));

    // Re-created: a new create revision. Refused writes moved nothing.
    let r4 = s.create(k, b"v3".to_vec()).await.unwrap();
    assert_eq!(r4, r3 + 1);
    assert_eq!(s.get(k).await.unwrap().unwrap().create_rev, r4);
    let (r5, _) = s.delete(k, None).await.unwrap();
    assert_eq!(s.current_revision().await.unwrap(), r5);
}

async fn list_pages_at_a_fixed_revision(s: Arc<dyn Store>) {
    let prefix = "/registry/pods/";
    for i in 0..10 {
        s.create(&format!("{prefix}ns/p{i}"), format!("v{i}").into_bytes())
            .await
            .unwrap();
    }
    // Neighbours that must never show up.
    s.create("/registry/pods", b"x".to_vec()).await.unwrap();
    s.create("/registry/podsx/ns/q", b"x".to_vec())
        .await
        .unwrap();
    s.create("/registry/services/ns/s", b"x".to_vec())
        .await
        .unwrap();

    let first = s.list(page(prefix, 4, None, None)).await.unwrap();
    let at = first.revision;
    assert_eq!(at, s.current_revision().await.unwrap());
    assert!(first.more);
    let mut seen: Vec<(String, Vec<u8>)> = first
        .items
        .iter()
        .map(|k| (k.key.clone(), k.value.clone()))
        .collect();

    // Changes after the first page, which later pages must not see.
    let p5 = s.get(&format!("{prefix}ns/p5")).await.unwrap().unwrap();
    s.update(&p5.key, b"changed".to_vec(), p5.mod_rev)
        .await
        .unwrap();
    s.delete(&format!("{prefix}ns/p7"), None).await.unwrap();
    s.delete(&format!("{prefix}ns/p1"), None).await.unwrap();
    s.create(&format!("{prefix}ns/p55"), b"new".to_vec())
        .await
        .unwrap();
    s.create(&format!("{prefix}zz/p0"), b"new".to_vec())
        .await
        .unwrap();

    let mut last = first.items.last().map(|k| k.key.clone());
    loop {
        let next = s
            .list(page(prefix, 4, last.as_deref(), Some(at)))
            .await
            .unwrap();
        assert_eq!(next.revision, at);
        seen.extend(next.items.iter().map(|k| (k.key.clone(), k.value.clone())));
        last = next.items.last().map(|k| k.key.clone());
        if !next.more {
            break;
        }
    }
    let want: Vec<(String, Vec<u8>)> = (0..10)
        .map(|i| (format!("{prefix}ns/p{i}"), format!("v{i}").into_bytes()))
        .collect();
    assert_eq!(
        seen, want,
        "the pages at revision {at} are the state at {at}"
    );

    // Unpaged at the old revision: the same; now: the new state.
    let whole = s
        .list(ListOptions {
            prefix,
            ..Default::default()
        })
        .await
        .unwrap();
    let now: Vec<&str> = whole.items.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(now.len(), 10);
    assert!(now.contains(&"/registry/pods/ns/p55") && !now.contains(&"/registry/pods/ns/p7"));
    let old = s
        .list(ListOptions {
            prefix,
            at_revision: Some(at),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(old.items.len(), 10);
    assert!(!old.more);
    let p5_then = old.items.iter().find(|k| k.key.ends_with("/p5")).unwrap();
    assert_eq!(p5_then.mod_rev, p5.mod_rev);

    let future = s.current_revision().await.unwrap() + 10;
    assert!(matches!(
        s.list(ListOptions {
            prefix,
            at_revision: Some(future),
            ..Default::default()
        })
        .await,
        Err(StoreError::FutureRevision { .. })
    ));
}

async fn watch_replays_in_order_with_concurrent_writers(s: Arc<dyn Store>) {
    const WRITERS: usize = 4;
    const EACH: usize = 25;
    let prefix = "/registry/configmaps/";
    s.create("/registry/other/before", b"x".to_vec())
        .await
        .unwrap();
    let from = s.current_revision().await.unwrap();

    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("/registry/configmaps/ns/w{w}");
            let mut rev = s.create(&key, b"0".to_vec()).await.unwrap();
            for i in 1..EACH {
                rev = s
                    .update(&key, i.to_string().into_bytes(), rev)
                    .await
                    .unwrap();
                // Writes elsewhere interleave and must be filtered out.
                if i % 5 == 0 {
                    s.create(&format!("/registry/other/w{w}-{i}"), vec![])
                        .await
                        .unwrap();
                }
            }
            s.delete(&key, Some(rev)).await.unwrap();
        }));
    }
    // Started while the writers run: replay, then live, with no seam.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut w = s.watch(prefix, from).await.unwrap();
    let events = next_events(&mut w, WRITERS * (EACH + 1)).await;
    for t in tasks {
        t.await.unwrap();
    }

    assert!(events.iter().all(|e| e.key.starts_with(prefix)));
    assert!(
        events.windows(2).all(|p| p[0].mod_rev < p[1].mod_rev),
        "in revision order"
    );
    assert!(events[0].mod_rev > from);
    for wr in 0..WRITERS {
        let key = format!("/registry/configmaps/ns/w{wr}");
        let mine: Vec<&Event> = events.iter().filter(|e| e.key == key).collect();
        assert_eq!(mine.len(), EACH + 1);
        assert_eq!(mine[0].prev_value, None);
        for (i, e) in mine[..EACH].iter().enumerate() {
            assert_eq!(
                (e.kind, e.value.clone()),
                (EventKind::Put, i.to_string().into_bytes())
            );
            if i > 0 {
                assert_eq!(e.prev_value, Some((i - 1).to_string().into_bytes()));
            }
        }
        let del = mine[EACH];
        assert_eq!(del.kind, EventKind::Delete);
        assert_eq!(del.prev_value, Some((EACH - 1).to_string().into_bytes()));
    }

    // From a revision in the middle: exactly the events after it.
    let mid = events[events.len() / 2].mod_rev;
    let mut w2 = s.watch(prefix, mid).await.unwrap();
    let rest = next_events(&mut w2, events.len() - events.len() / 2 - 1).await;
    assert_eq!(rest.as_slice(), &events[events.len() / 2 + 1..]);
}

async fn compaction_refuses_old_revisions(s: Arc<dyn Store>) {
    let k = "/registry/leases/ns/l";
    let mut rev = s.create(k, b"0".to_vec()).await.unwrap();
    let early = rev;
    for i in 1..10 {
        rev = s.update(k, i.to_string().into_bytes(), rev).await.unwrap();
    }
    let compact_at = rev - 3;
    s.compact(compact_at).await.unwrap();
    // Compacting again, or less, changes nothing.
    s.compact(compact_at).await.unwrap();
    s.compact(early).await.unwrap();

    let at = |r| ListOptions {
        prefix: "/registry/leases/",
        at_revision: Some(r),
        ..Default::default()
    };
    let ok = s.list(at(compact_at)).await.unwrap();
    assert_eq!(ok.items[0].mod_rev, compact_at);
    match s.list(at(compact_at - 1)).await {
        Err(StoreError::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!(requested, compact_at - 1);
            assert!(compacted >= compact_at, "compacted {compacted}");
        }
        other => panic!("list below the compaction: {other:?}"),
    }

    let mut old = s.watch("/registry/leases/", early).await.unwrap();
    match tokio::time::timeout(WAIT, old.next())
        .await
        .expect("no answer")
    {
        Some(Err(StoreError::Compacted { compacted, .. })) => assert!(compacted >= compact_at),
        other => panic!("watch below the compaction: {other:?}"),
    }
    assert!(tokio::time::timeout(WAIT, old.next())
        .await
        .expect("not ended")
        .is_none());

    let mut fine = s.watch("/registry/leases/", compact_at).await.unwrap();
    let got = next_events(&mut fine, 3).await;
    assert_eq!(
        got.iter().map(|e| e.mod_rev).collect::<Vec<_>>(),
        vec![rev - 2, rev - 1, rev]
    );

    assert!(matches!(
        s.compact(rev + 5).await,
        Err(StoreError::FutureRevision { .. })
    ));
}

async fn a_watcher_keeps_up_across_many_writes(s: Arc<dyn Store>) {
    const WRITES: usize = 1500;
    let from = s.current_revision().await.unwrap();
    let mut w = s.watch("/registry/events/", from).await.unwrap();
    let writer = {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..WRITES {
                s.create(&format!("/registry/events/ns/e{i:05}"), vec![b'x'; 64])
                    .await
                    .unwrap();
            }
        })
    };
    let events = next_events(&mut w, WRITES).await;
    writer.await.unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.key, format!("/registry/events/ns/e{i:05}"));
        assert_eq!(e.mod_rev, from + 1 + i as Revision);
    }
}

/// One `#[tokio::test]` per behaviour and backend: `backend::behaviour`.
/// A list larger than one etcd response may carry (gRPC's 4 MiB): 3 000
/// values of 2 KiB, whole and with a limit past the store's own chunk.
async fn a_list_larger_than_one_response(s: Arc<dyn Store>) {
    let value = vec![b'v'; 2048];
    for i in 0..3_000 {
        s.create(&format!("/big/{i:05}"), value.clone())
            .await
            .expect("create");
    }
    let all = s
        .list(ListOptions {
            prefix: "/big/",
            limit: None,
            start_after: None,
            at_revision: None,
        })
        .await
        .expect("list all");
    assert_eq!(all.items.len(), 3_000);
    assert!(!all.more);
    assert!(
        all.items.windows(2).all(|w| w[0].key < w[1].key),
        "key order"
    );
    let first = s
        .list(page("/big/", 1_500, None, None))
        .await
        .expect("page");
    assert_eq!(first.items.len(), 1_500);
    assert!(first.more);
    let last = first.items.last().map(|kv| kv.key.clone());
    let rest = s
        .list(page("/big/", 2_000, last.as_deref(), Some(first.revision)))
        .await
        .expect("rest");
    assert_eq!(rest.items.len(), 1_500);
    assert!(!rest.more);
}

fn create(key: &str, value: &str) -> Write {
    Write::Create {
        key: key.into(),
        value: value.into(),
    }
}

/// A transaction writes all its keys or none, names the write refused,
/// and a watcher sees its writes only once they are all made.
async fn transactions_are_all_or_nothing(s: Arc<dyn Store>) {
    let start = s.current_revision().await.expect("revision");
    let mut w = s.watch("/registry/txn/", start).await.expect("watch");
    let a = s
        .create("/registry/txn/a", b"a1".to_vec())
        .await
        .expect("a");
    // One key exists: nothing of the transaction is written.
    let refused = s
        .txn(vec![
            create("/sluice/txn/x", "x"),
            create("/registry/txn/a", "again"),
        ])
        .await
        .expect_err("a exists");
    assert!(
        matches!(&refused, StoreError::AlreadyExists { key } if key == "/registry/txn/a"),
        "{refused:?}"
    );
    assert!(s.get("/sluice/txn/x").await.expect("get").is_none());
    // A stale update refuses the whole transaction too.
    let stale = s
        .txn(vec![
            create("/sluice/txn/x", "x"),
            Write::Update {
                key: "/registry/txn/a".into(),
                value: b"a2".to_vec(),
                expected_mod_rev: a - 1,
            },
        ])
        .await
        .expect_err("stale");
    assert!(matches!(stale, StoreError::Conflict { .. }), "{stale:?}");
    assert!(s.get("/sluice/txn/x").await.expect("get").is_none());
    // Everything in order: every key written.
    let revs = s
        .txn(vec![
            Write::Update {
                key: "/registry/txn/a".into(),
                value: b"a2".to_vec(),
                expected_mod_rev: a,
            },
            create("/sluice/txn/x", "x"),
            create("/sluice/txn/y", "y"),
        ])
        .await
        .expect("txn");
    assert_eq!(revs.len(), 3);
    assert!(revs.iter().all(|r| *r > a));
    let got = s.get("/registry/txn/a").await.expect("get").expect("a");
    assert_eq!((got.value.as_slice(), got.mod_rev), (&b"a2"[..], revs[0]));
    assert_eq!(
        s.current_revision().await.expect("rev"),
        *revs.iter().max().unwrap()
    );
    // Deletes with and without a revision, and a missing key refused.
    let x = s.get("/sluice/txn/x").await.expect("get").expect("x");
    let missing = s
        .txn(vec![
            Write::Delete {
                key: "/sluice/txn/x".into(),
                expected_mod_rev: Some(x.mod_rev),
            },
            Write::Delete {
                key: "/sluice/txn/nothing".into(),
                expected_mod_rev: None,
            },
        ])
        .await
        .expect_err("missing");
    assert!(
        matches!(missing, StoreError::NotFound { .. }),
        "{missing:?}"
    );
    s.txn(vec![
        Write::Delete {
            key: "/sluice/txn/x".into(),
            expected_mod_rev: Some(x.mod_rev),
        },
        Write::Delete {
            key: "/sluice/txn/y".into(),
            expected_mod_rev: None,
        },
    ])
    .await
    .expect("deletes");
    assert!(s.get("/sluice/txn/y").await.expect("get").is_none());
    // A key twice is refused before anything is sent.
    assert!(matches!(
        s.txn(vec![create("/k", "1"), create("/k", "2")]).await,
        Err(StoreError::InvalidRequest(_))
    ));
    // Two keys under the watched prefix in one transaction: both are
    // events (on etcd they share a revision, and the watch cache passed on
    // only the first of a revision's events before).
    s.txn(vec![
        create("/registry/txn/b", "b1"),
        create("/registry/txn/c", "c1"),
    ])
    .await
    .expect("two watched keys");
    // The watcher under /registry/ saw the create, the one update and
    // both keys of the last transaction.
    let evs = next_events(&mut w, 4).await;
    assert_eq!(
        evs.iter().map(|e| e.value.clone()).collect::<Vec<_>>(),
        vec![
            b"a1".to_vec(),
            b"a2".to_vec(),
            b"b1".to_vec(),
            b"c1".to_vec()
        ]
    );
}

/// Concurrent transactions creating the same key: exactly one wins.
async fn concurrent_transactions_claim_a_key_once(s: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for i in 0..20 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.txn(vec![
                create(&format!("/registry/claim/svc{i}"), "svc"),
                create("/sluice/claim/ip", &format!("{i}")),
            ])
            .await
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => won += 1,
            Err(StoreError::AlreadyExists { key }) => assert_eq!(key, "/sluice/claim/ip"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
    let page = s
        .list(ListOptions {
            prefix: "/registry/claim/",
            ..ListOptions::default()
        })
        .await
        .expect("list");
    assert_eq!(page.items.len(), 1);
}

macro_rules! suite {
    ([$($backend:ident),*] $behaviours:tt) => {
        $(suite!(@backend $backend $behaviours);)*
    };
    (@backend $backend:ident [$($behaviour:ident),* $(,)?]) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    let (s, _backing) = super::$backend().await;
                    super::$behaviour(s).await;
                }
            )*
        }
    };
}

suite!(
    [redb, etcd]
    [
        crud_and_conflicts,
        list_pages_at_a_fixed_revision,
        watch_replays_in_order_with_concurrent_writers,
        compaction_refuses_old_revisions,
        a_watcher_keeps_up_across_many_writes,
        a_list_larger_than_one_response,
        transactions_are_all_or_nothing,
        concurrent_transactions_claim_a_key_once,
    ]
);

// The watch cache serves a watch from any revision its window holds, even
// one the store has compacted since (as kube-apiserver's watch cache does),
// so `compaction_refuses_old_revisions` is the bare stores' alone.
suite!(
    [cached_redb, cached_etcd]
    [
        crud_and_conflicts,
        list_pages_at_a_fixed_revision,
        watch_replays_in_order_with_concurrent_writers,
        a_watcher_keeps_up_across_many_writes,
        a_list_larger_than_one_response,
        transactions_are_all_or_nothing,
        concurrent_transactions_claim_a_key_once,
    ]
);
