//! Group commit: the embedded store's writes go through one writer thread,
//! which takes every write queued while the previous commit was being made
//! and commits them together, in one transaction with one fsync.
//!
//! Before, each write paid an fsync of its own (989 Pods/s in the API
//! bench). Each write still gets its own outcome: it is decided against
//! the key as the batch has left it so far (`ops::decide`, with its own
//! revision), and a refused write (conflict, exists, not found) writes
//! nothing and takes no revision, so it fails alone. Every write is
//! answered only after its batch's commit (`Durability::Immediate`)
//! returned, so `kill -9` still loses no acknowledged write; if the commit
//! fails, every write of the batch gets the error and none was made.

use std::sync::mpsc;
use std::sync::Arc;

use redb::{Durability, ReadableTable};
use tokio::sync::oneshot;
use tracing::error;

use super::codec::{self, Record};
use super::ops::{self, Op};
use super::{meta_get, trim_history, Core, HISTORY, KV, META, META_REVISION};
use crate::error::{Result, StoreError};
use crate::types::Revision;

/// Most writes in one transaction: bounds how long the first of them
/// waits behind the others' work.
const MAX_BATCH: usize = 512;

/// A unit's outcome: each write's revision and its key's previous record.
pub type Written = Result<Vec<(Revision, Option<Record>)>>;

/// One unit of writes waiting for its batch: a single write, or a
/// transaction's writes, made all or none.
pub struct Pending {
    pub writes: Vec<(String, Op)>,
    pub reply: oneshot::Sender<Written>,
}

/// Runs until every sender is gone: takes a batch, commits it, answers.
pub fn run(core: Arc<Core>, queue: mpsc::Receiver<Pending>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let (ops, replies): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|p| (p.writes, p.reply)).unzip();
        let outcomes = match commit(&core, ops) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                error!(error = %e, writes = replies.len(), "embedded store: a batch of writes failed");
                let msg = e.to_string();
                replies
                    .iter()
                    .map(|_| Err(StoreError::Task(format!("commit failed: {msg}"))))
                    .collect()
            }
        };
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // The writer may have gone (its request was dropped): nothing to do.
            let _ = reply.send(outcome);
        }
    }
}

/// One transaction for the batch: each unit decided in order on what the
/// ones before it left, all of its writes or none; the outcomes in the
/// batch's order.
fn commit(core: &Core, units: Vec<Vec<(String, Op)>>) -> Result<Vec<Written>> {
    let mut txn = core.db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    let mut outcomes = Vec::with_capacity(units.len());
    let (first, last) = {
        let mut kv = txn.open_table(KV)?;
        let mut history = txn.open_table(HISTORY)?;
        let mut meta = txn.open_table(META)?;
        let first = meta_get(&meta, META_REVISION)?;
        let mut rev = first;
        for unit in units {
            // Decided first, written after: a refused write leaves the
            // unit's other keys as they were (its keys are distinct, so
            // each is decided on the key as the batch left it).
            let mut decided = Vec::with_capacity(unit.len());
            let mut refused = None;
            for (i, (key, op)) in unit.into_iter().enumerate() {
                let current = match kv.get(key.as_str())? {
                    Some(v) => Some(codec::decode_record(v.value())?),
                    None => None,
                };
                let at = rev + 1 + i as i64;
                match ops::decide(&key, current, op, at) {
                    Ok(d) => decided.push((key, d)),
                    Err(e) => {
                        refused = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = refused {
                // Refused: nothing written, no revision taken.
                outcomes.push(Err(e));
                continue;
            }
            let mut written = Vec::with_capacity(decided.len());
            for (key, (new, change)) in decided {
                rev += 1;
                match &new {
                    Some(r) => kv.insert(key.as_str(), codec::encode_record(r).as_slice())?,
                    None => kv.remove(key.as_str())?,
                };
                history.insert(rev, codec::encode_change(&change).as_slice())?;
                written.push((rev, change.prev));
            }
            outcomes.push(Ok(written));
        }
        meta.insert(META_REVISION, rev)?;
        let keep_from = rev - core.opts.keep_revisions + 1;
        trim_history(&mut history, &mut meta, keep_from)?;
        (first, rev)
    };
    if last == first {
        // Every write was refused: nothing to make durable.
        txn.abort()?;
        return Ok(outcomes);
    }
    txn.commit()?;
    core.latest.send_modify(|r| *r = (*r).max(last));
    Ok(outcomes)
}
