//! A store for a dry run (kube-apiserver's `dryRun=All`): reads go to the
//! store behind; each write is checked as the store would check it (exists,
//! not found, conflict) against the key as it is now, and answered as if it
//! went through, but nothing is written, so no revision is made and no
//! watcher sees an event. What a dry write answers is decided by
//! [`dry_answer`], without I/O.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::store::{Store, WatchStream};
use crate::txn::{check_keys, refusal};
use crate::types::{Kv, ListOptions, ListPage, Revision, Write};

/// The revision a dry create answers: none (kube-apiserver's dry-run
/// create answers an empty resourceVersion).
pub const NO_REVISION: Revision = 0;

/// What `write` would answer with its key at `current` (its mod revision;
/// `None`: absent), without making it: the refusal the store would give,
/// else the revision the object stays at (a create: [`NO_REVISION`]; an
/// update or a delete: the current one, since no new revision is made).
pub fn dry_answer(write: &Write, current: Option<Revision>) -> Result<Revision> {
    if let Some(e) = refusal(write, current) {
        return Err(e);
    }
    Ok(match write {
        Write::Create { .. } => NO_REVISION,
        Write::Update { .. } | Write::Delete { .. } => current.unwrap_or(NO_REVISION),
    })
}

/// Every read from `inner`; every write checked and answered, never made.
pub struct DryRun {
    inner: Arc<dyn Store>,
}

impl DryRun {
    pub fn new(inner: Arc<dyn Store>) -> DryRun {
        DryRun { inner }
    }

    async fn answer(&self, write: &Write) -> Result<(Revision, Option<Kv>)> {
        let current = self.inner.get(write.key()).await?;
        let rev = dry_answer(write, current.as_ref().map(|kv| kv.mod_rev))?;
        Ok((rev, current))
    }
}

#[async_trait]
impl Store for DryRun {
    async fn get(&self, key: &str) -> Result<Option<Kv>> {
        self.inner.get(key).await
    }

    async fn list(&self, opts: ListOptions<'_>) -> Result<ListPage> {
        self.inner.list(opts).await
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        let w = Write::Create {
            key: key.to_string(),
            value,
        };
        self.answer(&w).await.map(|(rev, _)| rev)
    }

    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    ) -> Result<Revision> {
        let w = Write::Update {
            key: key.to_string(),
            value,
            expected_mod_rev,
        };
        self.answer(&w).await.map(|(rev, _)| rev)
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_rev: Option<Revision>,
    ) -> Result<(Revision, Kv)> {
        let w = Write::Delete {
            key: key.to_string(),
            expected_mod_rev,
        };
        match self.answer(&w).await? {
            (rev, Some(kv)) => Ok((rev, kv)),
            // Checked above: a delete of an absent key is refused.
            (_, None) => Err(StoreError::NotFound {
                key: key.to_string(),
            }),
        }
    }

    async fn txn(&self, writes: Vec<Write>) -> Result<Vec<Revision>> {
        check_keys(&writes)?;
        let mut revs = Vec::with_capacity(writes.len());
        for w in &writes {
            revs.push(self.answer(w).await?.0);
        }
        Ok(revs)
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn watch(&self, prefix: &str, from_rev: Revision) -> Result<WatchStream> {
        self.inner.watch(prefix, from_rev).await
    }

    async fn compact(&self, _rev: Revision) -> Result<()> {
        // Compaction is the store's own housekeeping, never a request's.
        Err(StoreError::InvalidRequest(
            "a dry run does not compact".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(rev: Revision) -> Write {
        Write::Update {
            key: "k".into(),
            value: vec![1],
            expected_mod_rev: rev,
        }
    }

    #[test]
    fn dry_writes_answer_the_revision_the_object_stays_at() {
        let create = Write::Create {
            key: "k".into(),
            value: vec![],
        };
        assert_eq!(dry_answer(&create, None).ok(), Some(NO_REVISION));
        assert_eq!(dry_answer(&update(7), Some(7)).ok(), Some(7));
        let delete = Write::Delete {
            key: "k".into(),
            expected_mod_rev: None,
        };
        assert_eq!(dry_answer(&delete, Some(9)).ok(), Some(9));
    }

    #[test]
    fn dry_writes_are_refused_as_real_ones() {
        let create = Write::Create {
            key: "k".into(),
            value: vec![],
        };
        assert!(matches!(
            dry_answer(&create, Some(3)),
            Err(StoreError::AlreadyExists { .. })
        ));
        assert!(matches!(
            dry_answer(&update(7), Some(8)),
            Err(StoreError::Conflict {
                expected: 7,
                current: 8,
                ..
            })
        ));
        assert!(matches!(
            dry_answer(&update(7), None),
            Err(StoreError::NotFound { .. })
        ));
    }
}
