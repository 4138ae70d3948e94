//! What a previous agent plugged that no pod of this one claims: pod links
//! it pinned and pod addresses it published. A restarted kernel engine
//! adopts both while it starts, because its pinned program serves on
//! meanwhile and believes a pod's source address only on the link
//! published for it (see `KernelEngine::start`). Once the first state's
//! pods are plugged, whatever is left belongs to a pod deleted while no
//! agent ran: its link would stay up with the program on it, and the
//! program would go on believing its addresses and redirecting to it.

use std::collections::BTreeSet;

use sluice_datapath::maps::LocalKey;

use super::pins::parse_link_pin;

/// The pod links among the pin directory's `files` that are not `nic` and
/// not a host link in `claimed`, each once (a link may have two pins).
pub fn links<'a>(
    files: impl IntoIterator<Item = &'a str>,
    nic: &str,
    claimed: &BTreeSet<&str>,
) -> Vec<String> {
    files
        .into_iter()
        .filter_map(|f| parse_link_pin(f).map(|(ifname, _)| ifname))
        .filter(|i| *i != nic && !claimed.contains(i))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(String::from)
        .collect()
}

/// The addresses among `published` that no plugged pod owns (`claimed`).
pub fn addresses(
    published: impl IntoIterator<Item = LocalKey>,
    claimed: &BTreeSet<LocalKey>,
) -> Vec<LocalKey> {
    published
        .into_iter()
        .filter(|k| !claimed.contains(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_no_pod_claims_are_named_once_and_the_uplink_never() {
        let files = [
            "link-nic0-ingress",
            "link-nic0-egress",
            "link-lxc-web-ingress",
            "link-lxc-gone-ingress",
            "link-lxc-gone-egress",
            "SLUICE_CT",
            "record.json",
        ];
        let claimed = BTreeSet::from(["lxc-web"]);
        assert_eq!(links(files, "nic0", &claimed), ["lxc-gone"]);
        assert!(links(files, "nic0", &BTreeSet::from(["lxc-web", "lxc-gone"])).is_empty());
        // Nothing claimed (shutdown): every pod link, still not the uplink.
        assert_eq!(
            links(files, "nic0", &BTreeSet::new()),
            ["lxc-gone", "lxc-web"]
        );
    }

    #[test]
    fn addresses_no_pod_owns_are_named() {
        let key = |b: u8| LocalKey { addr: [b; 16] };
        let claimed = BTreeSet::from([key(1), key(2)]);
        assert_eq!(addresses([key(1), key(3), key(2)], &claimed), [key(3)]);
        assert_eq!(addresses([key(4)], &BTreeSet::new()), [key(4)]);
        assert!(addresses([], &claimed).is_empty());
    }
}
