//! Errors as Kubernetes `Status` objects: what kubectl and kube-rs print,
//! with the reason and, where a field is at fault, the field.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A failed request, answered as a `Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: StatusCode,
    /// `Unauthorized`, `Forbidden`, `NotFound`, `Invalid`, ...
    pub reason: &'static str,
    pub message: String,
    /// `details` (name, group, kind, causes), when there is something to
    /// point at.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    pub fn not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn forbidden(user: &str, what: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!("User \"{user}\" cannot {what}"),
        )
    }

    /// kube-apiserver's 422 for request options that do not validate
    /// (`CreateOptions`, `PatchOptions`, ...): each cause its field,
    /// reason and message.
    pub fn invalid_options(options: &str, causes: &[(&str, &str, String)]) -> Self {
        let all: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        let listed = match all.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("{options}.meta.k8s.io \"\" is invalid: {listed}"),
        );
        e.details = Some(json!({
            "group": "meta.k8s.io",
            "kind": options,
            "causes": causes.iter().map(|(f, r, m)| json!({"reason": r, "message": m, "field": f})).collect::<Vec<_>>(),
        }));
        e
    }

    pub fn body(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.code, axum::Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_object_as_kubectl_reads_it() {
        let b = ApiError::unauthorized().body();
        assert_eq!(b["kind"], "Status");
        assert_eq!(b["status"], "Failure");
        assert_eq!(b["reason"], "Unauthorized");
        assert_eq!(b["code"], 401);
    }
}
