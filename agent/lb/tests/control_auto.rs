//! `--engine auto`: the kernel engine where its program loads and attaches,
//! else the emulated one, as the agent's `--datapath auto`. Needs root (a
//! namespace) and, for the kernel half, the object `cargo xtask build-ebpf
//! --release` builds (`cargo xtask test` does).

// Only the namespaces of the segment are used here.
#[allow(dead_code)]
mod control_support;

use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use sluice_tests::netns::spawn_in;

/// The process, stopped when dropped (also on a failed assertion): SIGTERM,
/// so the engine gives the link back, then SIGKILL after 10 s.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        sluice_tests::netns::stop_child(&mut self.0, Duration::from_secs(10));
    }
}

/// `sluice-lb` on `lb0` of `ns` with `--engine engine`.
fn start(
    ns: &str,
    metrics: SocketAddr,
    config: &str,
    engine: &str,
    object: Option<&str>,
) -> Running {
    let metrics_arg = metrics.to_string();
    let mut argv = vec![
        env!("CARGO_BIN_EXE_sluice-lb"),
        "--interface",
        "lb0",
        "--config",
        config,
        "--engine",
        engine,
        "--metrics-bind-address",
        &metrics_arg,
    ];
    if let Some(o) = object {
        argv.extend(["--bpf-object", o]);
    }
    Running(spawn_in(ns, &argv, Stdio::null(), Stdio::null()).expect("sluice-lb runs"))
}

/// The engine `sluice-lb --engine auto` settles on, read from its metrics.
fn engine_chosen(ns: &str, metrics: SocketAddr, config: &str, object: Option<&str>) -> String {
    let _lb = start(ns, metrics, config, "auto", object);
    engine_line(ns, metrics)
}

/// `sluice_lb_engine_info` once `/metrics` answers (within 20 s).
fn engine_line(ns: &str, metrics: SocketAddr) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(a) = sluice_tests::http_get(ns, metrics, "/metrics") {
            if let Some(line) = a
                .body
                .lines()
                .find(|l| l.starts_with("sluice_lb_engine_info{"))
            {
                return line.to_string();
            }
        }
        assert!(Instant::now() < deadline, "no /metrics from sluice-lb");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A one-Service configuration file, removed when dropped.
struct Config(std::path::PathBuf);

impl Config {
    fn new(tag: &str, net: u8) -> Config {
        let p = std::env::temp_dir().join(format!("sluice-lb-{tag}-{}.yaml", std::process::id()));
        std::fs::write(
            &p,
            format!("services:\n- name: t/s\n  frontends: [{{ipAddress: 198.18.177.1, port: 80, protocol: TCP}}]\n  backends: [{{node: n, ipAddress: 198.18.{net}.2}}]\n"),
        )
        .expect("config");
        Config(p)
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `kill -9` of an emulated load balancer leaves its link in the relay's
/// private namespace and the interface's addresses gone with the TAP; the
/// next start gives the link back before it binds `/metrics` on one of
/// those addresses.
#[test]
fn a_restart_after_kill_9_serves_again() {
    let seg = control_support::segment("lbkill", 78);
    let config = Config::new("kill", 78);
    let metrics: SocketAddr = "198.18.78.1:10260".parse().expect("address");
    let mut first = start(seg.lb.name(), metrics, &config.path(), "emulated", None);
    assert!(engine_line(seg.lb.name(), metrics).contains("emulated"));
    let _ = first.0.kill();
    let _ = first.0.wait();
    let _again = start(seg.lb.name(), metrics, &config.path(), "emulated", None);
    assert!(engine_line(seg.lb.name(), metrics).contains("emulated"));
}

#[test]
fn auto_takes_the_kernel_engine_where_it_loads_else_the_emulated_one() {
    let seg = control_support::segment("lbauto", 77);
    let config = Config::new("auto", 77);
    let path = config.path();
    let metrics: SocketAddr = "198.18.77.1:10260".parse().expect("address");
    let without = engine_chosen(
        seg.lb.name(),
        metrics,
        &path,
        Some("/nonexistent/sluice-lb.o"),
    );
    let with = engine_chosen(seg.lb.name(), metrics, &path, None);
    assert_eq!(
        without, "sluice_lb_engine_info{engine=\"emulated\"} 1",
        "no program to load: the emulated engine"
    );
    assert_eq!(
        with, "sluice_lb_engine_info{engine=\"kernel\"} 1",
        "the built program loads here (cargo xtask build-ebpf --release)"
    );
}
