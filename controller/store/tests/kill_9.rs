//! `kill -9` at any moment loses no acknowledged write and never corrupts
//! the embedded store's file. This test binary re-executes itself as the
//! writer (the `writer_child` test, which does nothing unless the
//! environment names a file): the child prints each write's revision once
//! it is acknowledged, the parent kills it with SIGKILL mid-stream, reopens
//! the file and finds every acknowledged write. Three rounds on one file.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use sluice_store::{ListOptions, RedbOptions, RedbStore, Revision, Store};

const CHILD_FILE_ENV: &str = "SLUICE_STORE_KILL9_FILE";
const CHILD_ROUND_ENV: &str = "SLUICE_STORE_KILL9_ROUND";
const PREFIX: &str = "/registry/kill9/";
/// Writers in the child, so that the kill can land between any of them.
const CHILD_WRITERS: usize = 2;
/// A bound on the child should the parent never kill it.
const CHILD_MAX_WRITES: usize = 20_000;
/// Acknowledgements read before each round's kill.
const KILL_AFTER: [usize; 3] = [5, 60, 250];

/// Kills the child, also when the test fails.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One acknowledged write, as the child prints it: `ACKED <rev> <key>`.
fn parse_ack(line: &str) -> Option<(Revision, String)> {
    // libtest may print its own words before ours on the same line.
    let rest = &line[line.find("ACKED ")? + 6..];
    let (rev, key) = rest.trim().split_once(' ')?;
    Some((rev.parse().ok()?, key.to_owned()))
}

fn value_for(key: &str) -> Vec<u8> {
    format!("value of {key}").into_bytes()
}

#[test]
fn writer_child() {
    let Some(file) = std::env::var_os(CHILD_FILE_ENV) else {
        return; // An ordinary test run: nothing to do.
    };
    let round = std::env::var(CHILD_ROUND_ENV).unwrap_or_default();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let store = Arc::new(RedbStore::open(&file, RedbOptions::default()).expect("open"));
        let mut tasks = Vec::new();
        for w in 0..CHILD_WRITERS {
            let store = store.clone();
            let round = round.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..CHILD_MAX_WRITES / CHILD_WRITERS {
                    let key = format!("{PREFIX}r{round}/w{w}/{i:06}");
                    let rev = store.create(&key, value_for(&key)).await.expect("create");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACKED {rev} {key}").expect("stdout");
                    out.flush().expect("stdout");
                }
            }));
        }
        for t in tasks {
            t.await.expect("writer");
        }
    });
}

fn run_round(file: &Path, round: usize, kill_after: usize) -> Vec<(Revision, String)> {
    let exe = std::env::current_exe().expect("own test binary");
    let child = Command::new(exe)
        .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_FILE_ENV, file)
        .env(CHILD_ROUND_ENV, round.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the writer child");
    let mut child = ChildGuard(child);
    let stdout = child.0.stdout.take().expect("child stdout");
    let mut acks = Vec::new();
    let mut lines = BufReader::new(stdout).lines();
    while acks.len() < kill_after {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("child ended after {} acks", acks.len()))
            .expect("child stdout");
        acks.extend(parse_ack(&line));
    }
    child.0.kill().expect("SIGKILL the child");
    child.0.wait().expect("reap the child");
    // What it printed before dying was acknowledged too.
    for line in lines {
        acks.extend(line.ok().as_deref().and_then(parse_ack));
    }
    acks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("store.redb");
    let mut acked: BTreeMap<String, Revision> = BTreeMap::new();
    for (round, kill_after) in KILL_AFTER.into_iter().enumerate() {
        let file2 = file.clone();
        let acks = tokio::task::spawn_blocking(move || run_round(&file2, round, kill_after))
            .await
            .expect("round");
        assert!(acks.len() >= kill_after);
        acked.extend(acks.into_iter().map(|(rev, key)| (key, rev)));

        let store = RedbStore::open(&file, RedbOptions::default()).expect("reopen after kill -9");
        for (key, rev) in &acked {
            let kv =
                store.get(key).await.expect("read").unwrap_or_else(|| {
                    panic!("round {round}: acknowledged {key} at {rev} is lost")
                });
            assert_eq!((kv.mod_rev, kv.value), (*rev, value_for(key)), "{key}");
        }
        // The whole file still reads, and the revision covers every ack.
        let all = store
            .list(ListOptions {
                prefix: PREFIX,
                ..Default::default()
            })
            .await
            .expect("list after kill -9");
        assert!(all.items.len() >= acked.len());
        let max_acked = acked.values().copied().max().unwrap_or(0);
        assert!(store.current_revision().await.expect("revision") >= max_acked);
        // Dropped before the next child opens the file.
    }
}

#[test]
fn acks_are_parsed_even_after_libtest_words() {
    assert_eq!(
        parse_ack("test writer_child ... ACKED 7 /registry/kill9/a"),
        Some((7, "/registry/kill9/a".to_owned()))
    );
    assert_eq!(parse_ack("running 1 test"), None);
}
