#!/usr/bin/env python3
"""Writes src/schema/generated.rs: the message tables the decoder walks.

Why generated, and from what: the Kubernetes protobuf messages' field numbers
and types are read from the `k8s-pb` crate's prost-generated Rust (crates.io,
Apache-2.0), and each field's Kubernetes JSON name from the `k8s-openapi`
crate's serializers (crates.io, Apache-2.0, the workspace's v1_37 module),
both as cargo unpacked them under ~/.cargo/registry/src. Only the messages
reachable from the kinds in KINDS are kept.

Usage (from controller/wire): python3 tools/gen_schema.py > src/schema/generated.rs
then `cargo fmt -p sluice-wire`.
"""
import glob
import os
import re
import sys

REG = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))
PB = sorted(p for r in REG for p in glob.glob(r + "k8s-pb-0.9.0/src"))[0]
OA = sorted(p for r in REG for p in glob.glob(r + "k8s-openapi-0.29.0/src/v1_37"))[0]

# (apiVersion, kind, module, message): the bodies decode() accepts: the
# kinds kubectl's typed clients send (create generators, drain's Eviction,
# create token's TokenRequest, scale), and the ones the controller serves.
KINDS = [
    ("v1", k, "api/core/v1", k)
    for k in [
        "Pod", "Service", "Namespace", "ConfigMap", "Secret", "Endpoints", "Node",
        "ServiceAccount", "Event", "PersistentVolumeClaim", "PersistentVolume",
        "ReplicationController", "LimitRange", "ResourceQuota", "Binding", "PodTemplate",
    ]
] + [
    ("apps/v1", k, "api/apps/v1", k)
    for k in ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"]
] + [
    ("policy/v1", "PodDisruptionBudget", "api/policy/v1", "PodDisruptionBudget"),
    ("policy/v1", "Eviction", "api/policy/v1", "Eviction"),
    ("coordination.k8s.io/v1", "Lease", "api/coordination/v1", "Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api/discovery/v1", "EndpointSlice"),
    ("events.k8s.io/v1", "Event", "api/events/v1", "Event"),
    ("autoscaling/v1", "Scale", "api/autoscaling/v1", "Scale"),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "api/autoscaling/v1", "HorizontalPodAutoscaler"),
    ("batch/v1", "Job", "api/batch/v1", "Job"),
    ("batch/v1", "CronJob", "api/batch/v1", "CronJob"),
    ("meta.k8s.io/v1", "DeleteOptions", "apimachinery/pkg/apis/meta/v1", "DeleteOptions"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api/autoscaling/v2", "HorizontalPodAutoscaler"),
    ("networking.k8s.io/v1", "Ingress", "api/networking/v1", "Ingress"),
    ("networking.k8s.io/v1", "IngressClass", "api/networking/v1", "IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy", "api/networking/v1", "NetworkPolicy"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api/scheduling/v1", "PriorityClass"),
    ("authentication.k8s.io/v1", "TokenRequest", "api/authentication/v1", "TokenRequest"),
] + [
    ("rbac.authorization.k8s.io/v1", k, "api/rbac/v1", k)
    for k in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]
]

# Messages with a JSON form of their own (see src/walk.rs); never walked.
SPECIAL = {
    "apimachinery/pkg/api/resource.Quantity": "Quantity",
    "apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "apimachinery/pkg/apis/meta/v1.Time": "Time",
    "apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "apimachinery/pkg/apis/meta/v1.Duration": "Duration",
    "apimachinery/pkg/apis/meta/v1.FieldsV1": "RawJson",
    "apimachinery/pkg/runtime.RawExtension": "RawJson",
}

