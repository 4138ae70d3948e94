//! The desired state built from configuration, verdicts, MACs and ids; the
//! control state handing it over only when it changed; `/metrics`.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sluice_lb::build::{build, LeftOut};
use sluice_lb::config::file::parse;
use sluice_lb::config::LbConfig;
use sluice_lb::control::Control;
use sluice_lb::ids::Ids;
use sluice_lb::metrics::{render, BackendSample, Snapshot};
use sluice_lb::neighbours::Macs;

const CONFIG: &str = r#"
services:
- name: ns/web
  frontends: [{ipAddress: 198.19.0.10, port: 80, protocol: TCP}]
  healthCheck: {healthyThreshold: 1, unhealthyThreshold: 2, checkIntervalSec: 2}
  backends:
  - {node: a, ipAddress: 198.18.0.2}
  - {node: b, ipAddress: 198.18.0.3}
  - {node: c, ipAddress: 198.18.0.4}
"#;

fn config() -> LbConfig {
    parse(CONFIG).expect("valid")
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, last))
}

fn macs(lasts: &[u8]) -> Macs {
    lasts.iter().map(|&l| (ip(l), [2, 0, 0, 0, 0, l])).collect()
}

/// A read of the neighbour table that finds `lasts` resolved.
fn read(c: &mut Control, lasts: &[u8]) {
    let r = c.neighbour_read_started();
    c.set_macs(macs(lasts), r);
}

/// The control state with every backend of [`CONFIG`] resolved and
/// healthy at 2 s.
fn all_healthy() -> Control {
    let mut c = Control::new(Ids::default());
    c.set_config(config(), Duration::ZERO);
    read(&mut c, &[2, 3, 4]);
    let t = Duration::from_secs(2);
    for p in c.due(t) {
        c.report(&p.key, p.seq, true, t);
    }
    read(&mut c, &[2, 3, 4]);
    c
}

fn ids_for(cfg: &LbConfig) -> Ids {
    let mut ids = Ids::default();
    ids.sync(
        cfg.backends()
            .map(|(s, b)| (s.name.as_str(), b.node.as_str())),
    );
    ids
}

#[test]
fn with_none_healthy_every_resolved_backend_is_listed_unhealthy() {
    // spec: H5 — the verdicts steer; with none healthy the engine sends to all.
    let cfg = config();
    let built = build(&cfg, |_, _| false, &macs(&[2, 3, 4]), &ids_for(&cfg));
    let web = &built.desired.services[0];
    assert_eq!(web.backends.len(), 3);
    assert!(web.backends.iter().all(|b| !b.healthy));
    assert_eq!(web.frontends, cfg.services[0].frontends);
    assert!(built.left_out.is_empty());
    assert_eq!(web.backends[0].mac, [2, 0, 0, 0, 0, 2]);
}

#[test]
fn a_backend_without_a_mac_is_left_out_until_resolved() {
    let cfg = config();
    let ids = ids_for(&cfg);
    let built = build(&cfg, |_, n| n != "b", &macs(&[2, 4]), &ids);
    let nodes: Vec<(&str, bool)> = built.desired.services[0]
        .backends
        .iter()
        .map(|b| (b.node.as_str(), b.healthy))
        .collect();
    assert_eq!(nodes, [("a", true), ("c", true)]);
    assert_eq!(
        built.left_out,
        vec![(
            "ns/web".to_string(),
            "b".to_string(),
            LeftOut::NoMac { address: ip(3) }
        )]
    );
    // Resolved: b joins with the id it had all along.
    let later = build(&cfg, |_, _| true, &macs(&[2, 3, 4]), &ids);
    let b = later.desired.services[0]
        .backends
        .iter()
        .find(|b| b.node == "b")
        .expect("b is in");
    assert_eq!(Some(b.id), ids.get("ns/web", "b"));
}

