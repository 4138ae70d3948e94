//! The L4 load balancer's objects through the API with the real kubectl
//! (issue 11): `kubectl get l4lb,hc,neg,ig` prints each kind's columns
//! by its short name, a HealthCheck override the loop could not apply is
//! refused naming its field (also by `kubectl patch`), the load balancer's
//! identity reads its four kinds and nothing else, and a Cluster's
//! subsetting is turned on with its time kept and never turned off (N5).

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};

const OBJECTS: &str = "apiVersion: sluice.dev/v1
kind: L4LoadBalancer
metadata: {name: web, namespace: default}
spec:
  service: web
  type: Internal
  backends: NetworkEndpointGroups
  externalTrafficPolicy: Cluster
  frontends:
  - {ipAddress: 198.19.0.10, port: 80, protocol: TCP}
  - {ipAddress: 198.19.0.10, port: 53, protocol: UDP}
  healthCheck: web
  networkEndpointGroups: [web.zone-a, web.zone-b]
---
apiVersion: sluice.dev/v1
kind: HealthCheck
metadata: {name: web, namespace: default}
spec: {checkIntervalSec: 5}
---
apiVersion: sluice.dev/v1
kind: NetworkEndpointGroup
metadata: {name: web.zone-a, namespace: default}
spec:
  networkEndpointType: GCE_VM_IP
  service: web
  zone: zone-a
  endpoints:
  - {instance: node-a1, ipAddress: 198.18.1.2, ipv6Address: 'fd00::1:2'}
  - {instance: node-a2, ipAddress: 198.18.1.3}
---
apiVersion: sluice.dev/v1
kind: InstanceGroup
metadata: {name: zone-a}
spec:
  zone: zone-a
  instances:
  - {name: node-a1, ipAddress: 198.18.1.2}
";

/// The header and the row named `name` of one kind's table in `out`
/// (kubectl prints a table per kind, each with its header).
fn row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    let mut head = Vec::new();
    for l in out.lines() {
        let w = words(l);
        if w.first().map(String::as_str) == Some("NAME") {
            head = w;
        } else if w.first().map(String::as_str) == Some(name) {
            return (head, w);
        }
    }
    panic!("no row {name} in:\n{out}");
}

/// A merge patch of the HealthCheck `web` as the admin, which must fail;
/// what kubectl printed.
fn refused_hc_patch(s: &Server, patch: &str) -> String {
    let o = s.kubectl(
        "admin",
        &["patch", "hc", "web", "--type=merge", "-p", patch],
    );
    assert!(!o.status.success(), "{patch}");
    text(&o)
}

