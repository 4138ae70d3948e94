use serde_json::{json, Value};

use crate::openapi::{components, fragment};

#[test]
fn every_kind_carries_its_group_version_kind() {
    let all = components();
    for kind in [
        "NodePool",
        "Cluster",
        "Operation",
        "L4LoadBalancer",
        "HealthCheck",
        "NetworkEndpointGroup",
        "InstanceGroup",
    ] {
        let schema = &all[&format!("dev.sluice.v1.{kind}")];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{ "group": "sluice.dev", "version": "v1", "kind": kind }])
        );
        assert_eq!(schema["properties"]["kind"]["enum"], json!([kind]));
        assert_eq!(
            schema["properties"]["apiVersion"]["enum"],
            json!(["sluice.dev/v1"])
        );
        assert_eq!(schema["type"], "object");
        assert!(
            schema.get("components").is_none(),
            "definitions are components, not nested"
        );
    }
}

#[test]
fn schemas_use_gke_names_and_resolve_every_ref() {
    let all = components();
    let upgrade = &all["dev.sluice.v1.UpgradeSettings"]["properties"];
    for field in [
        "maxSurge",
        "maxUnavailable",
        "strategy",
        "blueGreenSettings",
    ] {
        assert!(upgrade.get(field).is_some(), "UpgradeSettings.{field}");
    }
    let network = &all["dev.sluice.v1.NetworkConfig"]["properties"];
    assert!(network.get("enableL4ilbSubsetting").is_some());
    let soak = &all["dev.sluice.v1.BlueGreenSettings"]["properties"]["nodePoolSoakDuration"];
    assert_eq!(soak["pattern"], "^-?[0-9]+(\\.[0-9]{1,9})?s$", "{soak}");
    // Every $ref names a component that is there, so the document stands alone.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, c)| match c {
                Value::String(s) if k == "$ref" => out.push(s.clone()),
                _ => refs(c, out),
            }),
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(&Value::Object(all.clone()), &mut found);
    assert!(!found.is_empty());
    for r in found {
        let name = r
            .strip_prefix("#/components/schemas/")
            .expect("component ref");
        assert!(all.contains_key(name), "dangling {r}");
    }
}

#[test]
fn a_fragment_holds_only_its_kind() {
    let f = fragment::<crate::operation::Operation>();
    assert!(f.contains_key("dev.sluice.v1.Operation"));
    assert!(f.contains_key("dev.sluice.v1.OperationProgress"));
    assert!(!f.contains_key("dev.sluice.v1.NodePool"));
}

#[test]
fn optional_fields_are_plain_not_nullable() {
    let text = serde_json::to_string(&components()).expect("json");
    assert!(!text.contains("nullable"), "{text}");
    assert!(!text.contains("\"null\""), "{text}");
    let bg =
        &components()["dev.sluice.v1.BlueGreenSettings"]["properties"]["standardRolloutPolicy"];
    assert_eq!(
        bg["$ref"],
        "#/components/schemas/dev.sluice.v1.StandardRolloutPolicy"
    );
}
