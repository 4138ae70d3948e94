//! What reading a state file costs, against the YAML parser alone measured
//! in the same run (`cargo bench -p sluice-agent --bench state_parse`).
//!
//! - A 10 000-Service × 10-endpoint file: full validation (`parse_state`)
//!   and the nesting pre-scan, each as a ratio to loading the same text into
//!   `serde_yaml::Value`s (what any serde_yaml-based reader pays at least).
//! - Deeply nested files: the YAML parser alone is quadratic in depth (the
//!   agent used to run it before refusing); `parse_state` refuses them in a
//!   linear pre-scan.

use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_agent::state::limits::{check_nesting, MAX_NESTING};
use sluice_agent::state::parse_state;

#[path = "../tests/common/manifests.rs"]
#[allow(dead_code)]
mod manifests;

/// Best of `runs`, after one warm-up: the least disturbed figure on a
/// shared machine.
fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let _ = f();
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn yaml_values(text: &str) -> usize {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).map(|_| 1).unwrap_or(0))
        .sum()
}

fn large_state(services: usize, endpoints: usize) -> String {
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n\
                spec: {podCIDRs: [198.19.0.0/16]}\n\
                status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}\n";
    format!("{node}{}", manifests::many_services(services, endpoints))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // criterion's harness passes --bench; nothing else to read.
    let text = large_state(10_000, 10);
    let base = best(2, || yaml_values(&text));
    let full = best(2, || parse_state(&text).map(|s| s.services.len()));
    let scan = best(3, || check_nesting(&text, MAX_NESTING).is_ok());
    println!(
        "state file: 10 000 Services x 10 endpoints, {:.1} MB",
        text.len() as f64 / 1e6
    );
    println!("| what | ms | ratio to YAML load |");
    println!("|---|---:|---:|");
    println!(
        "| YAML load into Values (baseline) | {:.0} | 1.00 |",
        ms(base)
    );
    println!(
        "| parse_state (pre-scan, load, validate) | {:.0} | {:.2} |",
        ms(full),
        ms(full) / ms(base)
    );
    println!(
        "| nesting pre-scan alone | {:.1} | {:.3} |",
        ms(scan),
        ms(scan) / ms(base)
    );

    println!();
    println!("| nesting depth | bytes | YAML load (baseline) ms | parse_state ms | ratio |");
    println!("|---:|---:|---:|---:|---:|");
    for depth in [1_000usize, 10_000, 30_000] {
        let deep = format!(
            "kind: Service\nx: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let base = best(1, || yaml_values(&deep));
        let ours = best(3, || parse_state(&deep).is_err());
        println!(
            "| {depth} | {} | {:.1} | {:.3} | {:.5} |",
            deep.len(),
            ms(base),
            ms(ours),
            ms(ours) / ms(base)
        );
    }
}
