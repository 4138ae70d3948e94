//! Service validation, case by case from upstream's service tests: each
//! fragment over a valid ClusterIP Service, with the exact errors.

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "abc", "namespace": "default"},
        "spec": {"type": "ClusterIP", "clusterIP": "1.2.3.4", "clusterIPs": ["1.2.3.4"],
                 "selector": {"key": "val"}, "sessionAffinity": "None",
                 "internalTrafficPolicy": "Cluster",
                 "ports": [{"name": "p", "protocol": "TCP", "port": 8675, "targetPort": 8675}]}})
}

fn lb(extra: Value) -> Value {
    merge(
        &json!({"spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": true,
                         "externalTrafficPolicy": "Cluster"}}),
        &extra,
    )
}

fn port(name: &str, p: i64) -> Value {
    json!({"name": name, "protocol": "TCP", "port": p, "targetPort": p})
}

#[test]
fn invalid_services() {
    let long = "a".repeat(64);
    let only_lb = "may only be used when `type` is 'LoadBalancer'";
    let ranges = "metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]";
    let cases = vec![
        ("no namespace", json!({"metadata": {"namespace": ""}}), vec![s("metadata.namespace: Required value")]),
        ("bad namespace", json!({"metadata": {"namespace": "-123"}}),
            vec![format!("metadata.namespace: Invalid value: \"-123\": {LABEL}")]),
        ("bad name", json!({"metadata": {"name": "-123"}}),
            vec![format!("metadata.name: Invalid value: \"-123\": {DNS1035}")]),
        ("name too long", json!({"metadata": {"name": long}}),
            vec![format!("metadata.name: Invalid value: \"{long}\": must be no more than 63 characters")]),
        ("bad generateName", json!({"metadata": {"generateName": "-123"}}),
            vec![format!("metadata.generateName: Invalid value: \"-123\": {DNS1035}")]),
        ("bad label key", json!({"metadata": {"labels": {"NoUppercaseOrSpecialCharsLike=Equals": "bar"}}}),
            vec![format!("metadata.labels: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {NAME_PART}")]),
        ("bad selector key", json!({"spec": {"selector": {"NoSpecialCharsLike=Equals": "bar"}}}),
            vec![format!("spec.selector: Invalid value: \"NoSpecialCharsLike=Equals\": {NAME_PART}")]),
        ("no session affinity", json!({"spec": {"sessionAffinity": ""}}), vec![s("spec.sessionAffinity: Required value")]),
        ("no type", json!({"spec": {"type": ""}}), vec![s("spec.type: Required value")]),
        ("type Foo", json!({"spec": {"type": "Foo"}}),
            vec![s("spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"")]),
        ("no ports", json!({"spec": {"ports": null}}), vec![s("spec.ports: Required value")]),
        ("second port unnamed", json!({"spec": {"ports": [port("p", 8675), port("", 12345)]}}),
            vec![s("spec.ports[1].name: Required value")]),
        ("port name INVALID", json!({"spec": {"ports": [port("INVALID", 8675)]}}),
            vec![format!("spec.ports[0].name: Invalid value: \"INVALID\": {LABEL}")]),
        ("no protocol", json!({"spec": {"ports": [{"name": "p", "port": 8675, "targetPort": 8675}]}}),
            vec![s("spec.ports[0].protocol: Required value")]),
        ("protocol TCPX", json!({"spec": {"ports": [{"name": "p", "protocol": "TCPX", "port": 8675, "targetPort": 8675}]}}),
            vec![s("spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\"")]),
        ("bad cluster IP", json!({"spec": {"clusterIP": "invalid", "clusterIPs": ["invalid"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: \"invalid\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]),
        ("port 70000", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 70000, "targetPort": 8675}]}}),
            vec![format!("spec.ports[0].port: Invalid value: 70000: {PORT_RANGE}")]),
        ("port 0", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 0, "targetPort": 8675}]}}),
            vec![format!("spec.ports[0].port: Invalid value: 0: {PORT_RANGE}")]),
        ("target port 65536", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 65536}]}}),
            vec![format!("spec.ports[0].targetPort: Invalid value: 65536: {PORT_RANGE}")]),
        ("target port name too long", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": "abcdefghijklmnopq"}]}}),
            vec![s("spec.ports[0].targetPort: Invalid value: \"abcdefghijklmnopq\": must be no more than 15 characters")]),
        ("external IP loopback", json!({"spec": {"externalIPs": ["127.0.0.1"], "externalTrafficPolicy": "Cluster"}}),
            vec![s("spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)")]),
        ("external IP unspecified", json!({"spec": {"externalIPs": ["0.0.0.0"], "externalTrafficPolicy": "Cluster"}}),
            vec![s("spec.externalIPs[0]: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)")]),
        ("external IP a host name", json!({"spec": {"externalIPs": ["myhost.mydomain"], "externalTrafficPolicy": "Cluster"}}),
            vec![s("spec.externalIPs[0]: Invalid value: \"myhost.mydomain\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]),
        ("two ports named p", json!({"spec": {"ports": [port("p", 80), port("p", 81)]}}),
            vec![s("spec.ports[1].name: Duplicate value: \"p\"")]),
        ("duplicate node ports", json!({"spec": {"type": "NodePort", "externalTrafficPolicy": "Cluster", "ports": [
                port("p", 8675),
                {"name": "q", "protocol": "TCP", "port": 1, "targetPort": 1, "nodePort": 30001},
                {"name": "r", "protocol": "TCP", "port": 2, "targetPort": 2, "nodePort": 30001}]}}),
            vec![s("spec.ports[2].nodePort: Duplicate value: 30001")]),
        ("duplicate ports", json!({"spec": {"ports": [port("p", 8675), port("q", 12345), port("r", 12345)]}}),
            vec![s("spec.ports[2]: Duplicate value: {\"Name\":\"\",\"Protocol\":\"TCP\",\"AppProtocol\":null,\"Port\":12345,\"TargetPort\":0,\"NodePort\":0}")]),
        ("node port on ClusterIP", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30080}]}}),
            vec![s("spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'")]),
        ("LoadBalancer without allocateLoadBalancerNodePorts", lb(json!({"spec": {"allocateLoadBalancerNodePorts": null}})),
            vec![s("allocateLoadBalancerNodePorts: Required value")]),
        ("headless LoadBalancer", lb(json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"]}})),
            vec![s("spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for LoadBalancer services")]),
        ("headless NodePort", json!({"spec": {"type": "NodePort", "externalTrafficPolicy": "Cluster", "clusterIP": "None", "clusterIPs": ["None"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services")]),
        ("kubelet port on LoadBalancer", lb(json!({"spec": {"ports": [port("p", 10250)]}})),
            vec![s("spec.ports[0]: Invalid value: 10250: may not expose port 10250 externally since it is used by kubelet")]),
        ("source ranges annotation on ClusterIP", json!({"metadata": {"annotations": {"service.beta.kubernetes.io/load-balancer-source-ranges": ""}}}),
            vec![format!("{ranges}: Forbidden: {only_lb}")]),
        ("source ranges on ClusterIP", json!({"spec": {"loadBalancerSourceRanges": ["1.2.3.0/24"]}}),
            vec![format!("spec.LoadBalancerSourceRanges: Forbidden: {only_lb}")]),
        ("source range /33", lb(json!({"spec": {"loadBalancerSourceRanges": ["1.2.3.4/33"]}})),
            vec![s("spec.LoadBalancerSourceRanges[0]: Invalid value: \"1.2.3.4/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]),
        ("source range bits past the prefix", lb(json!({"spec": {"loadBalancerSourceRanges": ["1.2.3.4/24"]}})),
            vec![s("spec.LoadBalancerSourceRanges[0]: Invalid value: \"1.2.3.4/24\": must not have bits set beyond the prefix length")]),
        ("bad external name", json!({"spec": {"type": "ExternalName", "externalName": "-123", "clusterIP": null, "clusterIPs": null}}),
            vec![format!("spec.externalName: Invalid value: \"-123\": {SUBDOMAIN}")]),
        ("ExternalName with cluster IPs", json!({"spec": {"type": "ExternalName", "externalName": "foo.example.com"}}),
            vec![s("spec.clusterIPs: Forbidden: may not be set for ExternalName services")]),
        ("externalTrafficPolicy invalid", lb(json!({"spec": {"externalTrafficPolicy": "invalid"}})),
            vec![s("spec.externalTrafficPolicy: Unsupported value: \"invalid\": supported values: \"Cluster\", \"Local\"")]),
        ("externalTrafficPolicy on ClusterIP", json!({"spec": {"externalTrafficPolicy": "Bogus"}}),
            vec![s("spec.externalTrafficPolicy: Invalid value: \"Bogus\": may only be set for externally-accessible services")]),
        ("no internalTrafficPolicy", json!({"spec": {"internalTrafficPolicy": null}}),
            vec![s("spec.internalTrafficPolicy: Required value")]),
        ("internalTrafficPolicy invalid", json!({"spec": {"internalTrafficPolicy": "invalid"}}),
            vec![s("spec.internalTrafficPolicy: Unsupported value: \"invalid\": supported values: \"Cluster\", \"Local\"")]),
        ("health check port -1", lb(json!({"spec": {"externalTrafficPolicy": "Local", "healthCheckNodePort": -1}})),
            vec![format!("spec.healthCheckNodePort: Invalid value: -1: {PORT_RANGE}")]),
        ("ClientIP timeout -1", json!({"spec": {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": -1}}}}),
            vec![s("spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: -1: must be greater than 0 and less than 86400")]),
        ("affinity config without ClientIP", json!({"spec": {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 90}}}}),
            vec![s("spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None")]),
        ("ipFamilies unknown", json!({"spec": {"ipFamilies": ["not-a-valid-ip-family"]}}),
            vec![s("spec.ipFamilies[0]: Unsupported value: \"not-a-valid-ip-family\": supported values: \"IPv4\", \"IPv6\"")]),
        ("ipFamilies twice", json!({"spec": {"clusterIP": null, "clusterIPs": null, "ipFamilies": ["IPv6", "IPv6"]}}),
            vec![s("spec.ipFamilies[1]: Duplicate value: \"IPv6\"")]),
        ("two garbage cluster IPs", json!({"spec": {"clusterIP": "garbage-ip", "clusterIPs": ["garbage-ip", "garbage-second-ip"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: \"garbage-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
                 s("spec.clusterIPs[1]: Invalid value: \"garbage-second-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]),
        ("None not alone", json!({"spec": {"clusterIP": "None", "clusterIPs": ["None", "2001::1"]}}),
            vec![s("spec.clusterIPs: Invalid value: [\"None\",\"2001::1\"]: 'None' must be the first and only value")]),
        ("cluster IPs without cluster IP", json!({"spec": {"clusterIP": "", "clusterIPs": ["", "2001::1"]}}),
            vec![s("spec.clusterIPs: Invalid value: [\"\",\"2001::1\"]: must be empty when `clusterIP` is not specified"),
                 s("spec.clusterIPs[0]: Invalid value: \"\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]),
        ("two IPv4 cluster IPs", json!({"spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1", "10.0.0.10"], "ipFamilies": ["IPv4", "IPv6"]}}),
            vec![s("spec.clusterIPs: Invalid value: [\"10.0.0.1\",\"10.0.0.10\"]: may specify no more than one IP for each IP family"),
                 s("spec.clusterIPs[1]: Invalid value: \"10.0.0.10\": expected an IPv6 value as indicated by `ipFamilies[1]`")]),
        ("three cluster IPs", json!({"spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1", "2001::1", "10.0.0.10"]}}),
            vec![s("spec.clusterIPs: Invalid value: [\"10.0.0.1\",\"2001::1\",\"10.0.0.10\"]: may only hold up to 2 values")]),
        ("IPv4 cluster IP for IPv6", json!({"spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ipFamilies": ["IPv6"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: \"10.0.0.1\": expected an IPv6 value as indicated by `ipFamilies[0]`")]),
        ("cluster IP not canonical", json!({"spec": {"clusterIP": "2001:0db8::1", "clusterIPs": ["2001:0db8::1"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: \"2001:0db8::1\": must be in canonical form (\"2001:db8::1\")")]),
        ("appProtocol --", json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "appProtocol": "--"}]}}),
            vec![format!("spec.ports[0].appProtocol: Invalid value: \"--\": {NAME_PART}")]),
        ("topology annotations disagree", json!({"metadata": {"annotations": {
                "service.kubernetes.io/topology-mode": "different",
                "service.kubernetes.io/topology-aware-hints": "original"}}}),
            vec![s("metadata.annotations[service.kubernetes.io/topology-mode]: Invalid value: \"different\": must match annotations[service.kubernetes.io/topology-aware-hints] when both are specified")]),
        ("class on ClusterIP", json!({"spec": {"loadBalancerClass": "example.com/lb"}}),
            vec![format!("spec.loadBalancerClass: Forbidden: {only_lb}")]),
        ("every error at once", json!({"spec": {"type": "Foo", "externalTrafficPolicy": "Bogus",
                "ports": [{"name": "p", "protocol": "TCPX", "port": 70000, "targetPort": 80}, {"name": "p", "protocol": "TCP", "port": 81, "targetPort": 81}]}}),
            vec![format!("spec.ports[0].port: Invalid value: 70000: {PORT_RANGE}"),
                 s("spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\""),
                 s("spec.ports[1].name: Duplicate value: \"p\""),
                 s("spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""),
                 s("spec.externalTrafficPolicy: Invalid value: \"Bogus\": may only be set for externally-accessible services")]),
    ];
    table("", "Service", &base(), &cases);
}

#[test]
fn valid_edge_cases() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "port 65535",
            json!({"spec": {"ports": [port("p", 65535)]}}),
            vec![],
        ),
        ("port 1", json!({"spec": {"ports": [port("p", 1)]}}), vec![]),
        (
            "a 63-character name",
            json!({"metadata": {"name": "a".repeat(63)}}),
            vec![],
        ),
        (
            "one unnamed port",
            json!({"spec": {"ports": [port("", 80)]}}),
            vec![],
        ),
        (
            "target port by name",
            json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": "http"}]}}),
            vec![],
        ),
        (
            "headless without ports",
            json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"], "ports": null}}),
            vec![],
        ),
        (
            "the same port on TCP, UDP and SCTP",
            json!({"spec": {"ports": [port("p", 53),
            {"name": "u", "protocol": "UDP", "port": 53, "targetPort": 53},
            {"name": "s", "protocol": "SCTP", "port": 53, "targetPort": 53}]}}),
            vec![],
        ),
        (
            "dual stack",
            json!({"spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1", "2001:db8::1"],
            "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack"}}),
            vec![],
        ),
        (
            "an external name with a trailing dot",
            json!({"spec": {"type": "ExternalName", "externalName": "foo.example.com.",
            "clusterIP": null, "clusterIPs": null}}),
            vec![],
        ),
        (
            "LoadBalancer Local with its health check port",
            lb(json!({"spec": {"externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30200, "loadBalancerSourceRanges": [" 10.0.0.0/8 "], "loadBalancerClass": "example.com/lb"}})),
            vec![],
        ),
        (
            "ClientIP with a day's timeout",
            json!({"spec": {"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 86400}}}}),
            vec![],
        ),
        (
            "only clusterIP given (clusterIPs follows it)",
            json!({"spec": {"clusterIPs": null}}),
            vec![],
        ),
        (
            "no cluster IP yet (allocated later)",
            json!({"spec": {"clusterIP": null, "clusterIPs": null}}),
            vec![],
        ),
    ];
    table("", "Service", &base(), &cases);
}

#[test]
fn updates() {
    let ip = |a: &str| json!({"spec": {"clusterIP": a, "clusterIPs": [a]}});
    let none = json!({"spec": {"clusterIP": null, "clusterIPs": null}});
    let cases = vec![
        ("cluster IP changed", ip("1.2.3.4"), ip("1.2.3.5"),
            vec![s("spec.clusterIPs[0]: Invalid value: [\"1.2.3.5\"]: may not change once set")]),
        ("cluster IP allocated", none.clone(), ip("1.2.3.5"), vec![]),
        ("cluster IP left out is kept", ip("1.2.3.4"), none.clone(), vec![]),
        ("headless service's None left out is kept", ip("None"), none.clone(), vec![]),
        ("cluster IP to None", ip("1.2.3.4"), ip("None"),
            vec![s("spec.clusterIPs[0]: Invalid value: [\"None\"]: may not change once set")]),
        ("ExternalName to ClusterIP with any IP",
            json!({"spec": {"type": "ExternalName", "externalName": "a.example.com", "clusterIP": null, "clusterIPs": null}}),
            ip("10.0.0.9"), vec![]),
        ("ClusterIP to ExternalName leaves its IP fields behind",
            json!({"spec": {"ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}}),
            json!({"spec": {"type": "ExternalName", "externalName": "a.example.com", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}}),
            vec![]),
        ("ipFamilies changed", json!({"spec": {"ipFamilies": ["IPv4"]}}), json!({"spec": {"ipFamilies": ["IPv6"], "clusterIP": "2001::1", "clusterIPs": ["2001::1"]}}),
            vec![s("spec.clusterIPs[0]: Invalid value: [\"2001::1\"]: may not change once set"),
                 s("spec.ipFamilies[0]: Invalid value: [\"IPv6\"]: may not change once set")]),
        ("LoadBalancer class changed", lb(json!({"spec": {"loadBalancerClass": "a.example.com/x"}})),
            lb(json!({"spec": {"loadBalancerClass": "b.example.com/x"}})),
            vec![s("spec.loadBalancerClass: Invalid value: \"b.example.com/x\": may not change once set")]),
        ("traffic policies flip", json!({}), json!({"spec": {"internalTrafficPolicy": "Local"}}), vec![]),
        ("LoadBalancer to ClusterIP leaves its node ports and policies behind",
            lb(json!({"spec": {"loadBalancerClass": "a.example.com/x", "ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30080}]}})),
            lb(json!({"spec": {"type": "ClusterIP", "loadBalancerClass": "a.example.com/x", "ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30080}]}})),
            vec![]),
        ("LoadBalancer to ClusterIP with a new node port",
            lb(json!({"spec": {"ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30080}]}})),
            lb(json!({"spec": {"type": "ClusterIP", "ports": [{"name": "p", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30081}]}})),
            vec![s("spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'")]),
        ("renamed", json!({}), json!({"metadata": {"name": "abd"}}),
            vec![s("metadata.name: Invalid value: \"abd\": field is immutable")]),
    ];
    update_table("", "Service", &base(), &cases);
}