#[test]
fn ids_survive_a_reconfiguration_and_a_removed_backend_s_id_is_not_handed_on() {
    let cfg = config();
    let mut ids = ids_for(&cfg);
    let before: Vec<u32> = ["a", "b", "c"]
        .iter()
        .filter_map(|n| ids.get("ns/web", n))
        .collect();
    // b leaves, d arrives.
    let next = parse(&CONFIG.replace(
        "node: b, ipAddress: 198.18.0.3",
        "node: d, ipAddress: 198.18.0.5",
    ))
    .expect("valid");
    ids.sync(
        next.backends()
            .map(|(s, b)| (s.name.as_str(), b.node.as_str())),
    );
    assert_eq!(ids.get("ns/web", "a"), Some(before[0]));
    assert_eq!(ids.get("ns/web", "c"), Some(before[2]));
    assert!(ids.get("ns/web", "b").is_none());
    let d = ids.get("ns/web", "d").expect("d has an id");
    assert!(!before.contains(&d), "b's id {} went to d", before[1]);
}

#[test]
fn the_engine_is_handed_a_state_only_when_it_changed() {
    let mut c = Control::new(Ids::default());
    c.set_config(config(), Duration::ZERO);
    read(&mut c, &[2, 3, 4]);
    let first = c.pending().expect("a first state");
    c.applied(first.clone(), true);
    assert!(c.pending().is_none(), "nothing changed");
    // The same configuration again: still nothing to hand over.
    c.set_config(config(), Duration::from_secs(1));
    assert!(c.pending().is_none());
    // A refused apply is asked for again.
    read(&mut c, &[2, 3]);
    let second = c.pending().expect("c left out");
    assert_eq!(second.services[0].backends.len(), 2);
    c.applied(second.clone(), false);
    assert_eq!(c.pending(), Some(second));
    // A probe's success changes a verdict, and so the state.
    c.applied(first.clone(), true);
    read(&mut c, &[2, 3, 4]);
    assert!(c.pending().is_none());
    let starts = c.due(Duration::from_secs(2));
    assert!(!starts.is_empty(), "every phase is within the 2 s interval");
    for p in &starts {
        c.report(&p.key, p.seq, true, Duration::from_secs(2));
    }
    // Backends turned healthy wait for a fresh read of their MACs.
    assert!(c.wants_neighbours());
    read(&mut c, &[2, 3, 4]);
    let healthy = c.pending().expect("verdicts changed");
    assert!(healthy.services[0].backends.iter().any(|b| b.healthy));
    c.applied(healthy, true);
    // More successes change no verdict: nothing to hand over.
    let again = c.due(Duration::from_secs(4));
    assert!(!again.is_empty());
    for p in &again {
        c.report(&p.key, p.seq, true, Duration::from_secs(4));
    }
    assert!(c.pending().is_none());
}

#[test]
fn metrics_render_every_family_with_escaped_labels() {
    let mut m = Snapshot {
        engine: "emulated".into(),
        services: 1,
        flows: 7,
        applies_ok: 2,
        ..Snapshot::default()
    };
    m.backends = vec![
        BackendSample {
            service: "ns/we\"b".into(),
            node: "a".into(),
            healthy: true,
            id: Some(4),
        },
        BackendSample {
            service: "ns/we\"b".into(),
            node: "b".into(),
            healthy: false,
            id: None,
        },
    ];
    m.packets.insert(4, 1234);
    m.transitions = vec![("ns/we\"b".into(), "a".into(), "healthy", 3)];
    let text = render(&m);
    for line in [
        "sluice_lb_engine_info{engine=\"emulated\"} 1",
        "sluice_lb_services 1",
        "sluice_lb_backend_healthy{service=\"ns/we\\\"b\",node=\"a\"} 1",
        "sluice_lb_backend_healthy{service=\"ns/we\\\"b\",node=\"b\"} 0",
        "sluice_lb_backend_packets_total{service=\"ns/we\\\"b\",node=\"a\"} 1234",
        "sluice_lb_backends_unresolved 1",
        "sluice_lb_health_transitions_total{service=\"ns/we\\\"b\",node=\"a\",to=\"healthy\"} 3",
        "sluice_lb_flows 7",
        "sluice_lb_applies_total{result=\"ok\"} 2",
        "# TYPE sluice_lb_backend_packets_total counter",
        "# TYPE sluice_lb_flows gauge",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // No packet sample for a backend the engine does not hold.
    assert!(!text.contains("sluice_lb_backend_packets_total{service=\"ns/we\\\"b\",node=\"b\"}"));
    // Every sample line is `name{labels} value` or `name value`.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let value = l.rsplit(' ').next().unwrap_or("");
        assert!(value.parse::<f64>().is_ok(), "{l}");
    }
}

