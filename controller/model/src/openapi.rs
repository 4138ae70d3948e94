//! OpenAPI v3 schemas of the `sluice.dev/v1` kinds, derived from the Rust
//! types so they cannot drift, for the API server's
//! `/openapi/v3/apis/sluice.dev/v1` (kubectl validates against it and then
//! sends `fieldValidation=Strict`).
//!
//! Component names follow Kubernetes' reversed-domain style
//! (`dev.sluice.v1.NodePool`) so they never collide with `io.k8s.*`.

use schemars::generate::SchemaSettings;
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::cluster::Cluster;
use crate::kind::{SluiceKind, GROUP, VERSION};
use crate::load_balancer::{HealthCheck, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup};
use crate::node_pool::NodePool;
use crate::operation::Operation;

const REF_PREFIX: &str = "#/components/schemas/";
const NAME_PREFIX: &str = "dev.sluice.v1.";

/// The component schemas of kind `K` (the kind itself and every type it
/// uses), keyed by component name, ready to merge into a document's
/// `components.schemas`. The kind's own schema carries
/// `x-kubernetes-group-version-kind`.
pub fn fragment<K: SluiceKind>() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let root = generator.root_schema_for::<K>();
    let mut out = Map::new();
    for (name, schema) in generator.take_definitions(true) {
        out.insert(format!("{NAME_PREFIX}{name}"), tidy(schema));
    }
    let mut root = tidy(root.to_value());
    if let Some(obj) = root.as_object_mut() {
        // The generator's own keys make no sense inside a component: its
        // copy of the definitions is already in `out`.
        obj.remove("$schema");
        obj.remove("components");
        obj.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{ "group": GROUP, "version": VERSION, "kind": K::KIND }]),
        );
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(
                "apiVersion".into(),
                json!({ "type": "string", "enum": [K::API_VERSION] }),
            );
            props.insert(
                "kind".into(),
                json!({ "type": "string", "enum": [K::KIND] }),
            );
        }
    }
    out.insert(format!("{NAME_PREFIX}{}", K::KIND), root);
    out
}

/// The component schemas of every `sluice.dev/v1` kind.
pub fn components() -> Map<String, Value> {
    let mut all = fragment::<NodePool>();
    all.extend(fragment::<Cluster>());
    all.extend(fragment::<Operation>());
    all.extend(fragment::<L4LoadBalancer>());
    all.extend(fragment::<HealthCheck>());
    all.extend(fragment::<NetworkEndpointGroup>());
    all.extend(fragment::<InstanceGroup>());
    all
}

/// Rewrite `#/components/schemas/X` as `#/components/schemas/dev.sluice.v1.X`,
/// and describe an optional field as its value's type: Kubernetes leaves
/// absent fields out rather than writing `null`, so schemars' `nullable`
/// and `anyOf: [X, null]` only get in a structural reader's way.
fn tidy(mut value: Value) -> Value {
    fn is_null(v: &Value) -> bool {
        v.get("enum") == Some(&json!([null]))
    }
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("nullable");
                let optional = match map.get("anyOf") {
                    Some(Value::Array(any)) if any.len() == 2 && is_null(&any[1]) => {
                        Some(any[0].clone())
                    }
                    _ => None,
                };
                if let Some(Value::Object(inner)) = optional {
                    map.remove("anyOf");
                    for (k, x) in inner {
                        map.entry(k).or_insert(x);
                    }
                }
                for (k, child) in map.iter_mut() {
                    match child {
                        Value::String(s) if k == "$ref" => {
                            if let Some(name) = s.strip_prefix(REF_PREFIX) {
                                *s = format!("{REF_PREFIX}{NAME_PREFIX}{name}");
                            }
                        }
                        _ => walk(child),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// `metadata`: Kubernetes' ObjectMeta, described here as an open object
/// until the server serves the `io.k8s.*` components it could refer to.
pub(crate) fn object_meta(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Standard object metadata (io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta)."
    })
}

/// A Kubernetes `Time`: RFC 3339, kept in UTC.
pub(crate) fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}

/// A Kubernetes `Quantity`: `4`, `500m`, `16Gi`.
pub(crate) fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true, "anyOf": [{ "type": "integer" }, { "type": "string" }] })
}

/// A field whose object has its owner's schema, not this one's: kept
/// whole (`x-kubernetes-preserve-unknown-fields`).
pub(crate) fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}
