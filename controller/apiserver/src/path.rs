//! From a request path to what it addresses: resource, namespace, name,
//! subresource, as kube-apiserver's request-info resolver reads
//! `/api/v1/...` and `/apis/<group>/<version>/...`. Pure, so every shape
//! is tested without a server.

use super::resources::{Resource, RESOURCES};

/// What a resource path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The top-level resource (never a subresource row of the table).
    pub resource: &'static Resource,
    /// `None`: every namespace (a list or watch across namespaces), or a
    /// cluster-scoped resource.
    pub namespace: Option<String>,
    /// `None`: the collection.
    pub name: Option<String>,
    /// `status`, `eviction`, ...
    pub subresource: Option<&'static Resource>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Not an object path at all (discovery and the like are routed
    /// elsewhere): 404.
    NotFound,
}

fn find(group: &str, version: &str, name: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.name == name)
}

/// Resolve `path` (without the query).
pub fn resolve(path: &str) -> Result<Target, PathError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(PathError::NotFound),
    };
    if rest.iter().any(|s| s.is_empty()) {
        return Err(PathError::NotFound);
    }
    // `namespaces/<ns>/<plural>...` addresses inside a namespace, unless
    // it is the Namespace object itself (`namespaces/<ns>` or its
    // subresources).
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if find(group, version, plural).is_some_and(|r| r.namespaced) =>
        {
            (
                Some(ns.to_string()),
                std::iter::once(*plural)
                    .chain(tail.iter().copied())
                    .collect::<Vec<_>>(),
            )
        }
        other => (None, other.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(*sub)),
        _ => return Err(PathError::NotFound),
    };
    let resource = find(group, version, plural)
        .filter(|r| !r.name.contains('/'))
        .ok_or(PathError::NotFound)?;
    // A namespaced object by name needs its namespace; a cluster-scoped one
    // has none.
    if resource.namespaced && name.is_some() && namespace.is_none() {
        return Err(PathError::NotFound);
    }
    let subresource = match sub {
        None => None,
        Some(s) => Some(find(group, version, &format!("{plural}/{s}")).ok_or(PathError::NotFound)?),
    };
    Ok(Target {
        resource,
        namespace,
        name,
        subresource,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &str) -> (String, Option<String>, Option<String>, Option<String>) {
        let t = resolve(p).unwrap_or_else(|e| panic!("{p}: {e:?}"));
        (
            format!("{}/{}", t.resource.group, t.resource.name),
            t.namespace,
            t.name,
            t.subresource.map(|s| s.name.to_string()),
        )
    }

    fn s(x: &str) -> Option<String> {
        Some(x.to_string())
    }

    #[test]
    fn core_and_group_paths_resolve() {
        assert_eq!(
            ok("/api/v1/namespaces/default/pods"),
            ("/pods".into(), s("default"), None, None)
        );
        assert_eq!(ok("/api/v1/pods"), ("/pods".into(), None, None, None));
        assert_eq!(
            ok("/api/v1/namespaces/default/pods/web-1/eviction"),
            ("/pods".into(), s("default"), s("web-1"), s("pods/eviction"))
        );
        assert_eq!(
            ok("/api/v1/nodes/node-1/status"),
            ("/nodes".into(), None, s("node-1"), s("nodes/status"))
        );
        assert_eq!(
            ok("/api/v1/namespaces"),
            ("/namespaces".into(), None, None, None)
        );
        assert_eq!(
            ok("/api/v1/namespaces/kube-system"),
            ("/namespaces".into(), None, s("kube-system"), None)
        );
        assert_eq!(
            ok("/apis/apps/v1/namespaces/prod/deployments/web"),
            ("apps/deployments".into(), s("prod"), s("web"), None)
        );
        assert_eq!(
            ok("/apis/sluice.dev/v1/nodepools/pool-a"),
            ("sluice.dev/nodepools".into(), None, s("pool-a"), None)
        );
    }

    #[test]
    fn everything_else_is_not_an_object_path() {
        for p in [
            "/api",
            "/api/v1",
            "/api/v1/widgets",
            "/api/v1/pods/web-1",
            "/api/v1/namespaces/default/pods/web-1/logs",
            "/api/v1/namespaces/default/pods/web-1/status/extra",
            "/api/v2/pods",
            "/apis/apps/v1/pods",
            "/apis/nope/v1/things",
            "/api/v1/namespaces//pods",
            "/api/v1/pods/status",
        ] {
            assert_eq!(resolve(p), Err(PathError::NotFound), "{p}");
        }
    }
}
