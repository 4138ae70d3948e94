//! Bearer-token authentication: every request but the health probes must
//! carry a token from the token file; the identity it maps to rides along
//! in the request's extensions for the handlers' authorisation.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::status::ApiError;
use crate::identity::{Identity, TokenEntry};

/// Tokens → identities, as loaded from `tokens.csv`.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    by_token: Arc<HashMap<String, Identity>>,
}

impl Authenticator {
    pub fn new(entries: &[TokenEntry]) -> Self {
        Authenticator {
            by_token: Arc::new(
                entries
                    .iter()
                    .map(|e| (e.token.clone(), e.identity.clone()))
                    .collect(),
            ),
        }
    }

    /// The identity of an `Authorization` header value, if any.
    pub fn identify(&self, header: Option<&str>) -> Option<Identity> {
        let token = header?.strip_prefix("Bearer ")?.trim();
        // A hash lookup's timing depends on the hash, not on how much of a
        // guessed token matches, so it leaks no prefix.
        self.by_token.get(token).cloned()
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
}
