//! The names of the network namespaces the agent makes for pods: stable per
//! pod key, with a prefix per agent so several agents can share a host.

static NETNS_PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The default start of the names of namespaces the agent makes for pods.
pub const DEFAULT_NETNS_PREFIX: &str = "sl-pod";

/// Set, once per process and before any pod is run, how the agent's pod
/// namespaces are named. Several agents sharing one host (the lab, tests)
/// need distinct prefixes; on a real node the default is fine.
pub fn set_netns_prefix(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 200
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !ok {
        return Err(format!(
            "pod namespace prefix {prefix:?}: use 1-200 letters, digits, '-', '_' or '.'"
        ));
    }
    let set = NETNS_PREFIX.get_or_init(|| prefix.to_string());
    if set != prefix {
        return Err(format!("pod namespace prefix already set to {set:?}"));
    }
    Ok(())
}

/// Name of the namespace the agent makes for a pod: stable across restarts
/// (so a restarted agent finds it).
pub fn netns_name(key: &str) -> String {
    let prefix = NETNS_PREFIX
        .get()
        .map(String::as_str)
        .unwrap_or(DEFAULT_NETNS_PREFIX);
    format!("{prefix}-{:08x}", crate::control::stable_hash(key))
}