// spec: H4 — a node leaving a Service's groups (its pod terminating, a
// Local check's node taken out of the NEG) keeps its established flows for
// GKE's 30 s of connection draining: it stays in the engine's state,
// unhealthy (no new connections), with its id, then goes.
#[test]
fn a_backend_leaving_the_configuration_drains_before_it_goes() {
    let mut c = all_healthy();
    let before = c.pending().expect("a state");
    let b_id = before.services[0]
        .backends
        .iter()
        .find(|x| x.node == "b")
        .map(|x| x.id)
        .expect("b served");
    assert!(before.services[0].backends.iter().all(|x| x.healthy));
    c.applied(before, true);

    let mut less = config();
    less.services[0].backends.retain(|b| b.node != "b");
    let removed_at = Duration::from_secs(3);
    c.set_config(less, removed_at);
    let draining = c.pending().expect("b turned unhealthy");
    let b = draining.services[0]
        .backends
        .iter()
        .find(|x| x.node == "b")
        .expect("b still in the state while it drains");
    assert!(!b.healthy, "no new connections to a draining backend");
    assert_eq!(b.id, b_id, "its flows still name it");
    assert!(draining.services[0]
        .backends
        .iter()
        .filter(|x| x.node != "b")
        .all(|x| x.healthy));
    c.applied(draining, true);
    assert!(
        c.next_wakeup()
            .is_some_and(|w| w <= removed_at + sluice_lb::draining::CONNECTION_DRAINING),
        "woken when the draining ends"
    );
    let end = removed_at + sluice_lb::draining::CONNECTION_DRAINING;
    c.due(end);
    let after = c.pending().expect("b gone");
    assert!(after.services[0].backends.iter().all(|x| x.node != "b"));
}

// A node replaced under the same address (the provider hands a dead
// node's address to its replacement): the load balancer's MACs still
// name the dead node's link until the neighbour table is read again. The
// new backend is left out until a read started after it appeared and
// after it turned healthy, so no flow is sent to a MAC that is gone.
#[test]
fn a_backend_that_appears_or_turns_healthy_waits_for_a_fresh_read_of_its_mac() {
    let mut c = all_healthy();
    assert!(!c.wants_neighbours());
    let first = c.pending().expect("a state");
    c.applied(first, true);
    // b is replaced by e under b's address; the table read before still
    // has b's MAC for it.
    let replaced = parse(&CONFIG.replace("node: b,", "node: e,")).expect("valid");
    c.set_config(replaced, Duration::from_secs(3));
    assert!(c.wants_neighbours(), "e appeared");
    let stale = c.neighbour_read_started();
    // A read started before e appeared does not count.
    let early = stale - 1;
    c.set_macs(macs(&[2, 3, 4]), early);
    assert!(c.wants_neighbours());
    let mut fresh_mac = macs(&[2, 3, 4]);
    fresh_mac.insert(ip(3), [2, 0, 0, 0, 0, 0xee]);
    c.set_macs(fresh_mac.clone(), stale);
    assert!(!c.wants_neighbours());
    // e turns healthy: one more read, and only then is it served.
    for step in 4..10u64 {
        let now = Duration::from_secs(step);
        for p in c.due(now) {
            c.report(&p.key, p.seq, true, now);
        }
    }
    assert!(c.wants_neighbours(), "e turned healthy");
    let waiting = c.pending().expect("a state");
    assert!(
        waiting.services[0].backends.iter().all(|b| b.node != "e"),
        "e is left out until its MAC is read again: {waiting:?}"
    );
    let r = c.neighbour_read_started();
    c.set_macs(fresh_mac, r);
    let served = c.pending().expect("e joins");
    let e = served.services[0]
        .backends
        .iter()
        .find(|b| b.node == "e")
        .expect("e is in");
    assert_eq!(e.mac, [2, 0, 0, 0, 0, 0xee]);
    assert!(e.healthy);
}

