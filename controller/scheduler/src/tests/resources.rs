use serde_json::json;

use super::*;
use crate::resources::{pod_demand, DEFAULT_CPU_MILLI, DEFAULT_MEMORY};

fn demand(p: PodB) -> crate::resources::Demand {
    pod_demand(&p.build(), "pod default/p").expect("demand")
}

fn container(name: &str, cpu: &str, mem: &str) -> Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": mem}}})
}

#[test]
fn the_effective_request_is_the_larger_of_init_peak_and_container_sum() {
    let p = pod("p")
        .spec(
            "containers",
            json!([container("a", "200m", "1Gi"), container("b", "300m", "1Gi")]),
        )
        .spec("initContainers", json!([container("i", "1", "512Mi")]));
    let d = demand(p);
    assert_eq!(d.exact.cpu_milli, 1000, "init container's cpu is the peak");
    assert_eq!(
        d.exact.memory,
        2 << 30,
        "the containers' memory sum is the peak"
    );
}

#[test]
fn sidecars_add_to_the_sum_and_to_later_init_containers() {
    let mut sidecar = container("s", "100m", "64Mi");
    sidecar["restartPolicy"] = json!("Always");
    let p = pod("p")
        .spec("containers", json!([container("a", "500m", "128Mi")]))
        .spec(
            "initContainers",
            json!([sidecar, container("i", "450m", "0")]),
        );
    let d = demand(p);
    // Running: 500m + 100m sidecar = 600m; init peak: 450m + 100m = 550m.
    assert_eq!(d.exact.cpu_milli, 600);
    assert_eq!(d.exact.memory, 192 << 20);
    let p = pod("p")
        .spec("containers", json!([container("a", "100m", "0")]))
        .spec("initContainers", json!([
            {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            container("i", "900m", "0")
        ]));
    assert_eq!(
        demand(p).exact.cpu_milli,
        1000,
        "init after a sidecar runs beside it"
    );
}

#[test]
fn overhead_and_pod_level_requests() {
    let p = pod("p")
        .req("100m", "100Mi")
        .spec("overhead", json!({"cpu": "250m", "memory": "10Mi"}));
    let d = demand(p);
    assert_eq!((d.exact.cpu_milli, d.exact.memory), (350, 110 << 20));
    let p = pod("p")
        .req("100m", "100Mi")
        .spec("resources", json!({"requests": {"cpu": "2"}}));
    let d = demand(p);
    assert_eq!((d.exact.cpu_milli, d.exact.memory), (2000, 100 << 20));
}

#[test]
fn scoring_counts_defaults_for_containers_that_request_nothing() {
    let d = demand(pod("p"));
    assert!(d.exact.is_zero());
    assert_eq!(
        (d.non_zero_cpu, d.non_zero_memory),
        (DEFAULT_CPU_MILLI, DEFAULT_MEMORY)
    );
}

#[test]
fn an_unreadable_request_names_its_field() {
    let e = pod_demand(&pod("p").req("lots", "1Gi").build(), "pod default/p").expect_err("bad");
    assert_eq!(e.field, "spec.containers[0].resources.requests.cpu");
    assert_eq!(e.object, "pod default/p");
}

#[test]
fn a_negative_request_is_refused_naming_its_field() {
    // A request of -1 cpu would free a core on whichever node took it.
    let e = pod_demand(&pod("p").req("-1", "1Gi").build(), "pod default/p").expect_err("neg");
    assert_eq!(e.field, "spec.containers[0].resources.requests.cpu");
    assert!(e.message.contains("greater than or equal to 0"), "{e}");
    let e = pod_demand(&pod("p").req("1", "-1Mi").build(), "pod default/p").expect_err("neg");
    assert_eq!(e.field, "spec.containers[0].resources.requests.memory");
    assert!(crate::check_pod(&pod("p").req("0", "0").build()).is_ok());
}
