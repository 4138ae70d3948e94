//! What the store hands out: revisions, key-value records, list pages and
//! watch events. Plain data, shared by every implementation.

/// The store's one global revision (kube-apiserver's resourceVersion).
/// Every write makes it grow by one; etcd's own type, hence `i64`.
pub type Revision = i64;

/// A key and its current value, with the revisions Kubernetes needs:
/// `mod_rev` is the object's resourceVersion, `create_rev` tells a re-created
/// object from the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    pub create_rev: Revision,
    pub mod_rev: Revision,
}

/// One page of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListOptions<'a> {
    /// Only keys that start with this (`/registry/pods/` or
    /// `/registry/pods/default/`); empty means every key.
    pub prefix: &'a str,
    /// At most this many items; `None` (or `Some(0)`, like kube's `limit=0`)
    /// means all of them.
    pub limit: Option<usize>,
    /// Only keys after this one (the last key of the previous page): the
    /// `continue` token of kube-apiserver carries it with the revision.
    pub start_after: Option<&'a str>,
    /// The list as it was at this revision; `None` means now. Every page
    /// of one paged list passes the revision the first page returned.
    pub at_revision: Option<Revision>,
}

/// A consistent snapshot of some keys at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// In key order.
    pub items: Vec<Kv>,
    /// The revision the snapshot was taken at: the list's resourceVersion,
    /// and the one to pass as `at_revision` for the next page.
    pub revision: Revision,
    /// Whether keys past the last item remain (then `limit` was reached).
    pub more: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change, as a watcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub key: String,
    /// The new value; empty for a delete.
    pub value: Vec<u8>,
    /// The value before this change; `None` for a create.
    pub prev_value: Option<Vec<u8>>,
    /// The revision of this change (for a delete, the deletion's own).
    pub mod_rev: Revision,
}

/// One write of a transaction ([`crate::Store::txn`]): the same checks as
/// the single-key calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Refused with `AlreadyExists` if the key exists.
    Create { key: String, value: Vec<u8> },
    /// Refused with `NotFound`, or `Conflict` unless the key is at
    /// `expected_mod_rev`.
    Update {
        key: String,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    },
    /// Refused with `NotFound`, or `Conflict` when `expected_mod_rev` is
    /// given and the key is elsewhere.
    Delete {
        key: String,
        expected_mod_rev: Option<Revision>,
    },
}

impl Write {
    pub fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => {
                key
            }
        }
    }
}
