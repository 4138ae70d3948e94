//! `dryRun=All` on every write, as kube-apiserver serves it: the whole
//! write runs (decoding, validation, defaults, managedFields, Service
//! allocation choices, PodDisruptionBudget checks) and answers what the
//! real write would answer, but nothing reaches the store, so no revision
//! is made and no watcher sees an event.
//!
//! The decision is taken once per request, here ([`Commit::of`]), and
//! carried out in one place: [`Objects::for_commit`] puts a
//! [`sluice_store::DryRun`] in front of the store, which checks every
//! write as the store would (exists, not found, conflict) and makes none.
//! The handlers do not know whether they run dry. What a dry write answers
//! follows kube-apiserver: a create has no resourceVersion, an update or a
//! delete the object's current one (no new revision); a graceful delete
//! answers the object with its `deletionTimestamp`; a Service shows the
//! cluster IP and node ports it would get, none of them reserved.

use std::sync::Arc;

use axum::extract::Query;
use axum::http::Uri;
use sluice_store::DryRun;

use super::objects::Objects;
use super::status::ApiError;

/// The one value `dryRun` takes.
pub const ALL: &str = "All";

/// Whether a write is made or only run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Commit {
    #[default]
    Write,
    DryRun,
}

impl Commit {
    /// The commit `values` (every `dryRun` the request gives, in the query
    /// or in its options) ask for; `options` names the request's options
    /// kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`,
    /// `DeleteOptions`) for the 422 an unknown value gets, as
    /// kube-apiserver's options validation answers.
    pub fn of(options: &str, values: &[String]) -> Result<Commit, ApiError> {
        if let Some(bad) = values.iter().find(|v| v.as_str() != ALL) {
            let message = format!("Unsupported value: {bad:?}: supported values: \"{ALL}\"");
            return Err(ApiError::invalid_options(
                options,
                &[("dryRun", "FieldValueNotSupported", message)],
            ));
        }
        Ok(if values.is_empty() {
            Commit::Write
        } else {
            Commit::DryRun
        })
    }
}

/// Every `dryRun` value of the request's query (`?dryRun=All`, repeated
/// or not).
pub fn query_values(uri: &Uri) -> Result<Vec<String>, ApiError> {
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| super::objects::bad_request(format!("the query does not decode: {e}")))?;
    Ok(pairs
        .into_iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v)
        .collect())
}

/// The `dryRun` of a delete: its `DeleteOptions`' when the body gives one
/// (what kubectl sends), else the query's.
pub fn delete_values(body: Option<&Vec<String>>, query: Vec<String>) -> Vec<String> {
    match body {
        Some(b) if !b.is_empty() => b.clone(),
        _ => query,
    }
}

/// The `dryRun` of an eviction: its query's (`CreateOptions`) and its
/// `deleteOptions`' may each be given; both given must agree, as
/// kube-apiserver requires (400 otherwise).
pub fn eviction_values(
    query: Vec<String>,
    body: Option<&Vec<String>>,
) -> Result<Vec<String>, ApiError> {
    match body {
        Some(b) if !b.is_empty() && !query.is_empty() && *b != query => {
            Err(super::objects::bad_request(format!(
                "createOptions.DryRun and eviction.DeleteOptions.DryRun should be the same if they are both set. createOptions.DryRun: {query:?}, eviction.DeleteOptions.DryRun: {b:?}"
            )))
        }
        Some(b) if !b.is_empty() => Ok(b.clone()),
        _ => Ok(query),
    }
}

/// The options kind of a write verb, which names an unknown `dryRun`.
pub fn options_for(verb: &str) -> &'static str {
    match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        "patch" => "PatchOptions",
        _ => "DeleteOptions",
    }
}

impl Objects {
    /// These objects as the write `verb` with the `dryRun` `values` sees
    /// them (an unknown value: 422): where every handler learns whether it
    /// writes.
    pub fn for_request(&self, verb: &str, values: &[String]) -> Result<Objects, ApiError> {
        Ok(self.for_commit(Commit::of(options_for(verb), values)?))
    }

    /// These objects as a write with `commit` sees them: the same store
    /// for a real write, one that makes no write for a dry run.
    pub fn for_commit(&self, commit: Commit) -> Objects {
        match commit {
            Commit::Write => self.clone(),
            Commit::DryRun => Objects {
                store: Arc::new(DryRun::new(self.store.clone())),
                ..self.clone()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn all_is_a_dry_run_and_nothing_is_a_write() {
        assert_eq!(Commit::of("CreateOptions", &[]).ok(), Some(Commit::Write));
        assert_eq!(
            Commit::of("PatchOptions", &v(&["All"])).ok(),
            Some(Commit::DryRun)
        );
        assert_eq!(
            Commit::of("PatchOptions", &v(&["All", "All"])).ok(),
            Some(Commit::DryRun)
        );
    }

    #[test]
    fn unknown_values_are_invalid_naming_the_value_and_the_options() {
        for bad in [v(&["x"]), v(&[""]), v(&["All", "Some"]), v(&["all"])] {
            let e = Commit::of("DeleteOptions", &bad).expect_err("refused");
            assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}");
            let named = bad.iter().find(|x| x.as_str() != ALL).expect("a bad one");
            assert!(
                e.message.starts_with(
                    "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
                ) && e.message.contains(&format!("{named:?}"))
                    && e.message.ends_with("supported values: \"All\""),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn query_values_are_every_dry_run_given() {
        let uri: Uri = "/api/v1/pods?dryRun=All&fieldManager=m&dryRun=x%20y"
            .parse()
            .expect("uri");
        assert_eq!(query_values(&uri).ok(), Some(v(&["All", "x y"])));
        let uri: Uri = "/api/v1/pods".parse().expect("uri");
        assert_eq!(query_values(&uri).ok(), Some(vec![]));
    }

    #[test]
    fn deletes_take_the_body_first_and_evictions_want_agreement() {
        assert_eq!(delete_values(Some(&v(&["All"])), vec![]), v(&["All"]));
        assert_eq!(delete_values(Some(&vec![]), v(&["All"])), v(&["All"]));
        assert_eq!(delete_values(None, vec![]), Vec::<String>::new());
        assert_eq!(eviction_values(v(&["All"]), None).ok(), Some(v(&["All"])));
        assert_eq!(
            eviction_values(vec![], Some(&v(&["All"]))).ok(),
            Some(v(&["All"]))
        );
        assert_eq!(
            eviction_values(v(&["All"]), Some(&v(&["All"]))).ok(),
            Some(v(&["All"]))
        );
        let e = eviction_values(v(&["All"]), Some(&v(&["x"]))).expect_err("disagree");
        assert_eq!(e.code, StatusCode::BAD_REQUEST);
    }
}
