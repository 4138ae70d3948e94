//! What only the embedded store has: its file across reopening, and its
//! automatic compaction (a window of revisions) with the watchers it
//! leaves behind.

use std::time::Duration;

use futures::StreamExt;
use sluice_store::{ListOptions, RedbOptions, RedbStore, Revision, Store, StoreError, WatchStream};

const WAIT: Duration = Duration::from_secs(60);

async fn next(
    w: &mut WatchStream,
) -> Option<sluice_store::Result<std::sync::Arc<sluice_store::Event>>> {
    tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch stuck")
}

async fn write_n(s: &RedbStore, prefix: &str, n: usize) -> Revision {
    let mut rev = 0;
    for i in 0..n {
        rev = s
            .create(&format!("{prefix}{i:04}"), vec![b'v'; 8])
            .await
            .unwrap();
    }
    rev
}

#[tokio::test]
async fn revisions_and_history_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    {
        let s = RedbStore::open(&path, RedbOptions::default()).unwrap();
        assert_eq!(write_n(&s, "/registry/pods/ns/p", 5).await, 5);
    }
    let s = RedbStore::open(&path, RedbOptions::default()).unwrap();
    assert_eq!(s.current_revision().await.unwrap(), 5);
    let mut w = s.watch("/registry/pods/", 0).await.unwrap();
    for rev in 1..=5 {
        assert_eq!(next(&mut w).await.unwrap().unwrap().mod_rev, rev);
    }
    assert_eq!(s.create("/registry/pods/ns/new", vec![]).await.unwrap(), 6);
    assert_eq!(next(&mut w).await.unwrap().unwrap().mod_rev, 6);
}

#[tokio::test]
async fn automatic_compaction_keeps_a_window_of_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RedbOptions {
        keep_revisions: 10,
        ..RedbOptions::default()
    };
    let s = RedbStore::open(dir.path().join("store.redb"), opts).unwrap();
    let last = write_n(&s, "/registry/pods/ns/p", 30).await;
    let at = |r| ListOptions {
        prefix: "/registry/pods/",
        at_revision: Some(r),
        ..Default::default()
    };
    // The window is the last 10 revisions: 21..=30.
    assert_eq!(s.list(at(last - 9)).await.unwrap().items.len(), 21);
    assert!(matches!(
        s.list(at(last - 10)).await,
        Err(StoreError::Compacted { compacted, .. }) if compacted == last - 9
    ));
    let mut w = s.watch("/registry/pods/", last - 9).await.unwrap();
    assert_eq!(next(&mut w).await.unwrap().unwrap().mod_rev, last - 8);
    let mut old = s.watch("/registry/pods/", 5).await.unwrap();
    assert!(matches!(
        next(&mut old).await,
        Some(Err(StoreError::Compacted { .. }))
    ));
    assert!(next(&mut old).await.is_none());
}

#[tokio::test]
async fn a_watcher_left_behind_gets_compacted_not_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RedbOptions {
        keep_revisions: 10,
        ..RedbOptions::default()
    };
    let s = RedbStore::open(dir.path().join("store.redb"), opts).unwrap();
    let mut w = s.watch("/registry/", 0).await.unwrap();
    s.create("/registry/a", vec![]).await.unwrap();
    assert_eq!(next(&mut w).await.unwrap().unwrap().mod_rev, 1);
    // The watcher does not read while 50 writes go by.
    write_n(&s, "/registry/b", 50).await;
    match next(&mut w).await {
        Some(Err(StoreError::Compacted {
            requested,
            compacted,
        })) => assert_eq!((requested, compacted), (1, 42)),
        other => panic!("a watcher left behind got {other:?}"),
    }
    assert!(next(&mut w).await.is_none());
}

#[tokio::test]
async fn a_second_open_of_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let _first = RedbStore::open(&path, RedbOptions::default()).unwrap();
    let err = RedbStore::open(&path, RedbOptions::default())
        .err()
        .expect("two stores on one file");
    assert!(matches!(err, StoreError::Redb(_)), "{err}");
}

/// Group commit (issue 9: embedded writes were one fsync each): many
/// concurrent writes, several on the same key with the same expected
/// revision. Each gets its own outcome (exactly one update per key wins,
/// the others get `Conflict`, a create of an existing key `AlreadyExists`),
/// revisions are distinct and without holes, and every acknowledged write
/// is in the file when it is opened again after the store is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_commit_together_each_with_its_own_outcome() {
    const KEYS: usize = 20;
    const RACERS: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let mut acknowledged = std::collections::BTreeMap::new();
    {
        let s = RedbStore::open(&path, RedbOptions::default()).unwrap();
        let base = write_n(&s, "/registry/pods/ns/k", KEYS).await;
        let mut tasks = Vec::new();
        for k in 0..KEYS {
            for r in 0..RACERS {
                let s = s.clone();
                let expected = base - (KEYS - 1 - k) as Revision;
                tasks.push(tokio::spawn(async move {
                    let key = format!("/registry/pods/ns/k{k:04}");
                    let value = format!("racer {r}").into_bytes();
                    let out = s.update(&key, value.clone(), expected).await;
                    (key, value, out)
                }));
            }
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("/registry/pods/ns/k{k:04}");
                (
                    key,
                    vec![],
                    s.create(&format!("/registry/pods/ns/k{k:04}"), vec![])
                        .await,
                )
            }));
        }
        let mut revs = Vec::new();
        let mut winners = std::collections::BTreeMap::new();
        for t in tasks {
            let (key, value, out) = t.await.unwrap();
            match out {
                Ok(rev) => {
                    revs.push(rev);
                    assert!(
                        winners.insert(key.clone(), rev).is_none(),
                        "two winners on {key}"
                    );
                    acknowledged.insert(key, (value, rev));
                }
                Err(StoreError::Conflict { .. }) => assert!(!value.is_empty()),
                Err(StoreError::AlreadyExists { .. }) => assert!(value.is_empty()),
                Err(e) => panic!("unexpected {e}"),
            }
        }
        revs.sort();
        let expected: Vec<Revision> = (base + 1..=base + KEYS as Revision).collect();
        assert_eq!(
            revs, expected,
            "one revision per acknowledged write, no holes"
        );
    }
    let s = RedbStore::open(&path, RedbOptions::default()).unwrap();
    for (key, (value, rev)) in acknowledged {
        let kv = s.get(&key).await.unwrap().expect("acknowledged write kept");
        assert_eq!((kv.value, kv.mod_rev), (value, rev));
    }
    let all = s
        .list(ListOptions {
            prefix: "/registry/pods/",
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.items.len(), KEYS);
}
