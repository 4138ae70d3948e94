use super::{assert_unknown_field, breaks, round_trip};
use crate::kind::SluiceKind;
use crate::load_balancer::*;
use crate::validation::ErrorKind;

const LB: &str = r#"
apiVersion: sluice.dev/v1
kind: L4LoadBalancer
metadata:
  name: web
  namespace: shop
spec:
  service: web
  type: Internal
  backends: NetworkEndpointGroups
  externalTrafficPolicy: Cluster
  frontends:
  - ipAddress: 198.19.0.10
    port: 80
    protocol: TCP
  - ipAddress: 198.19.0.10
    port: 53
    protocol: UDP
  healthCheck: web
  networkEndpointGroups:
  - web.zone-a
  - web.zone-b
status:
  conditions:
  - type: AnnotationIgnored
    status: "True"
    reason: KindKept
    message: asked for ExternalTargetPool; not converted
    lastTransitionTime: 2026-11-27T05:00:00Z
  warnings:
  - too many
"#;

const HC: &str = r#"
apiVersion: sluice.dev/v1
kind: HealthCheck
metadata:
  name: web
  namespace: shop
spec:
  checkIntervalSec: 5
status:
  port: 10256
  requestPath: /healthz
  checkIntervalSec: 5
  timeoutSec: 1
  healthyThreshold: 1
  unhealthyThreshold: 3
"#;

const NEG: &str = r#"
apiVersion: sluice.dev/v1
kind: NetworkEndpointGroup
metadata:
  name: web.zone-a
  namespace: shop
spec:
  networkEndpointType: GCE_VM_IP
  service: web
  zone: zone-a
  endpoints:
  - instance: node-a1
    ipAddress: 198.18.1.2
    ipv6Address: fd00::1:2
  - instance: node-a2
    ipAddress: 198.18.1.3
"#;

const IG: &str = r#"
apiVersion: sluice.dev/v1
kind: InstanceGroup
metadata:
  name: zone-a
spec:
  zone: zone-a
  instances:
  - name: node-a1
    ipAddress: 198.18.1.2
status:
  warnings:
  - over 250
"#;

#[test]
fn the_schema_examples_round_trip_with_their_scopes() {
    let lb: L4LoadBalancer = round_trip(LB);
    assert_eq!(lb.spec.type_, LoadBalancerType::Internal);
    round_trip::<HealthCheck>(HC);
    round_trip::<NetworkEndpointGroup>(NEG);
    round_trip::<InstanceGroup>(IG);
    // The scope each kind's path takes (kube-rs builds its URLs from it).
    let scopes = [
        L4LoadBalancer::NAMESPACED,
        HealthCheck::NAMESPACED,
        NetworkEndpointGroup::NAMESPACED,
        InstanceGroup::NAMESPACED,
        crate::cluster::Cluster::NAMESPACED,
    ];
    assert_eq!(scopes, [true, true, true, false, false]);
}

#[test]
fn unknown_fields_are_named() {
    assert_unknown_field::<HealthCheck>(
        &HC.replace(
            "checkIntervalSec: 5\nstatus",
            "checkIntervalSecs: 5\nstatus",
        ),
        "spec.checkIntervalSecs",
    );
    assert_unknown_field::<NetworkEndpointGroup>(
        &NEG.replace("ipv6Address: fd00::1:2", "ipv6: fd00::1:2"),
        "spec.endpoints[0].ipv6",
    );
}

