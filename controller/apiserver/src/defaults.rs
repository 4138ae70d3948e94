//! The defaults kube-apiserver fills in when an object is written (its
//! `SetDefaults_*` functions and the admission plugins every cluster
//! runs), so what is stored and read back (`kubectl get -o yaml`,
//! `kubectl describe`, the agents and the decision loops) is the object a
//! user of Kubernetes expects: a Service port without `protocol` is TCP,
//! a Pod without `terminationGracePeriodSeconds` has 30, a new Pod is
//! `Pending` with its QoS class, every Pod tolerates `not-ready` and
//! `unreachable` for 300 s.
//!
//! Pure and idempotent: applied on create and on every update (a value
//! already set is never changed), so an unchanged object stays unchanged
//! and writes no new revision. The object has already been decoded into
//! its type (`fields.rs`), so a field of the wrong shape never gets here;
//! one that does is left alone.
//!
//! Not filled in here: the cluster IP, node ports and the health-check
//! node port (allocations over every Service: `allocate/` and
//! `services.rs`), and the service account (no ServiceAccount objects are
//! served).

use serde_json::{json, Map, Value};

/// DefaultTolerationSeconds: how long a pod stays on a node that is not
/// ready or unreachable before the taint evicts it.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// `sessionAffinity: ClientIP` without a timeout: three hours.
pub const CLIENT_IP_TIMEOUT_SECONDS: i64 = 10_800;

fn set(obj: &mut Map<String, Value>, key: &str, v: Value) {
    obj.entry(key.to_string()).or_insert(v);
}

fn object<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let m = v.as_object_mut()?;
    m.entry(key.to_string())
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

fn each<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// `image` without a tag or with `:latest` is pulled always.
fn pull_policy(image: &str) -> &'static str {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) | None if !image.contains('@') => "Always",
        _ => "IfNotPresent",
    }
}

fn container(c: &mut Map<String, Value>) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let policy = pull_policy(image);
    set(c, "imagePullPolicy", json!(policy));
    set(c, "terminationMessagePath", json!("/dev/termination-log"));
    set(c, "terminationMessagePolicy", json!("File"));
    set(c, "resources", json!({}));
    // Limits without requests: the requests are the limits.
    if let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) {
        if let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() {
            if let Some(req) = res
                .entry("requests")
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(ports) = c.get_mut("ports") {
        for p in each_value(ports) {
            set(p, "protocol", json!("TCP"));
        }
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(key).and_then(Value::as_object_mut) {
            probe(p);
        }
    }
    if let Some(l) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(get) = l.get_mut(hook).and_then(|h| h.get_mut("httpGet")) {
                http_get(get);
            }
        }
    }
    if let Some(env) = c.get_mut("env") {
        for e in each_value(env) {
            if let Some(f) = e.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef")) {
                if let Some(f) = f.as_object_mut() {
                    set(f, "apiVersion", json!("v1"));
                }
            }
        }
    }
}

/// A probe's timings, and its HTTP action's path and scheme.
fn probe(p: &mut Map<String, Value>) {
    set(p, "timeoutSeconds", json!(1));
    set(p, "periodSeconds", json!(10));
    set(p, "successThreshold", json!(1));
    set(p, "failureThreshold", json!(3));
    if let Some(get) = p.get_mut("httpGet") {
        http_get(get);
    }
}

fn http_get(get: &mut Value) {
    if let Some(g) = get.as_object_mut() {
        set(g, "path", json!("/"));
        set(g, "scheme", json!("HTTP"));
    }
}

fn each_value(v: &mut Value) -> impl Iterator<Item = &mut Map<String, Value>> {
    v.as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    set(s, "restartPolicy", json!("Always"));
    set(
        s,
        "terminationGracePeriodSeconds",
        json!(super::deletion::DEFAULT_GRACE_SECONDS),
    );
    set(s, "dnsPolicy", json!("ClusterFirst"));
    set(s, "securityContext", json!({}));
    set(s, "schedulerName", json!("default-scheduler"));
    set(s, "enableServiceLinks", json!(true));
    for key in ["containers", "initContainers"] {
        for c in each(spec, key) {
            container(c);
        }
    }
}

