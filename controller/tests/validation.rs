//! kube-apiserver's validation of the built-in kinds, through the real
//! kubectl: invalid manifests are refused with upstream's text, every
//! error of an object at once, whether applied, patched or applied
//! server-side; updates upstream forbids (a Deployment's selector, a
//! Pod's container renamed) are refused; and nothing refused is stored.

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};

const BAD_SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: bad-svc, namespace: default}
spec:
  type: Foo
  externalTrafficPolicy: Bogus
  ports:
  - {name: web, port: 70000, protocol: TCPX, targetPort: 80}
  - {name: web, port: 81}
";

const BAD_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: bad-pod, namespace: default}
spec:
  restartPolicy: Sometimes
  containers:
  - name: Bad_Name
    ports: [{containerPort: 0}]
";

const BAD_NODE: &str = "apiVersion: v1
kind: Node
metadata: {name: bad-node}
spec:
  taints: [{key: dedicated, value: x, effect: Sometimes}]
";

const BAD_LEASE: &str = "apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: bad-lease, namespace: default}
spec: {holderIdentity: me, leaseDurationSeconds: 0}
";

const BAD_SLICE: &str = "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: bad-slice, namespace: default}
addressType: IPv7
endpoints: [{addresses: [10.0.0.1]}]
";

const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x}]}
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: good, namespace: default}
spec: {containers: [{name: c, image: x}]}
";

/// `kubectl args` must fail, its output holding each of `want`.
fn refused(s: &Server, args: &[&str], want: &[String]) {
    let o = s.kubectl("admin", args);
    let out = text(&o);
    assert!(!o.status.success(), "{args:?} was accepted: {out}");
    for w in want {
        assert!(out.contains(w.as_str()), "{args:?}: want {w:?} in\n{out}");
    }
}

fn validation(backend: Backend) {
    let s = Server::start(&format!("validation-{backend:?}").to_lowercase(), backend);
    let svc = write(&s, "svc.yaml", BAD_SERVICE);
    let service_errors = vec![
        "The Service \"bad-svc\" is invalid".to_string(),
        "* spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive".into(),
        "* spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\"".into(),
        "* spec.ports[1].name: Duplicate value: \"web\"".into(),
        "* spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"".into(),
        "* spec.externalTrafficPolicy: Invalid value: \"Bogus\": may only be set for externally-accessible services".into(),
    ];
    refused(&s, &["apply", "-f", &svc], &service_errors);
    refused(&s, &["create", "-f", &svc], &service_errors);
    refused(&s, &["apply", "--server-side", "-f", &svc], &service_errors);

    let pod = write(&s, "pod.yaml", BAD_POD);
    refused(
        &s,
        &["apply", "-f", &pod],
        &[
            "The Pod \"bad-pod\" is invalid".to_string(),
            format!("* spec.containers[0].name: Invalid value: \"Bad_Name\": {LABEL}"),
            "* spec.containers[0].image: Required value".into(),
            "* spec.containers[0].ports[0].containerPort: Required value".into(),
            "* spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".into(),
        ],
    );
    // One error: kubectl prints it on the same line.
    for (file, manifest, want) in [
        ("node.yaml", BAD_NODE, "The Node \"bad-node\" is invalid: metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""),
        ("lease.yaml", BAD_LEASE, "The Lease \"bad-lease\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
        ("slice.yaml", BAD_SLICE, "The EndpointSlice \"bad-slice\" is invalid: addressType: Unsupported value: \"IPv7\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""),
    ] {
        let f = write(&s, file, manifest);
        refused(&s, &["apply", "-f", &f], &[want.to_string()]);
    }
    let stored = ok(
        &s,
        "admin",
        &[
            "get",
            "services,pods,leases,endpointslices,nodes",
            "-A",
            "-o",
            "name",
        ],
    );
    for name in ["bad-svc", "bad-pod", "bad-node", "bad-lease", "bad-slice"] {
        assert!(!stored.contains(name), "{name} was stored:\n{stored}");
    }

    // A valid Service made invalid by a patch: refused, kept as it was.
    let good = write(&s, "good-svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: good-svc, namespace: default}\nspec: {ports: [{port: 80}]}\n");
    ok(&s, "admin", &["apply", "-f", &good]);
    refused(
        &s,
        &[
            "patch",
            "service",
            "good-svc",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/ports/0/port", "value": 70000}]"#,
        ],
        &[
            "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
                .to_string(),
        ],
    );
    refused(
        &s,
        &["patch", "service", "good-svc", "--type=merge", "-p", r#"{"spec": {"sessionAffinity": "Sometimes"}}"#],
        &["spec.sessionAffinity: Unsupported value: \"Sometimes\": supported values: \"ClientIP\", \"None\"".to_string()],
    );
    let port = ok(
        &s,
        "admin",
        &[
            "get",
            "service",
            "good-svc",
            "-o",
            "jsonpath={.spec.ports[0].port} {.spec.sessionAffinity}",
        ],
    );
    assert_eq!(port.trim(), "80 None");

    // apps/v1 keeps a Deployment's selector.
    let d = write(&s, "deploy.yaml", DEPLOYMENT);
    ok(&s, "admin", &["apply", "-f", &d]);
    let moved = write(
        &s,
        "moved.yaml",
        &DEPLOYMENT.replace("app: web", "app: other"),
    );
    refused(
        &s,
        &["apply", "-f", &moved],
        &["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"other\"}}: field is immutable".to_string()],
    );
    let sel = ok(
        &s,
        "admin",
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.selector.matchLabels.app}",
        ],
    );
    assert_eq!(sel.trim(), "web");

    // A pod's containers are fixed once created; its image is not.
    let p = write(&s, "good-pod.yaml", POD);
    ok(&s, "admin", &["apply", "-f", &p]);
    let renamed = write(&s, "renamed.yaml", &POD.replace("name: c,", "name: d,"));
    refused(
        &s,
        &["replace", "-f", &renamed],
        &["spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`".to_string()],
    );
    ok(&s, "admin", &["set", "image", "pod/good", "c=y"]);
    let c = ok(
        &s,
        "admin",
        &[
            "get",
            "pod",
            "good",
            "-o",
            "jsonpath={.spec.containers[0].name} {.spec.containers[0].image}",
        ],
    );
    assert_eq!(c.trim(), "c y");
}

on_both_stores!(validation);
