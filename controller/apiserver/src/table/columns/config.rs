//! The columns of ConfigMaps and Secrets, as kube-apiserver prints them:
//! how many keys each holds, never a value.

use serde_json::Value;
use sluice_model::k8s::jiff::Timestamp;

use super::{col, str_at, Cell, Cells, Column, AGE, NAME};

fn keys(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr)
        .and_then(Value::as_object)
        .map_or(0, |m| i64::try_from(m.len()).unwrap_or(i64::MAX))
}

fn config_map(c: &Value, now: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(c),
        // Both bags: upstream counts binaryData's keys too.
        Cell::Int(keys(c, "/data").saturating_add(keys(c, "/binaryData"))),
        Cell::age(c, now),
    ]
}

fn secret(s: &Value, now: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(s),
        Cell::Str(str_at(s, "/type").unwrap_or_default().into()),
        Cell::Int(keys(s, "/data")),
        Cell::age(s, now),
    ]
}

pub fn for_kind(kind: &str) -> Option<(Vec<Column>, Cells)> {
    // Upstream types the counts as strings; clients print them alike.
    let found: (Vec<Column>, Cells) = match kind {
        "ConfigMap" => (
            vec![
                NAME,
                col("Data", "Data contains the configuration data."),
                AGE,
            ],
            config_map,
        ),
        "Secret" => (
            vec![
                NAME,
                col(
                    "Type",
                    "Used to facilitate programmatic handling of secret data.",
                ),
                col("Data", "Data contains the secret data."),
                AGE,
            ],
            secret,
        ),
        _ => return None,
    };
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::super::tests::strs;
    use serde_json::json;

    #[test]
    fn counts_keys_and_shows_no_value() {
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": "2026-11-23T11:59:00Z"},
                        "data": {"a": "1", "b": "2"}, "binaryData": {"c": "eA=="}});
        assert_eq!(strs("ConfigMap", cm), ["cfg", "3", "60s"]);
        let s = json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                       "data": {"tls.crt": "c2VjcmV0", "tls.key": "c2VjcmV0"}});
        let row = strs("Secret", s);
        assert_eq!(&row[..3], ["tls", "kubernetes.io/tls", "2"]);
        assert!(!row.concat().contains("c2VjcmV0"), "{row:?}");
        assert_eq!(&strs("Secret", json!({}))[1..3], ["", "0"]);
    }
}