/// DefaultTolerationSeconds admission: `not-ready` and `unreachable`
/// NoExecute tolerations, unless the pod already tolerates them.
fn default_tolerations(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    let list = s.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = list.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = list.iter().any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            let k = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (effect.is_empty() || effect == "NoExecute")
                && (k == key || (k.is_empty() && op == "Exists"))
        });
        if !tolerated {
            list.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

/// The QoS class kube-apiserver records on a new pod.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let res = |c: &Value, kind: &str, r: &str| {
        c.pointer(&format!("/resources/{kind}/{r}"))
            .and_then(|q| {
                q.as_str()
                    .map(str::to_string)
                    .or_else(|| Some(q.to_string()))
            })
            .filter(|q| q != "0")
    };
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        for r in ["cpu", "memory"] {
            let (req, lim) = (res(c, "requests", r), res(c, "limits", r));
            any |= req.is_some() || lim.is_some();
            if lim.is_none() || req.is_some_and(|q| Some(q) != res(c, "limits", r)) {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn pod(obj: &mut Value, creating: bool) {
    if let Some(spec) = obj.get_mut("spec") {
        pod_spec(spec);
        set_priority(spec);
        // DefaultTolerationSeconds admits updates too: a pod replaced by
        // its original manifest keeps the tolerations it was given, so
        // the update changes no toleration.
        default_tolerations(spec);
    }
    if creating {
        let qos = obj.get("spec").map_or("BestEffort", qos_class);
        if let Some(status) = object(obj, "status") {
            set(status, "phase", json!("Pending"));
            set(status, "qosClass", json!(qos));
        }
    }
}

/// Priority admission without priority classes: everyone at 0.
fn set_priority(spec: &mut Value) {
    if let Some(s) = spec.as_object_mut() {
        set(s, "priority", json!(0));
    }
}

fn service(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    set(s, "type", json!("ClusterIP"));
    let kind = s
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    set(s, "sessionAffinity", json!("None"));
    if s.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        let cfg = s
            .entry("sessionAffinityConfig")
            .or_insert_with(|| json!({}));
        if let Some(cfg) = cfg.as_object_mut() {
            let ip = cfg.entry("clientIP").or_insert_with(|| json!({}));
            if let Some(ip) = ip.as_object_mut() {
                set(ip, "timeoutSeconds", json!(CLIENT_IP_TIMEOUT_SECONDS));
            }
        }
    }
    if kind != "ExternalName" {
        set(s, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        set(s, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        set(s, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(ports) = s.get_mut("ports") {
        for p in each_value(ports) {
            set(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                set(p, "targetPort", port);
            }
        }
    }
}

fn workload(obj: &mut Value, deployment: bool) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    if let Some(s) = spec.as_object_mut() {
        set(s, "replicas", json!(1));
        set(s, "revisionHistoryLimit", json!(10));
        if deployment {
            set(s, "progressDeadlineSeconds", json!(600));
            set(s, "strategy", json!({}));
            if let Some(st) = s.get_mut("strategy").and_then(Value::as_object_mut) {
                set(st, "type", json!("RollingUpdate"));
                if st.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                    set(st, "rollingUpdate", json!({}));
                    if let Some(ru) = st.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                        set(ru, "maxUnavailable", json!("25%"));
                        set(ru, "maxSurge", json!("25%"));
                    }
                }
            }
        }
    }
    if let Some(t) = spec.pointer_mut("/template/spec") {
        pod_spec(t);
    }
}

fn endpoint_slice(obj: &mut Value) {
    if let Some(ports) = obj.get_mut("ports") {
        for p in each_value(ports) {
            set(p, "protocol", json!("TCP"));
        }
    }
}

fn namespace(obj: &mut Value, creating: bool) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let (Some(name), Some(meta)) = (name, object(obj, "metadata")) {
        // Set on every write, as kube-apiserver does, so selectors on
        // namespaces by name work.
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    // A new namespace always carries the namespace deletion loop's token
    // (appended to those sent, as upstream's PrepareForCreate); after
    // that only the finalize subresource changes the list.
    if creating {
        if let Some(spec) = object(obj, "spec") {
            let f = spec.entry("finalizers").or_insert_with(|| json!([]));
            if !f.is_array() {
                *f = json!([]);
            }
            if let Some(list) = f.as_array_mut() {
                if !list.iter().any(|v| v == "kubernetes") {
                    list.push(json!("kubernetes"));
                }
            }
        }
    }
    if let Some(status) = object(obj, "status") {
        set(status, "phase", json!("Active"));
    }
}

/// A Secret's `type` is Opaque unless named; and its `stringData`, which
/// upstream's conversion reads into `data`, is merged here, the one step
/// every write (create, update, each patch format, server-side apply)
/// runs before it validates and before it stores, so it is never stored.
fn secret(obj: &mut Value) {
    sluice_apimachinery::validation::secret::merge_string_data(obj);
    if let Some(m) = obj.as_object_mut() {
        let unset = m
            .get("type")
            .is_none_or(|t| t.is_null() || t.as_str() == Some(""));
        if unset {
            m.insert("type".into(), json!("Opaque"));
        }
    }
}

/// Fill in `obj`'s defaults (`kind` of the resource), `creating` on a
/// create (what only a new object gets: a pod's phase and QoS class).
/// The default tolerations come on every write, as upstream's admission
/// adds them on create and on update.
pub fn apply(kind: &str, obj: &mut Value, creating: bool) {
    match kind {
        "Pod" => pod(obj, creating),
        "Service" => service(obj),
        "Deployment" => workload(obj, true),
        "ReplicaSet" => workload(obj, false),
        "EndpointSlice" => endpoint_slice(obj),
        "Namespace" => namespace(obj, creating),
        "Secret" => secret(obj),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(kind: &str, mut v: Value, creating: bool) -> Value {
        apply(kind, &mut v, creating);
        // Idempotent: a second pass changes nothing.
        let mut again = v.clone();
        apply(kind, &mut again, false);
        assert_eq!(again, v, "{kind}: defaults must be idempotent");
        v
    }

    #[test]
    fn a_new_pod_gets_what_kube_apiserver_fills_in() {
        let p = applied(
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "image": "busybox", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "registry.local:5000/x:1.2"}]}}),
            true,
        );
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(p["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(p["spec"]["priority"], 0);
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            p["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(p["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            p["spec"]["containers"][0]["terminationMessagePath"],
            "/dev/termination-log"
        );
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        let tol = p["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(tol.len(), 2);
        assert_eq!(tol[0]["key"], "node.kubernetes.io/not-ready");
        assert_eq!(tol[1]["tolerationSeconds"], 300);
    }

    #[test]
    fn what_the_user_set_is_never_changed() {
        let p = applied(
            "Pod",
            json!({"spec": {"terminationGracePeriodSeconds": 5, "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "a", "image": "x:latest", "imagePullPolicy": "Never"}]},
                "status": {"phase": "Running"}}),
            true,
        );
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 5);
        assert_eq!(p["spec"]["restartPolicy"], "Never");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(p["status"]["phase"], "Running");
        // Tolerating everything tolerates the defaults too.
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn an_update_gets_spec_defaults_and_tolerations_but_no_new_status() {
        let p = applied(
            "Pod",
            json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}),
            false,
        );
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert!(p.get("status").is_none());
        assert_eq!(p["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let spec = |res: Value| json!({"containers": [{"name": "a", "resources": res}]});
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                                   "requests": {"cpu": "500m", "memory": "1Gi"}}))),
            "Burstable"
        );
        // Limits alone become the requests too, so the stored pod says why.
        let p = applied(
            "Pod",
            json!({"spec": {"containers": [{"name": "a", "image": "x",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
            true,
        );
        assert_eq!(p["status"]["qosClass"], "Guaranteed");
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["memory"],
            "1Gi"
        );
    }

    #[test]
    fn services_get_protocol_target_port_and_policies() {
        let s = applied(
            "Service",
            json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}}),
            true,
        );
        assert_eq!(s["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(s["spec"]["ports"][1]["targetPort"], "dns");
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(
            s["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10_800
        );
        let plain = applied("Service", json!({"spec": {"ports": []}}), true);
        assert_eq!(plain["spec"]["type"], "ClusterIP");
        assert_eq!(plain["spec"]["sessionAffinity"], "None");
        assert!(plain["spec"].get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn workloads_default_replicas_strategy_and_their_template() {
        let d = applied(
            "Deployment",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}}),
            true,
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(
            d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
            30
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        let rs = applied("ReplicaSet", json!({"spec": {"replicas": 0}}), true);
        assert_eq!(rs["spec"]["replicas"], 0);
    }

    #[test]
    fn namespaces_are_active_and_labelled_with_their_name() {
        let n = applied("Namespace", json!({"metadata": {"name": "team-a"}}), true);
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team-a"
        );
        assert_eq!(n["status"]["phase"], "Active");
        assert_eq!(n["spec"]["finalizers"], json!(["kubernetes"]));
        let sent = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["example.com/x"]}});
        let n = applied("Namespace", sent.clone(), true);
        assert_eq!(
            n["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
        let emptied = json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}});
        let n = applied("Namespace", emptied, false);
        assert_eq!(n["spec"]["finalizers"], json!([]));
    }

    #[test]
    fn secrets_are_opaque_and_keep_no_string_data() {
        let s = applied(
            "Secret",
            json!({"type": "", "data": {"a": "eA=="}, "stringData": {"b": "y"}}),
            true,
        );
        assert_eq!(
            s,
            json!({"type": "Opaque", "data": {"a": "eA==", "b": "eQ=="}})
        );
        let tls = applied("Secret", json!({"type": "kubernetes.io/tls"}), false);
        assert_eq!(tls, json!({"type": "kubernetes.io/tls"}));
    }

    #[test]
    fn odd_shapes_are_left_alone_without_panicking() {
        for kind in [
            "Pod",
            "Service",
            "Deployment",
            "ReplicaSet",
            "EndpointSlice",
            "Namespace",
            "Secret",
        ] {
            for v in [
                json!(null),
                json!([]),
                json!({"spec": 3}),
                json!({"spec": {"containers": "x", "ports": {}}, "metadata": []}),
                json!({"stringData": {"a": 1}, "data": 2, "type": 3}),
                json!({"stringData": {"a": "b"}, "data": []}),
            ] {
                applied(kind, v, true);
            }
        }
    }
}
