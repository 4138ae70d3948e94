//! Leader election on etcd: one key, held by whoever created it, attached
//! to that candidate's lease. The lease is kept alive while the candidate
//! lives; when it dies (or stops keeping it alive) the lease expires after
//! its TTL, etcd deletes the key, and a waiting candidate creates it.
//!
//! Leadership is a fact of the store, not of the candidate: a leader's
//! writes should carry [`Leadership::fence`] so that etcd refuses them once
//! the key is no longer this tenure's (a leader paused past its TTL cannot
//! act on a decision it no longer owns).

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, WatchOptions};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{Result, StoreError};
use crate::types::Revision;

/// Pause before trying again after etcd failed a campaign step.
const RETRY: Duration = Duration::from_millis(500);

/// One contender for the leader key.
#[derive(Clone)]
pub struct Candidate {
    client: Client,
    key: String,
    identity: String,
    ttl_secs: i64,
}

/// Holding the leader key. Dropping it stops the keep-alive without
/// resigning (as a crash would): the key goes when the lease expires.
pub struct Leadership {
    client: Client,
    key: String,
    lease: i64,
    revision: Revision,
    keep_alive: JoinHandle<()>,
    alive: watch::Receiver<bool>,
}

impl Candidate {
    /// `ttl_secs` bounds how long the key outlives a dead leader: the
    /// takeover time is about the TTL (etcd's minimum is a few seconds).
    pub fn new(client: Client, key: &str, identity: &str, ttl_secs: i64) -> Self {
        Candidate {
            client,
            key: key.to_owned(),
            identity: identity.to_owned(),
            ttl_secs,
        }
    }

    /// Waits until this candidate holds the leader key.
    pub async fn campaign(&self) -> Result<Leadership> {
        let mut client = self.client.clone();
        let lease = client.lease_grant(self.ttl_secs, None).await?.id();
        // Kept alive from now on, so the lease lasts however long we wait.
        let (alive_tx, alive) = watch::channel(true);
        let keep_alive = tokio::spawn(keep_alive(client.clone(), lease, self.ttl_secs, alive_tx));
        let mut leadership = Leadership {
            client: client.clone(),
            key: self.key.clone(),
            lease,
            revision: 0,
            keep_alive,
            alive,
        };
        loop {
            if !*leadership.alive.borrow() {
                return Err(StoreError::Etcd(etcd_client::Error::LeaseKeepAliveError(
                    "the campaign's lease expired".into(),
                )));
            }
            match self.try_acquire(&mut client, lease).await {
                Ok(Acquire::Won(rev)) => {
                    leadership.revision = rev;
                    return Ok(leadership);
                }
                Ok(Acquire::HeldSince(rev)) => {
                    if let Err(e) = self.wait_for_release(&mut client, rev).await {
                        tracing::warn!(error = %e, key = %self.key, "watching the leader key failed");
                        tokio::time::sleep(RETRY).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, key = %self.key, "campaign step failed");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    async fn try_acquire(&self, client: &mut Client, lease: i64) -> Result<Acquire> {
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.key.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(
                self.key.as_str(),
                self.identity.as_str(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let resp = client.txn(txn).await?;
        let rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| StoreError::Corrupt("etcd answered without a header".into()))?;
        Ok(if resp.succeeded() {
            Acquire::Won(rev)
        } else {
            Acquire::HeldSince(rev)
        })
    }

    /// Returns once the key is deleted after revision `seen`.
    async fn wait_for_release(&self, client: &mut Client, seen: Revision) -> Result<()> {
        let opts = WatchOptions::new().with_start_revision(seen + 1);
        let mut stream = client.watch(self.key.as_str(), Some(opts)).await?;
        while let Some(resp) = stream.next().await {
            let resp = resp?;
            if resp.canceled()
                || resp
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
            {
                return Ok(());
            }
        }
        Ok(())
    }
}

enum Acquire {
    Won(Revision),
    HeldSince(Revision),
}

impl Leadership {
    /// The revision at which this tenure began (the leader key's creation).
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The condition to add to every write made as leader: the key is
    /// still the one this tenure created.
    pub fn fence(&self) -> Compare {
        Compare::create_revision(self.key.as_str(), CompareOp::Equal, self.revision)
    }

    /// Whether the lease is still being kept alive.
    pub fn is_alive(&self) -> bool {
        *self.alive.borrow()
    }

    /// Resolves when the lease can no longer be kept alive: stop acting.
    pub async fn lost(&self) {
        let mut alive = self.alive.clone();
        // An error means the keep-alive task is gone: lost as well.
        let _ = alive.wait_for(|a| !*a).await;
    }

    /// Gives the key up at once: deletes it if still ours and revokes the
    /// lease, so another candidate need not wait for the TTL.
    pub async fn resign(self) -> Result<()> {
        let mut client = self.client.clone();
        let txn = Txn::new()
            .when([self.fence()])
            .and_then([TxnOp::delete(self.key.as_str(), None)]);
        client.txn(txn).await?;
        client.lease_revoke(self.lease).await?;
        Ok(())
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.keep_alive.abort();
    }
}

/// Refreshes the lease three times per TTL; says `false` once it cannot.
async fn keep_alive(mut client: Client, lease: i64, ttl_secs: i64, alive: watch::Sender<bool>) {
    let period = Duration::from_millis((ttl_secs.max(1) as u64) * 1000 / 3);
    let result: Result<()> = async {
        let (mut keeper, mut responses) = client.lease_keep_alive(lease).await?;
        loop {
            keeper.keep_alive().await?;
            match responses.message().await? {
                Some(r) if r.ttl() > 0 => {}
                _ => return Ok(()), // expired: etcd no longer knows the lease
            }
            tokio::time::sleep(period).await;
        }
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, lease, "lease keep-alive failed");
    }
    let _ = alive.send(false);
}
