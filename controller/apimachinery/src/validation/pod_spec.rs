//! `ValidatePodSpec`: a pod's spec, for a Pod and for the template of a
//! workload (`path` names where it sits: `spec` or `spec.template.spec`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelector, NodeSelectorTerm, PodAffinityTerm, PodSpec, Toleration,
    TopologySpreadConstraint,
};

use super::container::{self, id_range};
use super::field::{Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::names;
use super::{ip, volume};

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Validate `s` at `path`; `is_pod`: the pod-only rules too (a template
/// may leave `hostPort` 0 on the host network).
pub fn validate(s: &PodSpec, path: &Path, is_pod: bool) -> ErrorList {
    let (mut errs, vols) = volume::volumes(
        s.volumes.as_deref().unwrap_or_default(),
        &path.child("volumes"),
    );
    let grace = s.termination_grace_period_seconds.unwrap_or(30);
    errs.extend(containers(s, &vols, grace, path));
    errs.extend(init_containers(s, &vols, grace, path));
    errs.extend(host_network(s, path, is_pod));
    if s.termination_grace_period_seconds.is_none() {
        errs.push(Error::required(
            &path.child("terminationGracePeriodSeconds"),
            "",
        ));
    }
    let rp = path.child("restartPolicy");
    match s.restart_policy.as_deref().unwrap_or_default() {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(Error::required(&rp, "")),
        p => errs.push(Error::not_supported(
            &rp,
            p,
            &["Always", "OnFailure", "Never"],
        )),
    }
    let dp = path.child("dnsPolicy");
    match s.dns_policy.as_deref().unwrap_or_default() {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(Error::required(&dp, "")),
        p => errs.push(Error::not_supported(
            &dp,
            p,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    errs.extend(meta::labels(
        s.node_selector.as_ref(),
        &path.child("nodeSelector"),
    ));
    errs.extend(security_context(s, path));
    if let Some(a) = &s.affinity {
        errs.extend(affinity(a, &path.child("affinity")));
    }
    if s.dns_policy.as_deref() == Some("None") && s.dns_config.is_none() {
        errs.push(Error::required(
            &path.child("dnsConfig"),
            "must provide `dnsConfig` when `dnsPolicy` is None",
        ));
    }
    for (i, g) in s.readiness_gates.iter().flatten().enumerate() {
        let p = path.child("readinessGates").index(i).child("conditionType");
        invalid_each(
            &mut errs,
            &p,
            &g.condition_type,
            names::qualified_name(&g.condition_type),
        );
    }
    let mut gates = BTreeSet::new();
    for (i, g) in s.scheduling_gates.iter().flatten().enumerate() {
        let p = path.child("schedulingGates").index(i);
        invalid_each(&mut errs, &p, &g.name, names::qualified_name(&g.name));
        if !gates.insert(g.name.as_str()) {
            errs.push(Error::duplicate(&p, g.name.as_str()));
        }
    }
    errs.extend(spread(
        s.topology_spread_constraints.as_deref().unwrap_or_default(),
        &path.child("topologySpreadConstraints"),
    ));
    for (field, v) in [
        ("serviceAccountName", &s.service_account_name),
        ("nodeName", &s.node_name),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            invalid_each(
                &mut errs,
                &path.child(field),
                v,
                names::dns1123_subdomain(v),
            );
        }
    }
    if let Some(a) = s
        .active_deadline_seconds
        .filter(|a| !(1..=i64::from(i32::MAX)).contains(a))
    {
        errs.push(Error::invalid(
            &path.child("activeDeadlineSeconds"),
            a,
            names::inclusive_range(1, i32::MAX.into()),
        ));
    }
    for (field, v) in [("hostname", &s.hostname), ("subdomain", &s.subdomain)] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            invalid_each(&mut errs, &path.child(field), v, names::dns1123_label(v));
        }
    }
    errs.extend(tolerations(
        s.tolerations.as_deref().unwrap_or_default(),
        &path.child("tolerations"),
    ));
    for (i, h) in s.host_aliases.iter().flatten().enumerate() {
        let at = path.child("hostAliases").index(i);
        errs.extend(ip::valid_ip(&at.child("ip"), &h.ip));
        for (j, n) in h.hostnames.iter().flatten().enumerate() {
            invalid_each(
                &mut errs,
                &at.child("hostnames").index(j),
                n,
                names::dns1123_subdomain(n),
            );
        }
    }
    for (field, v) in [
        ("priorityClassName", &s.priority_class_name),
        ("runtimeClassName", &s.runtime_class_name),
    ] {
        if let Some(v) = v
            .as_deref()
            .filter(|v| !v.is_empty() || field == "runtimeClassName")
        {
            invalid_each(
                &mut errs,
                &path.child(field),
                v,
                names::dns1123_subdomain(v),
            );
        }
    }
    if let Some(p) = &s.preemption_policy {
        const POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];
        if !POLICIES.contains(&p.as_str()) {
            errs.push(Error::not_supported(
                &path.child("preemptionPolicy"),
                p,
                &POLICIES,
            ));
        }
    }
    if let Some(os) = &s.os {
        let p = path.child("os").child("name");
        match os.name.as_str() {
            "" => errs.push(Error::required(&p, "cannot be empty")),
            "linux" | "windows" => {}
            n => errs.push(Error::not_supported(&p, n, &["linux", "windows"])),
        }
    }
    errs
}

fn containers(s: &PodSpec, vols: &BTreeSet<String>, grace: i64, path: &Path) -> ErrorList {
    let path = path.child("containers");
    let mut errs = ErrorList::new();
    if s.containers.is_empty() {
        errs.push(Error::required(&path, ""));
        return errs;
    }
    let mut seen = BTreeSet::new();
    for (i, c) in s.containers.iter().enumerate() {
        let at = path.index(i);
        errs.extend(container::common(c, vols, &at));
        if !seen.insert(c.name.as_str()) {
            errs.push(Error::duplicate(&at.child("name"), c.name.as_str()));
        }
        errs.extend(container::probes_and_hooks(c, grace, &at));
        if c.restart_policy.is_some() {
            errs.push(Error::forbidden(
                &at.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    errs.extend(container::host_port_conflicts(&s.containers, &path));
    errs
}

fn init_containers(s: &PodSpec, vols: &BTreeSet<String>, grace: i64, path: &Path) -> ErrorList {
    let path = path.child("initContainers");
    let mut errs = ErrorList::new();
    let mut seen: BTreeSet<&str> = s.containers.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in s.init_containers.iter().flatten().enumerate() {
        let at = path.index(i);
        errs.extend(container::common(c, vols, &at));
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if let Some(rp) = c.restart_policy.as_deref().filter(|_| !sidecar) {
            errs.push(Error::not_supported(
                &at.child("restartPolicy"),
                rp,
                &["Always"],
            ));
        }
        if seen.contains(c.name.as_str()) {
            errs.push(Error::duplicate(&at.child("name"), c.name.as_str()));
        } else if !c.name.is_empty() {
            seen.insert(c.name.as_str());
        }
        // Init containers run one by one: each is checked on its own,
        // and upstream names it index 0.
        errs.extend(container::host_port_conflicts(
            std::slice::from_ref(c),
            &path,
        ));
        if sidecar {
            errs.extend(container::probes_and_hooks(c, grace, &at));
        } else {
            const NOT_INIT: &str =
                "may not be set for init containers without restartPolicy=Always";
            for (f, set) in [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ] {
                if set {
                    errs.push(Error::forbidden(&at.child(f), NOT_INIT));
                }
            }
        }
    }
    errs
}

/// On the host network a pod's `hostPort` is its `containerPort`.
fn host_network(s: &PodSpec, path: &Path, _is_pod: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    if s.host_network != Some(true) {
        return errs;
    }
    let groups = [
        ("containers", s.containers.as_slice()),
        (
            "initContainers",
            s.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    for (key, list) in groups {
        for (i, c) in list.iter().enumerate() {
            for (j, p) in c.ports.iter().flatten().enumerate() {
                // The server defaults an unset `hostPort` to the
                // `containerPort` on the host network, so 0 is that.
                let h = p.host_port.unwrap_or(0);
                if h != 0 && h != p.container_port {
                    let at = path
                        .child(key)
                        .index(i)
                        .child("ports")
                        .index(j)
                        .child("hostPort");
                    errs.push(Error::invalid(
                        &at,
                        h,
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }
    errs
}

fn security_context(s: &PodSpec, spec: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let path = spec.child("securityContext");
    if let Some(sc) = &s.security_context {
        id_range(&mut errs, &path.child("fsGroup"), sc.fs_group);
        id_range(&mut errs, &path.child("runAsUser"), sc.run_as_user);
        id_range(&mut errs, &path.child("runAsGroup"), sc.run_as_group);
        for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
            id_range(
                &mut errs,
                &path.child("supplementalGroups").index(i),
                Some(*g),
            );
        }
        if let Some(p) = &sc.fs_group_change_policy {
            if p != "Always" && p != "OnRootMismatch" {
                errs.push(Error::not_supported(
                    &path.child("fsGroupChangePolicy"),
                    p,
                    &["Always", "OnRootMismatch"],
                ));
            }
        }
    }
    if s.share_process_namespace == Some(true) && s.host_pid == Some(true) {
        errs.push(Error::invalid(
            &path.child("shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    errs
}

fn affinity(a: &Affinity, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(na) = &a.node_affinity {
        let p = path.child("nodeAffinity");
        if let Some(r) = &na.required_during_scheduling_ignored_during_execution {
            errs.extend(node_selector(
                r,
                &p.child("requiredDuringSchedulingIgnoredDuringExecution"),
            ));
        }
        for (i, t) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let at = p
                .child("preferredDuringSchedulingIgnoredDuringExecution")
                .index(i);
            weight(&mut errs, &at, t.weight);
            errs.extend(node_selector_term(
                &t.preference,
                &at.child("preference"),
                false,
            ));
        }
    }
    let pods = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (key, terms) in pods {
        let Some((required, preferred)) = terms else {
            continue;
        };
        let p = path.child(key);
        for (i, t) in required.iter().flatten().enumerate() {
            errs.extend(pod_affinity_term(
                t,
                &p.child("requiredDuringSchedulingIgnoredDuringExecution")
                    .index(i),
            ));
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let at = p
                .child("preferredDuringSchedulingIgnoredDuringExecution")
                .index(i);
            weight(&mut errs, &at, w.weight);
            errs.extend(pod_affinity_term(
                &w.pod_affinity_term,
                &at.child("podAffinityTerm"),
            ));
        }
    }
    errs
}

fn weight(errs: &mut ErrorList, at: &Path, w: i32) {
    if !(1..=100).contains(&w) {
        errs.push(Error::invalid(
            &at.child("weight"),
            w,
            "must be in the range 1-100",
        ));
    }
}

fn node_selector(s: &NodeSelector, path: &Path) -> ErrorList {
    let terms = path.child("nodeSelectorTerms");
    let mut errs = ErrorList::new();
    if s.node_selector_terms.is_empty() {
        errs.push(Error::required(
            &terms,
            "must have at least one node selector term",
        ));
        return errs;
    }
    for (i, t) in s.node_selector_terms.iter().enumerate() {
        errs.extend(node_selector_term(t, &terms.index(i), true));
    }
    errs
}

fn node_selector_term(t: &NodeSelectorTerm, path: &Path, values_checked: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    for (j, r) in t.match_expressions.iter().flatten().enumerate() {
        let at = path.child("matchExpressions").index(j);
        let values = r.values.as_deref().unwrap_or_default();
        let vp = at.child("values");
        match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errs.push(Error::required(
                &vp,
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(Error::forbidden(
                &vp,
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" if values.len() != 1 => errs.push(Error::required(
                &vp,
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
            op => errs.push(Error::invalid(
                &at.child("operator"),
                op,
                "not a valid selector operator",
            )),
        }
        invalid_each(
            &mut errs,
            &at.child("key"),
            &r.key,
            names::qualified_name(&r.key),
        );
        if values_checked {
            for (k, v) in values.iter().enumerate() {
                invalid_each(&mut errs, &vp.index(k), v, names::label_value(v));
            }
        }
    }
    for (j, r) in t.match_fields.iter().flatten().enumerate() {
        let at = path.child("matchFields").index(j);
        if r.key != "metadata.name" {
            errs.push(Error::invalid(
                &at.child("key"),
                r.key.as_str(),
                "not a valid field selector key",
            ));
        }
        let n = r.values.as_ref().map_or(0, Vec::len);
        if matches!(r.operator.as_str(), "In" | "NotIn") && n != 1 {
            errs.push(Error::required(
                &at.child("values"),
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            ));
        } else if !matches!(r.operator.as_str(), "In" | "NotIn") {
            errs.push(Error::invalid(
                &at.child("operator"),
                r.operator.as_str(),
                "not a valid selector operator",
            ));
        }
    }
    errs
}

fn pod_affinity_term(t: &PodAffinityTerm, path: &Path) -> ErrorList {
    let mut errs = meta::label_selector(t.label_selector.as_ref(), &path.child("labelSelector"));
    errs.extend(meta::label_selector(
        t.namespace_selector.as_ref(),
        &path.child("namespaceSelector"),
    ));
    for n in t.namespaces.iter().flatten() {
        // Upstream's path is singular here.
        invalid_each(
            &mut errs,
            &path.child("namespace"),
            n,
            names::dns1123_label(n),
        );
    }
    label_keys(
        &mut errs,
        t.match_label_keys.as_deref(),
        t.label_selector.is_some(),
        &path.child("matchLabelKeys"),
    );
    label_keys(
        &mut errs,
        t.mismatch_label_keys.as_deref(),
        t.label_selector.is_some(),
        &path.child("mismatchLabelKeys"),
    );
    if t.topology_key.is_empty() {
        errs.push(Error::required(
            &path.child("topologyKey"),
            "can not be empty",
        ));
    }
    invalid_each(
        &mut errs,
        &path.child("topologyKey"),
        &t.topology_key,
        names::qualified_name(&t.topology_key),
    );
    errs
}

fn label_keys(errs: &mut ErrorList, keys: Option<&[String]>, has_selector: bool, path: &Path) {
    let Some(keys) = keys.filter(|k| !k.is_empty()) else {
        return;
    };
    if !has_selector {
        errs.push(Error::forbidden(
            path,
            "must not be specified when labelSelector is not set",
        ));
        return;
    }
    for (i, k) in keys.iter().enumerate() {
        invalid_each(errs, &path.index(i), k, names::qualified_name(k));
    }
}

fn spread(list: &[TopologySpreadConstraint], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, c) in list.iter().enumerate() {
        let at = path.index(i);
        if c.max_skew <= 0 {
            errs.push(Error::invalid(
                &at.child("maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        if c.topology_key.is_empty() {
            errs.push(Error::required(
                &at.child("topologyKey"),
                "can not be empty",
            ));
        }
        let wu = c.when_unsatisfiable.as_str();
        if wu != "DoNotSchedule" && wu != "ScheduleAnyway" {
            errs.push(Error::not_supported(
                &at.child("whenUnsatisfiable"),
                wu,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if list[i + 1..].iter().any(|o| {
            o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
        }) {
            errs.push(Error::duplicate(
                &at.child("{topologyKey, whenUnsatisfiable}"),
                format!("{{{}, {wu}}}", c.topology_key).as_str(),
            ));
        }
        if let Some(m) = c.min_domains {
            if m <= 0 {
                errs.push(Error::invalid(
                    &at.child("minDomains"),
                    m,
                    "must be greater than zero",
                ));
            } else if wu != "DoNotSchedule" {
                errs.push(Error::invalid(
                    &at.child("minDomains"),
                    m,
                    format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {wu}"),
                ));
            }
        }
        for (f, v) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            if let Some(v) = v.as_deref().filter(|v| *v != "Honor" && *v != "Ignore") {
                errs.push(Error::not_supported(&at.child(f), v, &["Honor", "Ignore"]));
            }
        }
        errs.extend(meta::label_selector(
            c.label_selector.as_ref(),
            &at.child("labelSelector"),
        ));
    }
    errs
}

/// `ValidateTolerations`.
pub fn tolerations(list: &[Toleration], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, t) in list.iter().enumerate() {
        let at = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        if !key.is_empty() {
            invalid_each(&mut errs, &at.child("key"), key, names::qualified_name(key));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(Error::invalid(
                &at.child("operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(Error::invalid(
                &at.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(Error::invalid(&at.child("operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(Error::invalid(
                        &at.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            op => errs.push(Error::not_supported(
                &at.child("operator"),
                op,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errs.push(Error::not_supported(
                &at.child("effect"),
                effect,
                &TAINT_EFFECTS,
            ));
        }
    }
    errs
}

/// `validateTaintEffect` without an empty effect allowed.
pub fn taint_effect(errs: &mut ErrorList, path: &Path, effect: &str) {
    if effect.is_empty() {
        errs.push(Error::required(path, ""));
    } else if !TAINT_EFFECTS.contains(&effect) {
        errs.push(Error::not_supported(path, effect, &TAINT_EFFECTS));
    }
}
