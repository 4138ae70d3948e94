//! etcd's refusals, told apart by their gRPC messages (etcd has no codes
//! finer than `OutOfRange` for them).

/// What an etcd error means for a request that named a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionRefusal {
    Compacted,
    Future,
}

pub fn revision_refusal(err: &etcd_client::Error) -> Option<RevisionRefusal> {
    let etcd_client::Error::GRpcStatus(status) = err else {
        return None;
    };
    classify(status.message())
}

fn classify(message: &str) -> Option<RevisionRefusal> {
    if message.contains("required revision has been compacted") {
        Some(RevisionRefusal::Compacted)
    } else if message.contains("required revision is a future revision") {
        Some(RevisionRefusal::Future)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_messages_are_recognised() {
        assert_eq!(
            classify("etcdserver: mvcc: required revision has been compacted"),
            Some(RevisionRefusal::Compacted)
        );
        assert_eq!(
            classify("etcdserver: mvcc: required revision is a future revision"),
            Some(RevisionRefusal::Future)
        );
        assert_eq!(classify("etcdserver: request timed out"), None);
    }
}
