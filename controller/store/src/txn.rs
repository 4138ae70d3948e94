//! What both stores check of a transaction, without I/O: its keys are
//! distinct, and which of its writes the keys as they are refuse.

use std::collections::HashSet;

use crate::error::{Result, StoreError};
use crate::types::{Revision, Write};

/// A transaction names each key once (etcd refuses a key twice in one
/// transaction; the embedded store follows), and has a write at all.
pub fn check_keys(writes: &[Write]) -> Result<()> {
    if writes.is_empty() {
        return Err(StoreError::InvalidRequest(
            "a transaction needs at least one write".into(),
        ));
    }
    let mut seen = HashSet::with_capacity(writes.len());
    for w in writes {
        if !seen.insert(w.key()) {
            return Err(StoreError::InvalidRequest(format!(
                "key {} is written twice in one transaction",
                w.key()
            )));
        }
    }
    Ok(())
}

/// Why `write` is refused when its key is at `current` (its mod revision;
/// `None`: the key does not exist); `None` when it may go ahead.
pub fn refusal(write: &Write, current: Option<Revision>) -> Option<StoreError> {
    let key = write.key().to_owned();
    match (write, current) {
        (Write::Create { .. }, Some(_)) => Some(StoreError::AlreadyExists { key }),
        (Write::Create { .. }, None) => None,
        (Write::Update { .. } | Write::Delete { .. }, None) => Some(StoreError::NotFound { key }),
        (
            Write::Update {
                expected_mod_rev, ..
            },
            Some(cur),
        )
        | (
            Write::Delete {
                expected_mod_rev: Some(expected_mod_rev),
                ..
            },
            Some(cur),
        ) if *expected_mod_rev != cur => Some(StoreError::Conflict {
            key,
            expected: *expected_mod_rev,
            current: cur,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(k: &str) -> Write {
        Write::Create {
            key: k.into(),
            value: vec![],
        }
    }

    #[test]
    fn a_key_twice_or_no_write_is_refused() {
        assert!(check_keys(&[create("a"), create("b")]).is_ok());
        assert!(matches!(
            check_keys(&[create("a"), create("a")]),
            Err(StoreError::InvalidRequest(_))
        ));
        assert!(check_keys(&[]).is_err());
    }

    #[test]
    fn each_write_is_refused_as_its_single_key_call_would_be() {
        assert!(matches!(
            refusal(&create("a"), Some(3)),
            Some(StoreError::AlreadyExists { .. })
        ));
        assert!(refusal(&create("a"), None).is_none());
        let update = Write::Update {
            key: "a".into(),
            value: vec![],
            expected_mod_rev: 3,
        };
        assert!(refusal(&update, Some(3)).is_none());
        assert!(matches!(
            refusal(&update, Some(4)),
            Some(StoreError::Conflict {
                expected: 3,
                current: 4,
                ..
            })
        ));
        assert!(matches!(
            refusal(&update, None),
            Some(StoreError::NotFound { .. })
        ));
        let delete = |e| Write::Delete {
            key: "a".into(),
            expected_mod_rev: e,
        };
        assert!(refusal(&delete(None), Some(9)).is_none());
        assert!(refusal(&delete(Some(9)), Some(9)).is_none());
        assert!(refusal(&delete(Some(8)), Some(9)).is_some());
        assert!(refusal(&delete(None), None).is_some());
    }
}
