//! A pseudo-random batch checked against invariants, and the view kept
//! incrementally checked against one rebuilt from the same objects.

use std::collections::BTreeMap;

use serde_json::json;
use sluice_model::k8s::Pod;

use super::*;
use crate::schedule_all;

/// A small deterministic generator (xorshift), so the test needs no
/// dependency and fails the same way every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn nodes(rng: &mut Rng) -> Vec<NodeB> {
    (0..24)
        .map(|i| {
            let cpu = ["2", "4", "8"][rng.next(3) as usize];
            let n = node(&format!("n{i:02}"), cpu, "16Gi", 12).zone(["a", "b", "c"][i % 3]);
            if rng.next(4) == 0 {
                n.label("disk", "ssd")
            } else {
                n
            }
        })
        .collect()
}

fn pods(rng: &mut Rng, n: usize) -> Vec<PodB> {
    (0..n)
        .map(|i| {
            let cpu = format!("{}m", 100 * (1 + rng.next(8)));
            let p = pod(&format!("p{i:03}")).req(&cpu, "512Mi");
            match rng.next(5) {
                0 => p.spec("nodeSelector", json!({"disk": "ssd"})),
                1 => {
                    let app = format!("spread{}", rng.next(3));
                    p.label("app", &app).spread(
                        &app,
                        "topology.kubernetes.io/zone",
                        1,
                        "DoNotSchedule",
                    )
                }
                2 => {
                    let app = format!("ha{}", rng.next(4));
                    p.label("app", &app).anti(&app, "kubernetes.io/hostname")
                }
                _ => p,
            }
        })
        .collect()
}

fn binding(d: &Decision) -> Option<&str> {
    match d {
        Decision::Bind { node } => Some(node),
        Decision::Unschedulable { .. } => None,
    }
}

#[test]
fn a_random_batch_respects_every_rule() {
    let mut rng = Rng(0x5eed);
    let node_list = nodes(&mut rng);
    let alloc: BTreeMap<String, i128> = node_list
        .iter()
        .map(|n| {
            let name = n.0["metadata"]["name"].as_str().unwrap_or("").to_owned();
            let cpu = n.0["status"]["allocatable"]["cpu"].as_str().unwrap_or("0");
            (name, cpu.parse::<i128>().unwrap_or(0) * 1000)
        })
        .collect();
    let pod_list: Vec<Pod> = pods(&mut rng, 400).into_iter().map(PodB::build).collect();
    let mut c = cluster(node_list, vec![]);
    let out = schedule_all(&mut c, &pod_list);
    let placed: BTreeMap<&str, &str> = out
        .iter()
        .filter_map(|(k, d)| Some((k.as_str(), binding(d)?)))
        .collect();
    assert!(placed.len() > 100 && placed.len() < 400, "{}", placed.len());
    let mut cpu: BTreeMap<&str, i128> = BTreeMap::new();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ha: BTreeMap<(String, &str), usize> = BTreeMap::new();
    let mut spread: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
    for p in &pod_list {
        let Some(node) = placed.get(crate::pod_key(p).as_str()) else {
            continue;
        };
        let demand = crate::resources::pod_demand(p, "pod").expect("demand");
        *cpu.entry(node).or_default() += demand.exact.cpu_milli;
        *count.entry(node).or_default() += 1;
        let app = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned();
        match app {
            Some(a) if a.starts_with("ha") => *ha.entry((a, *node)).or_default() += 1,
            Some(a) => {
                let zones = spread.entry(a).or_default();
                let zone = ["a", "b", "c"][node[1..].parse::<usize>().unwrap_or(0) % 3];
                *zones.entry(zone).or_default() += 1;
            }
            None => {}
        }
    }
    for (node, used) in &cpu {
        assert!(*used <= alloc[*node], "{node}: {used} > {}", alloc[*node]);
        assert!(count[node] <= 12);
        assert_eq!(
            c.requested(node).map(|r| (r.0, r.2)),
            Some((*used, count[node]))
        );
    }
    assert!(ha.values().all(|n| *n == 1), "{ha:?}");
    for (app, zones) in spread {
        let counts: Vec<usize> = ["a", "b", "c"]
            .iter()
            .map(|z| zones.get(z).copied().unwrap_or(0))
            .collect();
        let (lo, hi) = (counts.iter().min(), counts.iter().max());
        assert!(
            hi.zip(lo).is_some_and(|(h, l)| h - l <= 1),
            "{app}: {counts:?}"
        );
    }
}

#[test]
fn the_kept_view_decides_as_a_rebuilt_one() {
    let mut rng = Rng(0xfeed);
    let node_list: Vec<_> = nodes(&mut rng).into_iter().map(NodeB::build).collect();
    let pod_list: Vec<Pod> = pods(&mut rng, 300).into_iter().map(PodB::build).collect();
    let (mut kept, _) = Cluster::from_objects(&node_list, &[]);
    let out = schedule_all(&mut kept, &pod_list[..200]);
    // The bound pods as the API would now hold them, less every third.
    let mut bound_pods = Vec::new();
    for (i, (p, (_, d))) in pod_list.iter().zip(&out).enumerate() {
        let Some(node) = binding(d) else { continue };
        if i % 3 == 0 {
            let name = p.metadata.name.as_deref().unwrap_or("");
            assert!(kept.remove_pod("default", name));
            continue;
        }
        let mut p = p.clone();
        if let Some(s) = p.spec.as_mut() {
            s.node_name = Some(node.to_owned());
        }
        bound_pods.push(p);
    }
    // Drop a node and bring it back in both.
    assert!(kept.remove_node("n05"));
    kept.upsert_node(&node_list[5]).expect("node");
    let (mut rebuilt, errors) = Cluster::from_objects(&node_list, &bound_pods);
    assert!(errors.is_empty());
    for c in [&mut kept, &mut rebuilt] {
        c.set_percentage_of_nodes_to_score(100);
    }
    for n in &node_list {
        let name = n.metadata.name.as_deref().unwrap_or("");
        assert_eq!(kept.requested(name), rebuilt.requested(name), "{name}");
    }
    let rest = &pod_list[200..];
    assert_eq!(
        schedule_all(&mut kept, rest),
        schedule_all(&mut rebuilt, rest)
    );
}
