//! The watch cache (issue 9: "a write reaches 100 watchers"): one store
//! watch fanned out to many watchers, a window of recent events for
//! watchers that resume, and slow watchers ended rather than waited for or
//! silently skipped.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sluice_store::{
    Event, RedbOptions, RedbStore, Revision, Store, StoreError, WatchCache, WatchCacheOptions,
    WatchStream,
};

/// Bound on any wait (not a timing assertion: a stuck watch fails the
/// test instead of hanging it).
const WAIT: Duration = Duration::from_secs(60);

async fn store(
    keep_revisions: i64,
    opts: WatchCacheOptions,
) -> (Arc<RedbStore>, WatchCache, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let redb = RedbOptions {
        keep_revisions,
        ..RedbOptions::default()
    };
    let bare = Arc::new(RedbStore::open(dir.path().join("store.redb"), redb).expect("open"));
    let cache = WatchCache::start(bare.clone(), "/registry/", opts)
        .await
        .expect("start the cache");
    (bare, cache, dir)
}

async fn next(w: &mut WatchStream) -> Option<Result<std::sync::Arc<Event>, StoreError>> {
    tokio::time::timeout(WAIT, w.next())
        .await
        .expect("the watch neither sent nor ended")
}

async fn take(w: &mut WatchStream, n: usize) -> Vec<Revision> {
    let mut out = Vec::new();
    while out.len() < n {
        let ev = next(w).await.expect("ended early").expect("watch error");
        out.push(ev.mod_rev);
    }
    out
}

async fn write_many(s: &dyn Store, prefix: &str, n: usize) -> Vec<Revision> {
    let mut revs = Vec::new();
    for i in 0..n {
        revs.push(
            s.create(&format!("{prefix}{i:04}"), vec![b'x'; 32])
                .await
                .expect("create"),
        );
    }
    revs
}

/// Issue 9 (100 watchers of one write): every watcher gets every event
/// under its prefix, in revision order, from concurrent writers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watchers_see_every_event_in_order() {
    let (_bare, cache, _dir) = store(1000, WatchCacheOptions::default()).await;
    let cache = Arc::new(cache);
    let from = cache.current_revision().await.expect("revision");
    let mut watchers = Vec::new();
    for _ in 0..50 {
        watchers.push(cache.watch("/registry/pods/", from).await.expect("watch"));
    }
    let mut writers = Vec::new();
    for w in 0..4 {
        let c = cache.clone();
        writers.push(tokio::spawn(async move {
            write_many(c.as_ref(), &format!("/registry/pods/w{w}-"), 25).await;
            // Other resources interleave and must not reach pod watchers.
            write_many(c.as_ref(), &format!("/registry/services/w{w}-"), 5).await;
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let mut truth = cache.watch("/registry/pods/", from).await.expect("watch");
    let expected = take(&mut truth, 100).await;
    assert!(expected.windows(2).all(|p| p[0] < p[1]), "in order");
    for w in &mut watchers {
        assert_eq!(take(w, 100).await, expected);
    }
}

/// kube-apiserver's watch cache: a watch from a revision the window holds
/// is replayed from it; one from before the window goes to the store,
/// which replays it while it has the history and answers `Compacted` (the
/// API's 410) once it has not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_from_old_revisions_inside_and_outside_the_window() {
    let opts = WatchCacheOptions {
        window: 4,
        buffer: 64,
    };
    let (bare, cache, _dir) = store(8, opts).await;
    let revs = write_many(&cache, "/registry/pods/p", 6).await;
    // Inside the window (its last four events).
    let mut inside = cache
        .watch("/registry/pods/", revs[2])
        .await
        .expect("watch");
    assert_eq!(take(&mut inside, 3).await, revs[3..].to_vec());
    // Outside the window, the store still has it: the store replays it.
    let mut outside = cache
        .watch("/registry/pods/", revs[0])
        .await
        .expect("watch");
    assert_eq!(take(&mut outside, 5).await, revs[1..].to_vec());
    // Outside the window and compacted away in the store: 410.
    bare.compact(revs[4]).await.expect("compact");
    let mut gone = cache
        .watch("/registry/pods/", revs[0])
        .await
        .expect("watch");
    assert!(matches!(
        next(&mut gone).await,
        Some(Err(StoreError::Compacted { .. }))
    ));
    // Live events keep reaching the watcher that was replayed.
    let more = write_many(&cache, "/registry/pods/q", 2).await;
    assert_eq!(take(&mut inside, 2).await, more);
}

/// kube-apiserver ends a watcher whose buffer is full rather than block
/// the others: the slow watcher gets an unbroken run of events and then
/// `WatchClosed`, never a gap; it resumes from its last revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_watcher_does_not_block_others_and_is_ended() {
    let opts = WatchCacheOptions {
        window: 256,
        buffer: 8,
    };
    let (_bare, cache, _dir) = store(1000, opts).await;
    let from = cache.current_revision().await.expect("revision");
    let mut slow = cache.watch("/registry/pods/", from).await.expect("watch");
    let mut fast = cache.watch("/registry/pods/", from).await.expect("watch");
    let first = write_many(&cache, "/registry/pods/a", 3).await;
    assert_eq!(take(&mut slow, 3).await, first);
    // The slow watcher stops reading; the writes and the fast watcher
    // (reading as they come) go on.
    let reader = tokio::spawn(async move { take(&mut fast, 53).await });
    let rest = write_many(&cache, "/registry/pods/b", 50).await;
    let all: Vec<Revision> = first.iter().chain(&rest).copied().collect();
    assert_eq!(reader.await.expect("fast reader"), all);

    let mut got = first.clone();
    loop {
        match next(&mut slow).await {
            Some(Ok(ev)) => got.push(ev.mod_rev),
            Some(Err(StoreError::WatchClosed(_))) => break,
            other => panic!("expected events then WatchClosed: {other:?}"),
        }
    }
    assert!(next(&mut slow).await.is_none(), "ended after WatchClosed");
    assert!(got.len() < all.len(), "it was ended before the end");
    assert_eq!(got, all[..got.len()], "no gap before the end");
    // Watching again from the last revision it got gives the rest.
    let last = *got.last().expect("some");
    let mut again = cache.watch("/registry/pods/", last).await.expect("watch");
    assert_eq!(
        take(&mut again, all.len() - got.len()).await,
        all[got.len()..]
    );
}
