//! Label and field selectors as `kubectl -l` and `--field-selector` send
//! them: `a=b,c!=d,e in (x,y),f notin (z),g,!h` and `spec.nodeName=n1`.
//! Parsed once per request; a selector that does not parse is a 400 that
//! says where.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Req>);

/// Split at commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for t in terms(s) {
            let t = t.trim();
            let bad = || format!("unable to parse requirement {t:?}");
            let set = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(bad)?;
                let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
                if vals.iter().any(|v| !valid_value(v)) {
                    return Err(bad());
                }
                Ok(vals)
            };
            let req = if let Some(k) = t.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = t.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set(rest)?)
            } else if let Some((k, rest)) = t.split_once(" in ") {
                Req::In(k.trim().into(), set(rest)?)
            } else {
                Req::Exists(t.to_string())
            };
            let (key, val) = match &req {
                Req::Eq(k, v) | Req::Ne(k, v) => (k, Some(v)),
                Req::In(k, _) | Req::NotIn(k, _) | Req::Exists(k) | Req::NotExists(k) => (k, None),
            };
            if !valid_key(key) || val.is_some_and(|v| !valid_value(v)) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::Ne(k, v) => labels.get(k) != Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// The fields a field selector may name, as kube-apiserver supports them
/// for the kinds served here.
pub const FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
    "spec.unschedulable",
    // What `kubectl describe` asks of Events.
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
];

/// A parsed field selector: `(field, equal?, value)` terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(out));
        }
        for t in s.split(',') {
            let (f, eq, v) = if let Some((f, v)) = t.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid field selector term {t:?}: expected field=value"
                ));
            };
            let f = f.trim();
            if !FIELDS.contains(&f) {
                return Err(format!(
                    "field label not supported: {f} (supported: {})",
                    FIELDS.join(", ")
                ));
            }
            out.push((f.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Whether it selects everything (then the object need not be decoded).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The object's top-level fields the selector reads (`metadata` for
    /// `metadata.name`): only those need decoding to match it.
    pub fn top_level_fields(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .map(|(f, _, _)| f.split('.').next().unwrap_or(f))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(f, eq, v)| {
            let mut cur = obj;
            for part in f.split('.') {
                cur = &cur[part];
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *v) == *eq
        })
    }
}

/// A label selector (`matchLabels`, `matchExpressions`) as the string
/// kube-apiserver puts in `status.selector`: requirements sorted by key,
/// `k=v`, `k in (a,b)`, `k notin (a,b)` (values sorted), `k`, `!k`,
/// joined by commas.
pub fn to_string(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let s = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({values})"),
            Some("NotIn") => format!("{key} notin ({values})"),
            Some("Exists") => key.to_string(),
            Some("DoesNotExist") => format!("!{key}"),
            // Validation refuses other operators when the parent is
            // written; one stored anyway selects nothing here.
            _ => continue,
        };
        reqs.push((key.to_string(), s));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_print_as_kube_apiserver_prints_them() {
        let sel = json!({"matchLabels": {"z": "1"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "app", "operator": "Exists"}]});
        assert_eq!(
            to_string(Some(&sel)),
            "app,!canary,env notin (prod),tier in (api,web),z=1"
        );
        assert_eq!(to_string(None), "");
        assert_eq!(to_string(Some(&json!({}))), "");
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_as_kubectl_writes_them() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!app", false),
            ("!gone", true),
            ("app=api", false),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel}");
        }
        for bad in ["app in web", "a=b=c", "=x", "app in (we b)"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors_on_the_supported_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "default"},
                         "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        for (sel, want) in [
            ("spec.nodeName=node-1", true),
            ("spec.nodeName!=node-1", false),
            ("metadata.name==p,status.phase=Running", true),
            ("spec.nodeName=", false),
        ] {
            assert_eq!(
                FieldSelector::parse(sel).expect(sel).matches(&pod),
                want,
                "{sel}"
            );
        }
        let e = FieldSelector::parse("spec.color=red").expect_err("unsupported");
        assert!(e.contains("field label not supported: spec.color"), "{e}");
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
