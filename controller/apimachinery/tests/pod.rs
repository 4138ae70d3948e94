//! Pod validation, case by case from upstream's pod and container tests:
//! each fragment over a valid pod, with the exact errors; then updates.

mod common;
use common::*;
use serde_json::{json, Value};

fn ctr(extra: Value) -> Value {
    merge(
        &json!({"name": "ctr", "image": "image", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}),
        &extra,
    )
}

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [ctr(json!({}))], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                 "terminationGracePeriodSeconds": 30}})
}

fn containers(list: Vec<Value>) -> Value {
    json!({"spec": {"containers": list}})
}

fn one(extra: Value) -> Value {
    containers(vec![ctr(extra)])
}

const C0: &str = "spec.containers[0]";

#[test]
fn invalid_pods() {
    let long = "a".repeat(64);
    let cases = vec![
        ("no containers", json!({"spec": {"containers": []}}), vec![s("spec.containers: Required value")]),
        ("container without a name", one(json!({"name": ""})), vec![format!("{C0}.name: Required value")]),
        ("container named Bad_Name", one(json!({"name": "Bad_Name"})),
            vec![format!("{C0}.name: Invalid value: \"Bad_Name\": {LABEL}")]),
        ("container without an image", one(json!({"image": ""})), vec![format!("{C0}.image: Required value")]),
        ("container name too long", one(json!({"name": long})),
            vec![format!("{C0}.name: Invalid value: \"{long}\": must be no more than 63 characters")]),
        ("container name with dots", one(json!({"name": "a.b.c"})),
            vec![format!("{C0}.name: Invalid value: \"a.b.c\": must not contain dots")]),
        ("two containers named abc", containers(vec![ctr(json!({"name": "abc"})), ctr(json!({"name": "abc"}))]),
            vec![s("spec.containers[1].name: Duplicate value: \"abc\"")]),
        ("init container named as a container", json!({"spec": {"containers": [ctr(json!({"name": "app"}))],
                "initContainers": [ctr(json!({"name": "app"}))]}}),
            vec![s("spec.initContainers[0].name: Duplicate value: \"app\"")]),
        ("host port twice across containers", containers(vec![
                ctr(json!({"name": "abc", "ports": [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]})),
                ctr(json!({"name": "def", "ports": [{"containerPort": 81, "hostPort": 80, "protocol": "TCP"}]}))]),
            vec![s("spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//80\"")]),
        ("host port twice in an init container", json!({"spec": {"initContainers": [ctr(json!({"name": "init", "ports": [
                {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"},
                {"containerPort": 8081, "hostPort": 8080, "protocol": "TCP"}]}))]}}),
            vec![s("spec.initContainers[0].ports[1].hostPort: Duplicate value: \"TCP//8080\"")]),
        ("container port 0", one(json!({"ports": [{"containerPort": 0, "protocol": "TCP"}]})),
            vec![format!("{C0}.ports[0].containerPort: Required value")]),
        ("container port 70000 on TCPX", one(json!({"ports": [{"containerPort": 70000, "protocol": "TCPX"}]})),
            vec![format!("{C0}.ports[0].containerPort: Invalid value: 70000: {PORT_RANGE}"),
                 format!("{C0}.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\"")]),
        ("port name with capitals", one(json!({"ports": [{"name": "Http", "containerPort": 80, "protocol": "TCP"}]})),
            vec![format!("{C0}.ports[0].name: Invalid value: \"Http\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")]),
        ("env var name ev!1", one(json!({"env": [{"name": "ev!1"}]})),
            vec![format!("{C0}.env[0].name: Invalid value: \"ev!1\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')")]),
        ("mount of no volume", one(json!({"volumeMounts": [{"name": "anything", "mountPath": "/foo"}]})),
            vec![format!("{C0}.volumeMounts[0].name: Not found: \"anything\"")]),
        ("preStop exec without a command", one(json!({"lifecycle": {"preStop": {"exec": {}}}})),
            vec![format!("{C0}.lifecycle.preStop.exec.command: Required value")]),
        ("preStop httpGet without a path", one(json!({"lifecycle": {"preStop": {"httpGet": {"port": 80, "scheme": "HTTP"}}}})),
            vec![format!("{C0}.lifecycle.preStop.httpGet.path: Required value")]),
        ("preStop httpGet port 0", one(json!({"lifecycle": {"preStop": {"httpGet": {"path": "/", "port": 0, "scheme": "HTTP"}}}})),
            vec![format!("{C0}.lifecycle.preStop.httpGet.port: Invalid value: 0: {PORT_RANGE}")]),
        ("preStop httpGet without a scheme", one(json!({"lifecycle": {"preStop": {"httpGet": {"path": "/", "port": 80}}}})),
            vec![format!("{C0}.lifecycle.preStop.httpGet.scheme: Unsupported value: \"\": supported values: \"HTTP\", \"HTTPS\"")]),
        ("preStop without a handler", one(json!({"lifecycle": {"preStop": {}}})),
            vec![format!("{C0}.lifecycle.preStop: Required value: must specify a handler type")]),
        ("readiness probe with a grace period", one(json!({"readinessProbe": {"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 10}})),
            vec![format!("{C0}.readinessProbe.terminationGracePeriodSeconds: Invalid value: 10: must not be set for readinessProbes")]),
        ("liveness probe success threshold 2", one(json!({"livenessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 2}})),
            vec![format!("{C0}.livenessProbe.successThreshold: Invalid value: 2: must be 1")]),
        ("liveness probe all -1", one(json!({"livenessProbe": {"tcpSocket": {"port": 80}, "initialDelaySeconds": -1, "timeoutSeconds": -1,
                "periodSeconds": -1, "successThreshold": -1, "failureThreshold": -1, "terminationGracePeriodSeconds": -1}})),
            ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"].iter()
                .map(|f| format!("{C0}.livenessProbe.{f}: Invalid value: -1: must be greater than or equal to 0"))
                .chain([format!("{C0}.livenessProbe.terminationGracePeriodSeconds: Invalid value: -1: must be greater than 0"),
                        format!("{C0}.livenessProbe.successThreshold: Invalid value: -1: must be 1")])
                .collect()),
        ("liveness probe without a handler", one(json!({"livenessProbe": {"successThreshold": 1}})),
            vec![format!("{C0}.livenessProbe: Required value: must specify a handler type")]),
        ("two handlers", one(json!({"livenessProbe": {"successThreshold": 1, "exec": {"command": ["x"]}, "tcpSocket": {"port": 80}}})),
            vec![format!("{C0}.livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type")]),
        ("termination message policy Unknown", one(json!({"terminationMessagePolicy": "Unknown"})),
            vec![format!("{C0}.terminationMessagePolicy: Unsupported value: \"Unknown\": supported values: \"File\", \"FallbackToLogsOnError\"")]),
        ("pull policy Sometimes", one(json!({"imagePullPolicy": "Sometimes"})),
            vec![format!("{C0}.imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"")]),
        ("a disk limit", one(json!({"resources": {"limits": {"disk": "10G"}}})),
            vec![format!("{C0}.resources.limits[disk]: Invalid value: \"disk\": must be a standard resource type or fully qualified"),
                 format!("{C0}.resources.limits[disk]: Invalid value: \"disk\": must be a standard resource for containers")]),
        ("a negative cpu limit", one(json!({"resources": {"limits": {"cpu": "-10"}}})),
            vec![format!("{C0}.resources.limits[cpu]: Invalid value: \"-10\": must be greater than or equal to 0")]),
        ("request over its limit", one(json!({"resources": {"limits": {"cpu": "5", "memory": "3"}, "requests": {"cpu": "6", "memory": "3"}}})),
            vec![format!("{C0}.resources.requests: Invalid value: \"6\": must be less than or equal to cpu limit of 5")]),
        ("envFrom a bad config map name", one(json!({"envFrom": [{"configMapRef": {"name": "$%^&*#"}}]})),
            vec![format!("{C0}.envFrom[0].configMapRef.name: Invalid value: \"$%^&*#\": {SUBDOMAIN}")]),
        ("envFrom no source", one(json!({"envFrom": [{"prefix": "a"}]})),
            vec![format!("{C0}.envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`")]),
        ("container restartPolicy", one(json!({"restartPolicy": "Always"})),
            vec![format!("{C0}.restartPolicy: Forbidden: may not be set for non-init containers")]),
        ("init container restartPolicy OnFailure", json!({"spec": {"initContainers": [ctr(json!({"name": "init", "restartPolicy": "OnFailure"}))]}}),
            vec![s("spec.initContainers[0].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"")]),
        ("init container with a liveness probe", json!({"spec": {"initContainers": [ctr(json!({"name": "init",
                "livenessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 1}}))]}}),
            vec![s("spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always")]),
        ("dnsPolicy invalid", json!({"spec": {"dnsPolicy": "invalid"}}),
            vec![s("spec.dnsPolicy: Unsupported value: \"invalid\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"")]),
        ("restartPolicy Sometimes", json!({"spec": {"restartPolicy": "Sometimes"}}),
            vec![s("spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"")]),
        ("service account invalidName", json!({"spec": {"serviceAccountName": "invalidName"}}),
            vec![format!("spec.serviceAccountName: Invalid value: \"invalidName\": {SUBDOMAIN}")]),
        ("host network with another host port", json!({"spec": {"hostNetwork": true, "containers": [ctr(json!({"ports": [
                {"containerPort": 2600, "hostPort": 8080, "protocol": "TCP"}]}))]}}),
            vec![s("spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true")]),
        ("host alias IP 999.999.999.999", json!({"spec": {"hostAliases": [{"ip": "999.999.999.999", "hostnames": ["host1"]}]}}),
            vec![s("spec.hostAliases[0].ip: Invalid value: \"999.999.999.999\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]),
        ("host alias bad host name", json!({"spec": {"hostAliases": [{"ip": "12.34.56.78", "hostnames": ["@#$^#@#$"]}]}}),
            vec![format!("spec.hostAliases[0].hostnames[0]: Invalid value: \"@#$^#@#$\": {SUBDOMAIN}")]),
        ("runAsUser 2147483648", json!({"spec": {"securityContext": {"runAsUser": 2147483648_i64}}}),
            vec![s("spec.securityContext.runAsUser: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive")]),
        ("activeDeadlineSeconds 0", json!({"spec": {"activeDeadlineSeconds": 0}}),
            vec![s("spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive")]),
        ("node name with a space", json!({"spec": {"nodeName": "node name"}}),
            vec![format!("spec.nodeName: Invalid value: \"node name\": {SUBDOMAIN}")]),
        ("hostPID and a shared process namespace", json!({"spec": {"hostPID": true, "shareProcessNamespace": true}}),
            vec![s("spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled")]),
        ("preferred node affinity weight 199", json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 199, "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}}]}}}}),
            vec![s("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 199: must be in the range 1-100")]),
        ("no node selector terms", json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}}),
            vec![s("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term")]),
        ("pod affinity namespace INVALID_NAMESPACE", json!({"spec": {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": {"namespaces": ["INVALID_NAMESPACE"], "topologyKey": "zone"}}]}}}}),
            vec![format!("spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespace: Invalid value: \"INVALID_NAMESPACE\": {LABEL}")]),
        ("pod affinity without a topology key", json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}}]}}}}),
            vec![s("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"),
                 s("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: \"\": name part must be non-empty"),
                 format!("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: \"\": {NAME_PART}")]),
        ("toleration without a key, operator Equal", json!({"spec": {"tolerations": [{"operator": "Equal", "value": "bar"}]}}),
            vec![s("spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"")]),
        ("toleration seconds on NoSchedule", json!({"spec": {"tolerations": [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule", "tolerationSeconds": 60}]}}),
            vec![s("spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set")]),
        ("toleration effect Sometimes", json!({"spec": {"tolerations": [{"key": "foo", "operator": "Exists", "effect": "Sometimes"}]}}),
            vec![s("spec.tolerations[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"")]),
        ("spread with maxSkew 0", json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]}}),
            vec![s("spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero")]),
        ("spread twice by zone", json!({"spec": {"topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}),
            vec![s("spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, DoNotSchedule}\"")]),
        ("a volume without a source", json!({"spec": {"volumes": [{"name": "vol"}]}}),
            vec![s("spec.volumes[0]: Required value: must specify a volume type")]),
        ("a config map volume without a name", json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": ""}}]}}),
            vec![s("spec.volumes[0].configMap.name: Required value")]),
        ("a secret volume mode 01000", json!({"spec": {"volumes": [{"name": "v", "secret": {"secretName": "s", "defaultMode": 0o1000}}]}}),
            vec![s("spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive")]),
        ("two volume sources", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}, "configMap": {"name": "c"}}]}}),
            vec![s("spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type")]),
        ("ephemeral containers on create", json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox",
                "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}}),
            vec![s("spec.ephemeralContainers: Forbidden: cannot be set on create")]),
        ("an image with a leading space", one(json!({"image": " image"})),
            vec![format!("{C0}.image: Invalid value: \" image\": must not have leading or trailing whitespace")]),
        ("mirror annotation without a node", json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            vec![s("metadata.annotations[kubernetes.io/config.mirror]: Invalid value: \"x\": must set spec.nodeName if mirror pod annotation is set")]),
        ("no grace period", json!({"spec": {"terminationGracePeriodSeconds": null}}),
            vec![s("spec.terminationGracePeriodSeconds: Required value")]),
        ("bad pod name", json!({"metadata": {"name": "Bad_Name"}}),
            vec![format!("metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN}")]),
    ];
    assert!(cases.len() >= 20);
    table("", "Pod", &base(), &cases);
}

#[test]
fn valid_edge_cases() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "a 63-character container name",
            one(json!({"name": "a".repeat(63)})),
            vec![],
        ),
        (
            "container port 65535 and host port 1",
            one(json!({"ports": [{"containerPort": 65535, "hostPort": 1, "protocol": "UDP"}]})),
            vec![],
        ),
        (
            "the same host port on TCP and UDP",
            one(json!({"ports": [
            {"containerPort": 53, "hostPort": 53, "protocol": "TCP"}, {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]})),
            vec![],
        ),
        (
            "a sidecar with probes",
            json!({"spec": {"initContainers": [ctr(json!({"name": "side", "restartPolicy": "Always",
            "livenessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 1}}))]}}),
            vec![],
        ),
        (
            "mounts of a good volume",
            json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [ctr(json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]}))]}}),
            vec![],
        ),
        (
            "activeDeadlineSeconds at its maximum",
            json!({"spec": {"activeDeadlineSeconds": 2147483647_i64}}),
            vec![],
        ),
        (
            "a negative toleration seconds",
            json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -1}]}}),
            vec![],
        ),
        (
            "secret mode 0777",
            json!({"spec": {"volumes": [{"name": "v", "secret": {"secretName": "s", "defaultMode": 0o777}}]}}),
            vec![],
        ),
        (
            "host network with equal ports",
            json!({"spec": {"hostNetwork": true, "containers": [ctr(json!({"ports": [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]}))]}}),
            vec![],
        ),
        (
            "request equal to its limit",
            one(json!({"resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "0.5"}}})),
            vec![],
        ),
    ];
    table("", "Pod", &base(), &cases);
}

#[test]
fn updates() {
    let forbidden = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n";
    let cases: Vec<(&str, Value, Value, Vec<String>)> = vec![
        ("image changed", json!({}), one(json!({"image": "image:2"})), vec![]),
        ("container renamed", json!({}), one(json!({"name": "other"})),
            vec![format!("{forbidden}  containers: [{{\"image\":\"image\",\"imagePullPolicy\":\"IfNotPresent\",\"name\":\"ctr\",\"terminationMessagePolicy\":\"File\"}}] -> [{{\"image\":\"image\",\"imagePullPolicy\":\"IfNotPresent\",\"name\":\"other\",\"terminationMessagePolicy\":\"File\"}}]")]),
        ("a container added", json!({}), containers(vec![ctr(json!({})), ctr(json!({"name": "two"}))]),
            vec![s("spec.containers: Forbidden: pod updates may not add or remove containers")]),
        ("image emptied", json!({}), one(json!({"image": ""})),
            vec![format!("{C0}.image: Required value"), format!("{C0}.image: Required value")]),
        ("toleration value changed", json!({"spec": {"tolerations": [{"key": "k", "operator": "Equal", "value": "value1"}]}}),
            json!({"spec": {"tolerations": [{"key": "k", "operator": "Equal", "value": "value2"}]}}),
            vec![s("spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds")]),
        ("toleration added", json!({}), json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}), vec![]),
        ("toleration seconds changed", json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]}}),
            json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}]}}), vec![]),
        ("scheduling gate added", json!({}), json!({"spec": {"schedulingGates": [{"name": "foo"}]}}),
            vec![s("spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate 'foo'")]),
        ("scheduling gate removed", json!({"spec": {"schedulingGates": [{"name": "foo"}]}}), json!({}), vec![]),
        ("priority class changed", json!({"spec": {"priorityClassName": "foo-priority"}}), json!({"spec": {"priorityClassName": "bar-priority"}}),
            vec![format!("{forbidden}  priorityClassName: \"foo-priority\" -> \"bar-priority\"")]),
        ("grace period -1 to 1", json!({"spec": {"terminationGracePeriodSeconds": -1}}), json!({"spec": {"terminationGracePeriodSeconds": 1}}), vec![]),
        ("grace period -1 to 0", json!({"spec": {"terminationGracePeriodSeconds": -1}}), json!({"spec": {"terminationGracePeriodSeconds": 0}}),
            vec![format!("{forbidden}  terminationGracePeriodSeconds: -1 -> 0")]),
        ("mirror annotation added", json!({"spec": {"nodeName": "n"}}),
            json!({"spec": {"nodeName": "n"}, "metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            vec![s("metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation")]),
        ("node name set", json!({}), json!({"spec": {"nodeName": "foo"}}),
            vec![format!("{forbidden}  nodeName: null -> \"foo\"")]),
        ("active deadline raised", json!({"spec": {"activeDeadlineSeconds": 30}}), json!({"spec": {"activeDeadlineSeconds": 60}}),
            vec![s("spec.activeDeadlineSeconds: Invalid value: 60: must be less than or equal to previous value")]),
        ("active deadline lowered", json!({"spec": {"activeDeadlineSeconds": 60}}), json!({"spec": {"activeDeadlineSeconds": 30}}), vec![]),
        ("active deadline dropped", json!({"spec": {"activeDeadlineSeconds": 60}}), json!({}),
            vec![s("spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value")]),
        ("labels changed", json!({"metadata": {"labels": {"bar": "foo"}}}), json!({"metadata": {"labels": {"foo": "bar"}}}), vec![]),
    ];
    update_table("", "Pod", &base(), &cases);
}