# Whether a zero scalar (0, false, "") is written. Go's JSON drops it where
# the field is `omitempty`, and gogo-protobuf writes every non-pointer field
# even when zero, so the bytes alone cannot tell an unset field from a set
# zero. Kept: the fields k8s-openapi marks required (not `Option`: no
# `omitempty` in Go), and these Go pointer fields whose zero means
# something (0 replicas, false automount), `Message.field` or any message.
KEEP_ZERO = {
    "DeploymentSpec.replicas", "ReplicaSetSpec.replicas", "StatefulSetSpec.replicas",
    "ReplicationControllerSpec.replicas", "revisionHistoryLimit", "progressDeadlineSeconds",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "automountServiceAccountToken",
    "enableServiceLinks", "shareProcessNamespace", "hostUsers", "setHostnameAsFQDN",
    "PodSpec.priority", "runAsUser", "runAsGroup", "fsGroup", "runAsNonRoot", "privileged",
    "readOnlyRootFilesystem", "allowPrivilegeEscalation", "defaultMode", "KeyToPath.mode",
    "DownwardAPIVolumeFile.mode", "optional", "backoffLimit", "backoffLimitPerIndex",
    "maxFailedIndexes", "parallelism", "completions", "ttlSecondsAfterFinished", "suspend",
    "startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
    "allocateLoadBalancerNodePorts", "EndpointConditions.ready", "EndpointConditions.serving",
    "EndpointConditions.terminating", "immutable", "deletionGracePeriodSeconds",
    "gracePeriodSeconds", "orphanDependents", "blockOwnerDeletion", "OwnerReference.controller",
    "leaseDurationSeconds", "leaseTransitions", "expirationSeconds", "tolerationSeconds",
    "partition", "minReplicas", "targetCPUUtilizationPercentage",
    # Status fields Go writes without `omitempty` that k8s-openapi, making
    # every status field optional, does not mark required.
    "PodDisruptionBudgetStatus.currentHealthy", "PodDisruptionBudgetStatus.desiredHealthy",
    "PodDisruptionBudgetStatus.disruptionsAllowed", "PodDisruptionBudgetStatus.expectedPods",
    "ReplicaSetStatus.replicas", "ReplicationControllerStatus.replicas",
    "StatefulSetStatus.replicas", "DaemonSetStatus.currentNumberScheduled",
    "DaemonSetStatus.numberMisscheduled", "DaemonSetStatus.desiredNumberScheduled",
    "DaemonSetStatus.numberReady", "TokenRequestStatus.token",
}

# Go structs embedded with `json:",inline"`: no JSON name of their own,
# their fields are the parent's (`Message.field` as k8s-pb spells it).
INLINE = {
    "local_object_reference", "Volume.volume_source", "Probe.handler",
    "PersistentVolumeSpec.persistent_volume_source",
    "EphemeralContainer.ephemeral_container_common", "IngressRule.ingress_rule_value",
}

STRUCT_RE = re.compile(r"^pub struct (\w+) \{\n(.*?)^\}", re.S | re.M)
# One field: its prost attribute, then `pub name: Type,` (rustfmt may wrap
# the type over several lines, up to the next doc comment or attribute).
FIELD_RE = re.compile(
    r"#\[prost\(([^\]]*?)tag = \"(\d+)\"\)\]\s*pub (?:r#)?(\w+):\s*(.*?),?\s*(?=///|#\[|\Z)", re.S)


def pkg_of(module):
    return "k8s.io." + module.replace("/", ".")


def load_module(module, cache={}):
    if module not in cache:
        text = open(os.path.join(PB, module, "mod.rs")).read()
        cache[module] = {m.group(1): m.group(2) for m in STRUCT_RE.finditer(text)}
    return cache[module]


def resolve(module, rust_type):
    """The (module, message) a field's Rust type names, `super::` resolved."""
    inner = rust_type
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<"):
        if inner.startswith(wrapper):
            inner = inner[len(wrapper):-1]
    parts = inner.split("::")
    path = module.split("/")
    while parts and parts[0] == "super":
        parts.pop(0)
        path.pop()
    return "/".join(path + parts[:-1]), parts[-1]


def json_names(module, message, cache={}):
    """{normalised name: (JSON name, required)} of k8s-openapi's struct for
    this message, or None when it has none (the structs Go only ever
    embeds inline, like VolumeSource). k8s-pb and k8s-openapi spell
    acronyms differently (HttpGetAction, HTTPGetAction): compared in
    lower case."""
    key = (module, message)
    if key not in cache:
        names = None
        for path in glob.glob(os.path.join(OA, module, "*.rs")):
            text = open(path).read()
            m = re.search(r"^pub struct (\w+) \{", text, re.M)
            if m and m.group(1).lower() == message.lower():
                names = {}
                for j, required in re.findall(
                        r'serialize_field\(&mut state, "([^"]+)", (&self)?', text):
                    names[norm(j)] = (j, bool(required))
        cache[key] = names
    return cache[key]


GLOBAL = {}


def norm(name):
    return name.replace("_", "").lower()


def lower_camel(name):
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def report_missing(order, bodies):
    """Names, on stderr, the fields k8s-openapi's v1_37 has and k8s-pb's
    protobuf schema lacks: fields newer than k8s-pb, which the decoder
    skips as unknown if a client sends them."""
    def names(key):
        out = set()
        for tag, json, kind, card, keep in bodies[key]:
            if card == "Inline":
                child = order[int(re.search(r"\d+", kind).group())]
                out |= names(child)
            else:
                out.add(norm(json))
        return out

    for key in order:
        known = json_names(*key) or {}
        have = names(key) | {"apiversion", "kind"}
        for n, (json, _) in sorted(known.items()):
            if n not in have:
                print("note: %s.%s.%s is newer than k8s-pb: skipped if sent"
                      % (key[0], key[1], json), file=sys.stderr)


