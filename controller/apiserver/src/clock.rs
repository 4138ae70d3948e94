//! Time as Kubernetes writes it.

use sluice_model::k8s::jiff::Timestamp;

/// Now, in whole seconds (the epoch if the system clock is before it).
pub fn now() -> Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(secs)
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Now: RFC 3339, UTC, whole seconds (`metadata.creationTimestamp`,
/// `renewTime`).
pub fn now_rfc3339() -> String {
    now().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_utc_in_whole_seconds() {
        let t = super::now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}
