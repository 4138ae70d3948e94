//! Scheduling throughput: 5 000 nodes in 3 zones (4 cpu, 16 GiB, 110 pods
//! each; half labelled `disk=ssd`) and 50 000 pending pods with requests:
//! half plain, a fifth with a nodeSelector, a fifth spread across zones
//! (`DoNotSchedule`, apps of 100), a tenth with hostname anti-affinity
//! (apps of 5). Scheduled once scoring every node (percentageOfNodesToScore
//! 100, the baseline) and once with kube-scheduler's adaptive share, each
//! on a fresh view; the figure is pods bound per second and the ratio.
//!
//! `SLUICE_BENCH_PODS` and `SLUICE_BENCH_NODES` shrink the run;
//! `SLUICE_BENCH_BASELINE=0` skips the baseline (for profiling).

use std::time::Instant;

use serde_json::json;
use sluice_model::k8s::{Node, Pod};
use sluice_scheduler::{schedule_all, Cluster, Decision};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let name = format!("node-{i:05}");
            let mut labels = json!({
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": format!("zone-{}", ["a", "b", "c"][i % 3]),
            });
            if i % 2 == 0 {
                labels["disk"] = json!("ssd");
            }
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
            }))
            .expect("node")
        })
        .collect()
}

fn pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let cpu = format!("{}m", 100 + (i % 3) * 100);
            let memory = format!("{}Mi", 256 * (1 + i % 4));
            let mut pod = json!({
                "metadata": {"name": format!("pod-{i:05}"), "namespace": "bench", "labels": {}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            });
            match i % 10 {
                5 | 6 => pod["spec"]["nodeSelector"] = json!({"disk": "ssd"}),
                7 | 8 => {
                    let app = format!("spread-{}", i / 500);
                    pod["metadata"]["labels"]["app"] = json!(app);
                    pod["spec"]["topologySpreadConstraints"] = json!([{
                        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": app}},
                    }]);
                }
                9 => {
                    let app = format!("ha-{}", i / 50);
                    pod["metadata"]["labels"]["app"] = json!(app);
                    pod["spec"]["affinity"] = json!({"podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        }]}});
                }
                _ => {}
            }
            serde_json::from_value(pod).expect("pod")
        })
        .collect()
}

/// Schedules every pod on a fresh view; pods bound per second, and how
/// many were bound.
fn run(nodes: &[Node], pods: &[Pod], percent: u32) -> (f64, usize) {
    let (mut cluster, errors) = Cluster::from_objects(nodes, &[]);
    assert!(errors.is_empty(), "{errors:?}");
    cluster.set_percentage_of_nodes_to_score(percent);
    let start = Instant::now();
    let out = schedule_all(&mut cluster, pods);
    let secs = start.elapsed().as_secs_f64();
    let bound = out
        .iter()
        .filter(|(_, d)| matches!(d, Decision::Bind { .. }))
        .count();
    (bound as f64 / secs, bound)
}

fn main() {
    let n_nodes = env("SLUICE_BENCH_NODES", 5_000);
    let n_pods = env("SLUICE_BENCH_PODS", 50_000);
    let nodes = nodes(n_nodes);
    let pods = pods(n_pods);
    println!("cargo bench -p sluice-scheduler");
    let base = if env("SLUICE_BENCH_BASELINE", 1) == 0 {
        f64::NAN
    } else {
        let (base, base_bound) = run(&nodes, &pods, 100);
        println!(
            "schedule: {n_nodes} nodes, {n_pods} pods: every node scored (percentageOfNodesToScore 100): {base:.0} pods/s ({base_bound} bound)"
        );
        base
    };
    let (fast, fast_bound) = run(&nodes, &pods, 0);
    println!(
        "schedule: {n_nodes} nodes, {n_pods} pods: adaptive percentageOfNodesToScore: {fast:.0} pods/s ({fast_bound} bound), {:.1} x the baseline",
        fast / base
    );
}