const TWO_SERVICES: &str = r#"
services:
- name: ns/web
  frontends: [{ipAddress: 198.19.0.10, port: 80, protocol: TCP}]
  healthCheck: {healthyThreshold: 1, unhealthyThreshold: 2, checkIntervalSec: 2}
  backends:
  - {node: a, ipAddress: 198.18.0.2}
  - {node: b, ipAddress: 198.18.0.3}
- name: ns/web-local
  frontends: [{ipAddress: 198.19.0.11, port: 80, protocol: TCP}]
  healthCheck: {port: 31000, healthyThreshold: 1, unhealthyThreshold: 2, checkIntervalSec: 2}
  backends:
  - {node: a, ipAddress: 198.18.0.2}
  - {node: b, ipAddress: 198.18.0.3}
"#;

// spec: P3 (a Cluster flow keeps the node that translated it) — a node
// turning healthy for one Service (its first pod of a `Local` Service
// Ready) waits for a fresh MAC for that Service only. Waiting by address
// took node a out of every Service until the read: a `Cluster` flow it
// carried moved to node b mid-connection, b had no conntrack for it, and
// the pod reset it (the upgrade scene's lost request, caught on the wire).
// A backend the engine holds stays while it waits, unhealthy, so its
// flows keep it; only one it does not hold is left out.
#[test]
fn a_backend_waiting_for_a_fresh_mac_keeps_its_flows_and_the_node_s_other_services() {
    let mut c = Control::new(Ids::default());
    c.set_config(parse(TWO_SERVICES).expect("valid"), Duration::ZERO);
    read(&mut c, &[2, 3]);
    // Both nodes healthy for web; for web-local only b (a has no local
    // pod yet: its probe fails).
    for step in 2..8u64 {
        let now = Duration::from_secs(step);
        for p in c.due(now) {
            let ok = !(p.key.port == 31000 && p.key.address == Ipv4Addr::new(198, 18, 0, 2));
            c.report(&p.key, p.seq, ok, now);
        }
    }
    read(&mut c, &[2, 3]);
    let before = c.pending().expect("a state");
    c.applied(before.clone(), true);
    let node = |d: &sluice_lb::desired::LbDesired, svc: &str, n: &str| {
        d.services
            .iter()
            .find(|s| s.name == svc)
            .and_then(|s| s.backends.iter().find(|b| b.node == n))
            .map(|b| (b.id, b.mac, b.healthy))
    };
    let web_a = node(&before, "ns/web", "a").expect("a serves web");
    assert!(web_a.2);
    let local_a = node(&before, "ns/web-local", "a").expect("a listed for web-local");
    assert!(!local_a.2, "a is unhealthy for web-local");

    // a's local pod turns Ready: a turns healthy for web-local.
    for step in 8..12u64 {
        let now = Duration::from_secs(step);
        for p in c.due(now) {
            c.report(&p.key, p.seq, true, now);
        }
    }
    assert!(c.wants_neighbours(), "a turned healthy for web-local");
    // Until the read nothing changes for the engine: web's backend on a
    // keeps its id and MAC, web-local's stays listed, unhealthy.
    assert_eq!(c.pending(), None, "the engine keeps what it holds");
    read(&mut c, &[2, 3]);
    let after = c.pending().expect("a joins web-local");
    assert_eq!(node(&after, "ns/web-local", "a").map(|b| b.2), Some(true));
    assert_eq!(node(&after, "ns/web", "a"), Some(web_a));
}
