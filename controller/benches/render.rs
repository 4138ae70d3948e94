//! The answer's bytes from a stored object (`api::stored::render`), the
//! step every list, watch and get runs once per object:
//! `cargo bench -p sluice-controller --bench render`
//!
//! Stored Pods made by the create pipeline the server runs (defaults,
//! metadata), rendered with no selector, a label selector and a field
//! selector. Each is printed as a ratio to a baseline measured in the same
//! run: a validating parse of the same bytes that builds nothing
//! (`serde::de::IgnoredAny`), the least a server that checks what it sends
//! could do. The decoding path (decode, insert the revision, encode) is
//! shown against the same baseline.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_controller::api::fuzzing;
use sluice_controller::api::objects::Selectors;
use sluice_controller::api::stored;

const OBJECTS: usize = 2_000;
const ROUNDS: usize = 25;

fn pods() -> Vec<Vec<u8>> {
    (0..OBJECTS)
        .map(|i| {
            let body = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default",
                             "labels": {"app": format!("a{}", i % 100), "tier": "web"},
                             "annotations": {"sluice.dev/note": "a pod like the API bench's"}},
                "spec": {"nodeName": format!("node-{}", i % 50),
                         "containers": [{"name": "c", "image": "registry.example/app:1.2.3",
                                         "ports": [{"containerPort": 8080}],
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            });
            let stored = fuzzing::create(
                "/api/v1/namespaces/default/pods",
                "application/json",
                "Strict",
                &serde_json::to_vec(&body).expect("encode"),
            )
            .expect("a valid pod");
            serde_json::to_vec(&stored).expect("encode")
        })
        .collect()
}

fn selectors(labels: &str, fields: &str) -> Selectors {
    let q = HashMap::from([
        ("labelSelector".to_string(), labels.to_string()),
        ("fieldSelector".to_string(), fields.to_string()),
    ]);
    Selectors::from_query(&q)
        .map_err(|e| e.message)
        .expect("selectors")
}

/// The best of `ROUNDS` passes over every object, per object.
fn time(objects: &[Vec<u8>], f: impl Fn(&[u8], i64) -> usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let mut n = 0;
        for (i, o) in objects.iter().enumerate() {
            n += f(black_box(o), i as i64);
        }
        black_box(n);
        best = best.min(t.elapsed());
    }
    best / objects.len() as u32
}

fn main() {
    let objects = pods();
    let mean = objects.iter().map(Vec::len).sum::<usize>() / objects.len();
    let baseline = time(&objects, |o, _| {
        usize::from(serde_json::from_slice::<serde::de::IgnoredAny>(o).is_ok())
    });
    let all = selectors("", "");
    let app = selectors("app=a7", "");
    let node = selectors("", "spec.nodeName=node-7");
    let rows: [(&str, Duration); 4] = [
        (
            "render, no selector",
            time(&objects, |o, r| {
                stored::render(o, r, &all).map_or(0, |b| b.map_or(0, |b| b.len()))
            }),
        ),
        (
            "render, label selector",
            time(&objects, |o, r| {
                stored::render(o, r, &app).map_or(0, |b| b.map_or(0, |b| b.len()))
            }),
        ),
        (
            "render, field selector",
            time(&objects, |o, r| {
                stored::render(o, r, &node).map_or(0, |b| b.map_or(0, |b| b.len()))
            }),
        ),
        (
            "decode, insert, encode (the slow path)",
            time(&objects, |o, r| {
                stored::render_decoded(o, r, &all).map_or(0, |b| b.map_or(0, |b| b.len()))
            }),
        ),
    ];
    println!("{OBJECTS} stored Pods of {mean} bytes, best of {ROUNDS} passes");
    println!("| step | ns per object | ratio to a validating parse |");
    println!("|---|---:|---:|");
    println!(
        "| validating parse (`IgnoredAny`, baseline) | {} | 1.00 |",
        baseline.as_nanos()
    );
    for (name, d) in rows {
        println!(
            "| {name} | {} | {:.2} |",
            d.as_nanos(),
            d.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
