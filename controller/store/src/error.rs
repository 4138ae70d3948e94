//! Errors of every store, in terms an API server maps straight to a status
//! (409, 404, 410, 500).

use crate::types::Revision;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key {key} already exists")]
    AlreadyExists { key: String },

    #[error("key {key} not found")]
    NotFound { key: String },

    #[error("key {key} was modified: expected revision {expected}, it is at {current}")]
    Conflict {
        key: String,
        expected: Revision,
        current: Revision,
    },

    /// The history before `compacted` is gone: a list at an older revision
    /// or a watch from one cannot be answered (kube-apiserver's 410 Gone).
    #[error("revision {requested} has been compacted (history starts at {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },

    #[error("revision {requested} is in the future (the store is at {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },

    /// A watch the store ended on its side, with nothing lost before it
    /// (a watcher too slow for the watch cache): the caller watches again
    /// from the last revision it got.
    #[error("watch closed: {0}")]
    WatchClosed(String),

    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// A record in the store that this code cannot read: a bug or a file
    /// written by something else, never a user error.
    #[error("corrupt store record: {0}")]
    Corrupt(String),

    #[error("embedded store (redb): {0}")]
    Redb(#[from] redb::Error),

    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),

    #[error("store task failed: {0}")]
    Task(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

macro_rules! redb_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Redb(e.into())
            }
        }
    )*};
}
redb_errors!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);
