//! Bearer-token authentication: every request but the health probes must
//! carry a token from the token file; the identity it maps to rides along
//! in the request's extensions for the handlers' authorisation.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::status::ApiError;
use crate::identity::{Identity, TokenEntry};

/// Tokens → identities, as loaded from `tokens.csv`, and as node
/// providers add and remove them while serving (a lab node's agent gets
/// its token when its node is made). Clones share one table.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    // Read on every request, written once per node made or removed: an
    // uncontended read lock is one atomic operation, no slower than the
    // hash lookup it guards.
    by_token: Arc<RwLock<HashMap<String, Identity>>>,
}

impl Authenticator {
    pub fn new(entries: &[TokenEntry]) -> Self {
        Authenticator {
            by_token: Arc::new(RwLock::new(
                entries
                    .iter()
                    .map(|e| (e.token.clone(), e.identity.clone()))
                    .collect(),
            )),
        }
    }

    /// The identity of an `Authorization` header value, if any.
    pub fn identify(&self, header: Option<&str>) -> Option<Identity> {
        let token = header?.strip_prefix("Bearer ")?.trim();
        // A hash lookup's timing depends on the hash, not on how much of a
        // guessed token matches, so it leaks no prefix. A writer that
        // panicked left the map whole (inserts and removes are single
        // calls), so a poisoned lock is still read.
        self.by_token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned()
    }

    /// Accept `entry` from now on (a token already known keeps its first
    /// identity: tokens are random, a clash is a caller's bug).
    pub fn add(&self, entry: &TokenEntry) {
        self.by_token
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(entry.token.clone())
            .or_insert_with(|| entry.identity.clone());
    }

    /// Refuse every token of `identity` from now on; how many there were.
    pub fn remove_identity(&self, identity: &Identity) -> usize {
        let mut map = self
            .by_token
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let before = map.len();
        map.retain(|_, id| id != identity);
        before - map.len()
    }
}

/// Paths a load balancer or a supervisor probes without credentials, as
/// kube-apiserver allows them.
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz")
}

/// The middleware: 401 `Status` without a known token.
pub async fn require_token(
    State(auth): State<Authenticator>,
    mut req: Request,
    next: Next,
) -> Response {
    if is_public(req.uri().path()) {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    match auth.identify(header) {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_bearer_tokens_identify() {
        let t = "t".repeat(32);
        let a = Authenticator::new(&[TokenEntry {
            token: t.clone(),
            identity: Identity::Node {
                name: "node-1".into(),
            },
        }]);
        assert_eq!(
            a.identify(Some(&format!("Bearer {t}"))),
            Some(Identity::Node {
                name: "node-1".into()
            })
        );
        for bad in [
            None,
            Some(t.as_str()),
            Some("Bearer "),
            Some("Basic abc"),
            Some("Bearer x"),
        ] {
            assert_eq!(a.identify(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn tokens_added_and_removed_while_serving_apply_to_every_clone() {
        let a = Authenticator::new(&[]);
        let serving = a.clone();
        let node = Identity::Node {
            name: "lab-a-1".into(),
        };
        let t = "n".repeat(32);
        let header = format!("Bearer {t}");
        assert_eq!(serving.identify(Some(&header)), None);
        a.add(&TokenEntry {
            token: t.clone(),
            identity: node.clone(),
        });
        assert_eq!(serving.identify(Some(&header)), Some(node.clone()));
        assert_eq!(a.remove_identity(&node), 1);
        assert_eq!(serving.identify(Some(&header)), None);
        assert_eq!(a.remove_identity(&node), 0);
    }
}