/// Overrides are checked by the rules the loop applies, under both
/// policies, each refusal naming the spec field.
#[test]
fn bad_health_check_overrides_name_their_field() {
    type Edit = fn(&mut HealthCheck);
    let cases: [(Edit, &str, &str); 7] = [
        (|h| h.spec.port = Some(70000), "spec.port", "1-65535"),
        (|h| h.spec.port = Some(0), "spec.port", "1-65535"),
        (
            |h| h.spec.request_path = Some("healthz".into()),
            "spec.requestPath",
            "start with '/'",
        ),
        (
            |h| h.spec.check_interval_sec = Some(0),
            "spec.checkIntervalSec",
            "1 or more",
        ),
        (
            |h| h.spec.unhealthy_threshold = Some(11),
            "spec.unhealthyThreshold",
            "at most 10",
        ),
        (
            |h| {
                h.spec.check_interval_sec = Some(2);
                h.spec.timeout_sec = Some(5)
            },
            "spec.timeoutSec",
            "must not exceed checkIntervalSec (2)",
        ),
        // 5 s is within Cluster's 8 s but not Local's 3 s default.
        (
            |h| {
                h.spec.check_interval_sec = None;
                h.spec.timeout_sec = Some(5)
            },
            "spec.timeoutSec",
            "defaults to 3",
        ),
    ];
    for (edit, field, words) in cases {
        breaks::<HealthCheck>(HC, edit, field, ErrorKind::Invalid, words);
    }
    breaks::<HealthCheck>(
        HC,
        |h| h.spec.request_path = Some(format!("/{}", "a".repeat(2000))),
        "spec.requestPath",
        ErrorKind::TooMany,
        "at most 1024",
    );
}

#[test]
fn load_balancer_rules() {
    breaks::<L4LoadBalancer>(
        LB,
        |l| l.spec.frontends[1] = l.spec.frontends[0].clone(),
        "spec.frontends[1]",
        ErrorKind::Duplicate,
        "twice",
    );
    breaks::<L4LoadBalancer>(
        LB,
        |l| l.spec.frontends[0].port = 0,
        "spec.frontends[0].port",
        ErrorKind::Invalid,
        "1-65535",
    );
    breaks::<L4LoadBalancer>(
        LB,
        |l| l.spec.instance_groups = vec!["zone-a".into()],
        "spec.instanceGroups",
        ErrorKind::Forbidden,
        "NetworkEndpointGroups",
    );
    breaks::<L4LoadBalancer>(
        LB,
        |l| l.spec.service.clear(),
        "spec.service",
        ErrorKind::Required,
        "Service",
    );
}

#[test]
fn endpoint_and_instance_rules() {
    breaks::<NetworkEndpointGroup>(
        NEG,
        |n| n.spec.endpoints[1].instance = "node-a1".into(),
        "spec.endpoints[1].instance",
        ErrorKind::Duplicate,
        "twice",
    );
    breaks::<NetworkEndpointGroup>(
        NEG,
        |n| n.spec.endpoints[0].ip_address = "fd00::1".into(),
        "spec.endpoints[0].ipAddress",
        ErrorKind::Invalid,
        "IPv4",
    );
    breaks::<NetworkEndpointGroup>(
        NEG,
        |n| {
            n.spec.endpoints = (0..251)
                .map(|i| NetworkEndpoint {
                    instance: format!("n{i}"),
                    ip_address: format!("198.18.{}.{}", i / 256, i % 256),
                    ipv6_address: None,
                })
                .collect()
        },
        "spec.endpoints",
        ErrorKind::TooMany,
        "at most 250",
    );
    breaks::<InstanceGroup>(
        IG,
        |g| g.spec.instances[0].ipv6_address = Some("198.18.0.1".into()),
        "spec.instances[0].ipv6Address",
        ErrorKind::Invalid,
        "IPv6",
    );
}

#[test]
fn zones_become_dns_labels_and_stay_apart() {
    assert_eq!(zone_label("us-central1-a"), "us-central1-a");
    let odd = zone_label("Zone_A");
    assert!(
        odd.starts_with("zone-a-") && odd.len() == "zone-a-".len() + 8,
        "{odd}"
    );
    assert_ne!(zone_label("zone_a"), zone_label("zone.a"));
    assert_ne!(zone_label("zone_a"), "zone-a");
    let long = zone_label(&"z".repeat(300));
    assert!(long.len() <= 63, "{long}");
    assert!(zone_label("___").starts_with("zone-"));
    assert_eq!(neg_name("web", "zone-a"), "web.zone-a");
}
