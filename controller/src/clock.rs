//! Time as Kubernetes writes it.

/// Now: RFC 3339, UTC, whole seconds (`metadata.creationTimestamp`,
/// `renewTime`).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(secs)
        .ok()
        .and_then(|s| sluice_model::k8s::jiff::Timestamp::from_second(s).ok())
        .map(|t| t.to_string())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
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
