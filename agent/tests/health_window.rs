//! What a failing load-balancer health check changes on the node: the
//! health answer only, never the packet path. The state file goes through
//! the control side into in-memory maps, and crafted TCP frames through the
//! packet program, as the emulated engine runs it; no sockets, no root.

use std::net::{IpAddr, Ipv4Addr};

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use sluice_agent::control::build_content;
use sluice_agent::health::{node_eligible, service_health_entries};
use sluice_agent::state::{parse_state, DesiredState};
use sluice_datapath::host::{HostMaps, TestClock, VecPacket};
use sluice_datapath::{process, Hook, Verdict};

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 100, 1);
const POD: Ipv4Addr = Ipv4Addr::new(198, 19, 1, 10);

fn state(node_meta: &str, node_spec: &str, conditions: &str) -> DesiredState {
    let text = format!(
        r#"
apiVersion: v1
kind: Node
metadata: {{name: node-a{node_meta}}}
spec: {{podCIDRs: ["198.19.1.0/24"]{node_spec}}}
status: {{addresses: [{{type: InternalIP, address: 198.18.0.11}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 31000
  ports: [{{name: http, port: 80, targetPort: 8080}}]
status: {{loadBalancer: {{ingress: [{{ip: 198.18.100.1}}]}}}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints:
- {{addresses: [198.19.1.10], nodeName: node-a, conditions: {conditions}}}
"#
    );
    parse_state(&text).expect("valid state")
}

const READY: &str = "{ready: true, serving: true, terminating: false}";
const TERMINATING: &str = "{ready: false, serving: true, terminating: true}";

/// This node's H3 answer for the Service: its local ready endpoints.
fn local_check(s: &DesiredState) -> u32 {
    service_health_entries(s, "node-a")[0].local_endpoints
}

fn load(maps: &mut HostMaps, s: &DesiredState) {
    let c = build_content(s, "node-a").expect("content");
    maps.set_node(c.node);
    maps.replace_services(c.tables);
}

/// A TCP segment from the client's `sport` to VIP:80 arriving on `nic0`;
/// returns where the program sent it (None: dropped or not rewritten).
fn send(
    maps: &mut HostMaps,
    clock: &mut TestClock,
    sport: u16,
    syn: bool,
) -> Option<(IpAddr, u16)> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(CLIENT.octets(), VIP.octets(), 64)
        .tcp(sport, 80, 1000, 65535);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut frame = Vec::new();
    b.write(&mut frame, b"x").expect("frame");
    let mut pkt = VecPacket::new(frame);
    let o = process(&mut pkt, maps, clock, Hook::WireIngress);
    if o.verdict != Verdict::Pass {
        return None;
    }
    let sp = SlicedPacket::from_ethernet(&pkt.data).expect("parses");
    let dst = match sp.net.as_ref()? {
        NetSlice::Ipv4(ip) => IpAddr::V4(ip.header().destination_addr()),
        _ => return None,
    };
    let port = match sp.transport.as_ref()? {
        TransportSlice::Tcp(t) => t.destination_port(),
        _ => return None,
    };
    Some((dst, port))
}

const TO_POD: Option<(IpAddr, u16)> = Some((IpAddr::V4(POD), 8080));

#[test]
fn a_failing_service_check_leaves_flows_and_new_connections_served() {
    // spec: H5 — the Local check fails once the node's only pod terminates;
    // that steers the load balancer, it does not cut the established flow.
    // spec: H4, P5 — new connections the load balancer still sends before
    // its unhealthy threshold reach the terminating pod, not a reset.
    let mut maps = HostMaps::new();
    let mut clock = TestClock::new(7);
    let healthy = state("", "", READY);
    assert_eq!(local_check(&healthy), 1, "passes");
    load(&mut maps, &healthy);
    assert_eq!(send(&mut maps, &mut clock, 40000, true), TO_POD);

    let ending = state("", "", TERMINATING);
    assert_eq!(local_check(&ending), 0, "H3: fails");
    load(&mut maps, &ending);
    assert_eq!(
        send(&mut maps, &mut clock, 40000, false),
        TO_POD,
        "established flow keeps flowing"
    );
    assert_eq!(
        send(&mut maps, &mut clock, 40001, true),
        TO_POD,
        "a connection within the load balancer's window is served"
    );
}

#[test]
fn a_node_failing_healthz_still_serves_what_reaches_it() {
    // spec: H5 — a node being removed fails /healthz (H2) but its maps are
    // those of a healthy node: its health is not its pods' readiness.
    // spec: H4 — connections that still arrive are served.
    let mut maps = HostMaps::new();
    let mut clock = TestClock::new(9);
    let healthy = state("", "", READY);
    load(&mut maps, &healthy);
    assert_eq!(send(&mut maps, &mut clock, 41000, true), TO_POD);

    let leaving = state(
        r#", deletionTimestamp: "2026-11-23T04:00:00Z""#,
        ", taints: [{key: ToBeDeletedByClusterAutoscaler, effect: NoSchedule}]",
        READY,
    );
    let n = &leaving.nodes["node-a"];
    assert!(!node_eligible(
        n.deleting,
        n.taints.iter().map(String::as_str)
    ));
    assert_eq!(local_check(&leaving), 1, "its endpoints stay ready");
    load(&mut maps, &leaving);
    assert_eq!(send(&mut maps, &mut clock, 41000, false), TO_POD);
    assert_eq!(send(&mut maps, &mut clock, 41001, true), TO_POD);
}

#[test]
fn with_nothing_left_to_serve_new_connections_are_refused() {
    // The control case that makes the two tests above able to fail: with no
    // serving pod at all the program does not forward a new connection.
    let mut maps = HostMaps::new();
    let mut clock = TestClock::new(11);
    load(
        &mut maps,
        &state("", "", "{ready: false, serving: false, terminating: true}"),
    );
    assert_ne!(send(&mut maps, &mut clock, 42000, true), TO_POD);
}