fn objects_print_and_refuse(backend: Backend) {
    let s = Server::start(&format!("l4-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "lb.yaml", OBJECTS);
    ok(&s, "admin", &["apply", "-f", &f]);
    // The effective check is the status the loop writes; here by hand.
    ok(
        &s,
        "admin",
        &[
            "patch",
            "hc",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"port":10256,"requestPath":"/healthz","checkIntervalSec":5,"timeoutSec":1,"healthyThreshold":1,"unhealthyThreshold":3}}"#,
        ],
    );
    ok(
        &s,
        "admin",
        &[
            "patch",
            "l4lb",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"members":2}}"#,
        ],
    );
    let out = ok(&s, "admin", &["get", "l4lb,hc,neg,ig"]);
    let (head, lb) = row(&out, "l4loadbalancer.sluice.dev/web");
    assert_eq!(
        head,
        ["NAME", "TYPE", "POLICY", "FRONTENDS", "BACKENDS", "AGE"]
    );
    assert_eq!(
        &lb[1..5],
        [
            "Internal",
            "Cluster",
            "198.19.0.10:80/TCP,198.19.0.10:53/UDP",
            "2/2"
        ]
    );
    let (head, hc) = row(&out, "healthcheck.sluice.dev/web");
    assert_eq!(
        head,
        [
            "NAME",
            "PORT",
            "PATH",
            "INTERVAL",
            "TIMEOUT",
            "HEALTHY",
            "UNHEALTHY"
        ]
    );
    assert_eq!(&hc[1..], ["10256", "/healthz", "5s", "1s", "1", "3"]);
    let (head, neg) = row(&out, "networkendpointgroup.sluice.dev/web.zone-a");
    assert_eq!(head, ["NAME", "SERVICE", "ZONE", "ENDPOINTS", "AGE"]);
    assert_eq!(&neg[1..4], ["web", "zone-a", "2"]);
    let (head, ig) = row(&out, "instancegroup.sluice.dev/zone-a");
    assert_eq!(head, ["NAME", "ZONE", "INSTANCES", "AGE"]);
    assert_eq!(&ig[1..3], ["zone-a", "1"]);

    // A bad override: refused with a 422 naming the field, by apply and
    // by patch; the stored check is unchanged.
    let bad = write(
        &s,
        "bad.yaml",
        "apiVersion: sluice.dev/v1\nkind: HealthCheck\nmetadata: {name: web, namespace: default}\nspec: {checkIntervalSec: 2, timeoutSec: 5}\n",
    );
    let o = s.kubectl("admin", &["apply", "-f", &bad]);
    assert!(!o.status.success());
    assert!(text(&o).contains("spec.timeoutSec"), "{}", text(&o));
    // kubectl prints a 422's Status as "<Kind> <name> is invalid: <field>: ...".
    let t = refused_hc_patch(&s, r#"{"spec":{"port":70000}}"#);
    assert!(
        t.contains("is invalid") && t.contains("spec.port: must be 1-65535"),
        "{t}"
    );
    let t = refused_hc_patch(&s, r#"{"spec":{"requestPath":"healthz"}}"#);
    assert!(t.contains("spec.requestPath"), "{t}");
    let kept = ok(&s, "admin", &["get", "hc", "web", "-o", "jsonpath={.spec}"]);
    assert_eq!(kept, r#"{"checkIntervalSec":5}"#);
    // Unknown fields and duplicate endpoints are refused too.
    let o = s.kubectl(
        "admin",
        &["patch", "neg", "web.zone-a", "--type=json", "-p",
          r#"[{"op":"add","path":"/spec/endpoints/-","value":{"instance":"node-a1","ipAddress":"198.18.1.9"}}]"#],
    );
    assert!(
        text(&o).contains("spec.endpoints[2].instance"),
        "{}",
        text(&o)
    );
    let typo = write(
        &s,
        "typo.yaml",
        "apiVersion: sluice.dev/v1\nkind: InstanceGroup\nmetadata: {name: zone-b}\nspec: {zone: zone-b, instance: []}\n",
    );
    let o = s.kubectl("admin", &["apply", "-f", &typo]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("spec.instance"), "{}", text(&o));

    // The load balancer reads its kinds, writes nothing, reads nothing else.
    let lb_out = ok(&s, "load-balancer", &["get", "l4lb,hc,neg", "-A"]);
    assert!(lb_out.contains("web.zone-a"), "{lb_out}");
    ok(&s, "load-balancer", &["get", "ig", "zone-a"]);
    for args in [
        &["delete", "l4lb", "web"][..],
        &["get", "pods"],
        &["get", "nodes"],
        &[
            "patch",
            "hc",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"port":1}}"#,
        ],
    ] {
        let o = s.kubectl("load-balancer", args);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            text(&o).contains("Forbidden") || text(&o).contains("forbidden"),
            "{args:?}: {}",
            text(&o)
        );
    }
}

// spec: N5
fn subsetting_on_never_off(backend: Backend) {
    let s = Server::start(&format!("l4-n5-{backend:?}").to_lowercase(), backend);
    let f = write(
        &s,
        "cluster.yaml",
        "apiVersion: sluice.dev/v1\nkind: Cluster\nmetadata: {name: default}\nspec: {}\n",
    );
    ok(&s, "admin", &["apply", "-f", &f]);
    let since = |s: &Server| {
        ok(
            s,
            "admin",
            &[
                "get",
                "cluster",
                "default",
                "-o",
                "jsonpath={.status.l4ilbSubsettingEnabledSince}",
            ],
        )
    };
    assert_eq!(since(&s), "");
    let on = r#"{"spec":{"networkConfig":{"enableL4ilbSubsetting":true}}}"#;
    ok(
        &s,
        "admin",
        &["patch", "cluster", "default", "--type=merge", "-p", on],
    );
    let first = since(&s);
    assert!(first.ends_with('Z'), "{first:?}");
    // A status write cannot move or drop the time.
    ok(
        &s,
        "admin",
        &[
            "patch",
            "cluster",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"l4ilbSubsettingEnabledSince":null,"statusMessage":"x"}}"#,
        ],
    );
    assert_eq!(since(&s), first);
    for off in [
        r#"{"spec":{"networkConfig":{"enableL4ilbSubsetting":false}}}"#,
        r#"{"spec":{"networkConfig":null}}"#,
    ] {
        let o = s.kubectl(
            "admin",
            &["patch", "cluster", "default", "--type=merge", "-p", off],
        );
        assert!(!o.status.success(), "{off}");
        let t = text(&o);
        assert!(
            t.contains("spec.networkConfig.enableL4ilbSubsetting") && t.contains("never off"),
            "{t}"
        );
    }
    assert_eq!(since(&s), first);
}

on_both_stores!(objects_print_and_refuse, subsetting_on_never_off);