def main():
    for path in glob.glob(os.path.join(OA, "**", "*.rs"), recursive=True):
        for j in re.findall(r'serialize_field\(&mut state, "([^"]+)"', open(path).read()):
            GLOBAL.setdefault(norm(j), j)
    order, index, queue = [], {}, []

    def want(module, message):
        key = (module, message)
        if key not in index:
            index[key] = len(order)
            order.append(key)
            queue.append(key)
        return index[key]

    for _, _, module, message in KINDS:
        want(module, message)
    bodies = {}
    while queue:
        module, message = queue.pop(0)
        body = load_module(module).get(message)
        if body is None:
            sys.exit("no message %s in %s" % (message, module))
        fields = []
        for attr, tag, rname, rtype in FIELD_RE.findall(body):
            rtype = re.sub(r"\s+", "", rtype).rstrip(",").replace(",>", ">")
            attr = attr.strip().rstrip(",")
            kind, card, ref = None, "Single", None
            m = re.match(r'btree_map = "string, (\w+)"', attr)
            if m:
                card, kind = "Map", m.group(1)
                if kind == "message":
                    ref = resolve(module, re.search(r"BTreeMap<[^,]+,(.*)>$", rtype).group(1).strip())
            else:
                words = [w.strip() for w in attr.split(",") if w.strip()]
                kind = words[0].split(" ")[0]
                if "repeated" in words:
                    card = "Repeated"
                if kind == "message":
                    ref = resolve(module, rtype)
            scalar = {"string": "String", "bytes": "Bytes", "bool": "Bool", "int32": "Int32",
                      "int64": "Int64", "double": "Double"}
            if kind == "message":
                special = SPECIAL.get("%s.%s" % ref)
                rust_kind = "Kind::%s" % special if special else "Kind::Message(%d)" % want(*ref)
            elif kind in scalar:
                rust_kind = "Kind::%s" % scalar[kind]
            else:
                sys.exit("unsupported field kind %r in %s.%s" % (attr, module, message))
            names = json_names(module, message)
            if rname in INLINE or "%s.%s" % (message, rname) in INLINE:
                json, required, card = lower_camel(rname), False, "Inline"
            elif names is not None and norm(rname) in names:
                json, required = names[norm(rname)]
            elif norm(rname) in GLOBAL:
                # A struct k8s-openapi only has flattened into its parents
                # (VolumeSource's fields are Volume's): the name any struct
                # gives the field.
                json, required = GLOBAL[norm(rname)], False
            else:
                json, required = lower_camel(rname), False
                print("warning: %s.%s.%s has no k8s-openapi name, using %s"
                      % (module, message, rname, json), file=sys.stderr)
            keep = required or json in KEEP_ZERO or "%s.%s" % (message, json) in KEEP_ZERO
            keep = "true" if keep else "false"
            fields.append((int(tag), json, rust_kind, card, keep))
        fields.sort()
        bodies[(module, message)] = fields

    report_missing(order, bodies)
    out = sys.stdout
    out.write("// @generated by tools/gen_schema.py from k8s-pb 0.9.0 (field numbers and\n"
              "// types) and k8s-openapi 0.29.0 v1_37 (JSON names), both Apache-2.0. Do not edit:\n"
              "// change the script and run it again.\n\n")
    out.write("use super::{Card, Field, Kind, Message};\n\n")
    out.write("/// Every message the decoder walks; `Kind::Message(i)` is an index here.\n")
    out.write("#[rustfmt::skip]\n")
    out.write("pub(crate) static MESSAGES: &[Message] = &[\n")
    for module, message in order:
        out.write('    Message { name: "%s.%s", fields: &[\n' % (pkg_of(module), message))
        for tag, json, kind, card, keep in bodies[(module, message)]:
            out.write('        Field { tag: %d, json: "%s", kind: %s, card: Card::%s, keep_zero: %s },\n'
                      % (tag, json, kind, card, keep))
        out.write("    ] },\n")
    out.write("];\n\n")
    out.write("/// The top-level kinds: (apiVersion, kind, index in `MESSAGES`).\n")
    out.write("#[rustfmt::skip]\n")
    out.write("pub(crate) static KINDS: &[(&str, &str, usize)] = &[\n")
    for api_version, kind, module, message in KINDS:
        out.write('    ("%s", "%s", %d),\n' % (api_version, kind, index[(module, message)]))
    out.write("];\n")


main()
