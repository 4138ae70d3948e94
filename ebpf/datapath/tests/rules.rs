//! The packet program against the spec's packet rules (P1-P6), both traffic
//! policies, IPv4 and IPv6, on frames crafted with etherparse and re-checked
//! after processing (every checksum recomputed).

mod common;

use common::*;
use sluice_datapath::conntrack::{merged, CT_TIMEOUT_TCP_CLOSE_NS, SNAT_TIME_WAIT_HOLD_NS};
use sluice_datapath::maps::{
    CtKey, LocalKey, LocalLink, CT_DIR_FORWARD, CT_DIR_REPLY, CT_F_FIN_FORWARD, CT_F_FIN_REPLY,
    CT_STATE_CLOSED, CT_STATE_CLOSING, CT_STATE_ESTABLISHED, CT_STATE_FIN_WAIT, CT_STATE_SYN_SENT,
    PROTO_TCP, PROTO_UDP, SVC_F_AFFINITY, SVC_F_LOCAL,
};
use sluice_datapath::{Event, Hook, Verdict};
use std::collections::HashSet;

const PORT: u16 = 80;
const TARGET: u16 = 8080;

/// Run a test body for IPv4 and IPv6.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod v4 { $( #[test] fn $name() { super::$name(super::Net { v6: false }); } )* }
        mod v6 { $( #[test] fn $name() { super::$name(super::Net { v6: true }); } )* }
    };
}

both!(
    p1_frontend_match,
    p2_dnat_tcp_checksums,
    p2_dnat_udp_checksums,
    p3_cluster_snat_and_reply,
    p3_unique_snat_ports,
    p4_local_no_snat_and_reply,
    p5_ready_first,
    p5_only_terminating,
    p5_established_keeps_terminating_endpoint,
    p6_tcp_reset_syn,
    p6_tcp_reset_ack,
    p6_rst_not_answered,
    p6_udp_port_unreachable,
    affinity_sticks_and_expires,
    affinity_leaves_terminating_endpoint,
    ct_tcp_states,
    ct_expiry,
    ct_syn_retransmit_keeps_entry,
    ct_new_syn_on_opening_flow_chooses_again,
    fragments,
    truncated_frames_pass_or_drop,
    vlan_tagged,
    no_node_address,
    no_snat_port,
    snat_port_held_for_time_wait,
    snat_reused_tuple_gets_a_fresh_port,
    snat_port_held_goes_to_a_syn_time_wait_takes,
    snat_port_of_an_ended_flow,
    snat_port_held_past_the_clients_last_ack,
    snat_port_held_past_a_stale_reset,
    snat_range_used_to_its_last_port,
    local_pod_frames_go_to_its_link,
    flooded_frames_are_left_to_their_host,
    pods_speak_only_for_their_own_addresses,
    ct_forged_resets_and_fins_leave_the_flow,
    ct_both_sides_closing_at_once_lose_nothing,
);

fn tcp_svc(net: Net, flags: u32, ready: &[u16], terminating: &[u16]) -> common::Env {
    let s = spec(
        svc_key(net.vip(), PORT, PROTO_TCP),
        flags,
        ready.iter().map(|&n| ep(net.pod(n), TARGET)).collect(),
        terminating
            .iter()
            .map(|&n| ep(net.pod(n), TARGET))
            .collect(),
    );
    let u = spec(
        svc_key(net.vip(), 53, PROTO_UDP),
        flags,
        ready.iter().map(|&n| ep(net.pod(n), 5353)).collect(),
        terminating.iter().map(|&n| ep(net.pod(n), 5353)).collect(),
    );
    common::Env::new(net, &[s, u])
}

// spec: P1
fn p1_frontend_match(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let hit = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    assert_eq!(env.run(&hit, Hook::WireIngress).0.event, Event::NewFlow);

    let misses = [
        tcp(net, net.client(), 40001, net.vip(), PORT + 1, &syn(1)),
        udp(net, net.client(), 40002, net.vip(), PORT, b"x"),
        tcp(net, net.client(), 40003, net.other(), PORT, &syn(1)),
    ];
    for f in misses {
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.verdict, Verdict::Pass);
        assert_eq!(o.event, Event::NotService);
        assert_eq!(out, f, "passes untouched");
    }
    // Frontends are only looked up where VIP traffic arrives.
    let f = tcp(net, net.client(), 40004, net.vip(), PORT, &syn(1));
    let (o, out) = env.run(&f, Hook::WireEgress);
    assert_eq!((o.verdict, out), (Verdict::Pass, f));
}

// spec: P2
fn p2_dnat_tcp_checksums(net: Net) {
    for flags in [0, SVC_F_LOCAL] {
        let mut env = tcp_svc(net, flags, &[1], &[]);
        let f = tcp(
            net,
            net.client(),
            40000,
            net.vip(),
            PORT,
            &seg(TCP_SYN, 7, 0, b"hello"),
        );
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        let d = decode(&out);
        assert_eq!(d.dst, net.pod(1));
        assert_eq!(d.ports().1, TARGET);
        assert_eq!(d.ttl, 64, "TTL untouched");
        match d.l4 {
            L4::Tcp { payload, seq, .. } => {
                assert_eq!(payload, b"hello");
                assert_eq!(seq, 7);
            }
            l => panic!("{l:?}"),
        }
    }
}

// spec: P2
fn p2_dnat_udp_checksums(net: Net) {
    for flags in [0, SVC_F_LOCAL] {
        let mut env = tcp_svc(net, flags, &[1, 2], &[]);
        let f = udp(net, net.client(), 41000, net.vip(), 53, b"query");
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        let d = decode(&out);
        assert!(d.dst == net.pod(1) || d.dst == net.pod(2));
        assert_eq!(d.ports().1, 5353);
        if let L4::Udp { csum, .. } = d.l4 {
            assert_ne!(csum, 0);
        }
    }
    if !net.v6 {
        // spec: P2 — a UDP/IPv4 datagram without checksum stays without one.
        let mut env = tcp_svc(net, 0, &[1], &[]);
        let mut f = udp(net, net.client(), 41001, net.vip(), 53, b"query");
        let l4 = 14 + 20;
        f[l4 + 6] = 0;
        f[l4 + 7] = 0;
        let (_, out) = env.run(&f, Hook::WireIngress);
        let d = decode(&out);
        assert_eq!(d.src, net.node());
        match d.l4 {
            L4::Udp { csum, .. } => assert_eq!(csum, 0),
            l => panic!("{l:?}"),
        }
    }
}

// spec: P3
fn p3_cluster_snat_and_reply(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(100));
    let (_, out) = env.run(&f, Hook::WireIngress);
    let d = decode(&out);
    assert_eq!(d.src, net.node(), "SNAT to the node address");
    let (snat_port, dport) = d.ports();
    assert!((SNAT_MIN..=SNAT_MAX).contains(&snat_port));
    assert_eq!((d.dst, dport), (net.pod(1), TARGET));

    // The endpoint's reply, from a remote node (wire) or a local pod (on
    // its own link).
    env.maps.set_local_link(LocalKey { addr: net.pod(1) }, LINK);
    for hook in [Hook::WireIngress, Hook::FromPod] {
        let r = pod1_to_node(net, snat_port, &seg(TCP_SYN | TCP_ACK, 900, 101, b""));
        let (o, out) = env.run(&r, hook);
        assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::ReplyNat));
        let d = decode(&out);
        assert_eq!((d.src, d.ports().0), (net.vip(), PORT), "DSR: from the VIP");
        assert_eq!((d.dst, d.ports().1), (net.client(), 40000));
    }
}

/// A segment from pod 1's target port to the node's `snat_port`: what
/// the endpoint of a `Cluster` flow answers.
fn pod1_to_node(net: Net, snat_port: u16, s: &TcpSeg) -> Vec<u8> {
    tcp(net, net.pod(1), TARGET, net.node(), snat_port, s)
}

// spec: P3
fn p3_unique_snat_ports(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let mut seen = HashSet::new();
    for i in 0..2000u16 {
        let client = net.client_n(i % 50);
        let f = tcp(net, client, 10000 + i, net.vip(), PORT, &syn(1));
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        let d = decode(&out);
        assert!(
            seen.insert((d.src, d.ports().0, d.dst, d.ports().1)),
            "SNAT tuple reused"
        );
    }
}

// spec: P4
fn p4_local_no_snat_and_reply(net: Net) {
    // The control side puts only this node's endpoints in a Local service.
    let mut env = tcp_svc(net, SVC_F_LOCAL, &[1, 2], &[]);
    // Their replies come in on their links.
    for n in [1, 2] {
        env.maps.set_local_link(LocalKey { addr: net.pod(n) }, LINK);
    }
    for i in 0..50u16 {
        let f = tcp(net, net.client(), 40000 + i, net.vip(), PORT, &syn(1));
        let (_, out) = env.run(&f, Hook::WireIngress);
        let d = decode(&out);
        assert_eq!(d.src, net.client(), "client address kept");
        assert_eq!(d.ports().0, 40000 + i, "client port kept");
        assert!(d.dst == net.pod(1) || d.dst == net.pod(2));

        let r = tcp(
            net,
            d.dst,
            TARGET,
            net.client(),
            40000 + i,
            &seg(TCP_SYN | TCP_ACK, 5, 2, b""),
        );
        let (o, out) = env.run(&r, Hook::FromPod);
        assert_eq!(o.event, Event::ReplyNat);
        let d = decode(&out);
        assert_eq!((d.src, d.ports().0), (net.vip(), PORT));
        assert_eq!((d.dst, d.ports().1), (net.client(), 40000 + i));
    }
}

// spec: P5
fn p5_ready_first(net: Net) {
    let mut env = tcp_svc(net, 0, &[1, 2], &[3]);
    for i in 0..300u16 {
        let f = tcp(net, net.client(), 20000 + i, net.vip(), PORT, &syn(1));
        let d = decode(&env.run(&f, Hook::WireIngress).1);
        assert_ne!(
            d.dst,
            net.pod(3),
            "terminating endpoint used while ready exist"
        );
    }
}

// spec: P5
fn p5_only_terminating(net: Net) {
    for flags in [0, SVC_F_LOCAL] {
        let mut env = tcp_svc(net, flags, &[], &[3, 4]);
        let mut used = HashSet::new();
        for i in 0..100u16 {
            let f = tcp(net, net.client(), 20000 + i, net.vip(), PORT, &syn(1));
            let (o, out) = env.run(&f, Hook::WireIngress);
            assert_eq!(o.event, Event::NewFlow);
            used.insert(decode(&out).dst);
        }
        assert_eq!(used, HashSet::from([net.pod(3), net.pod(4)]));
    }
}

// spec: P5
fn p5_established_keeps_terminating_endpoint(net: Net) {
    let mut env = tcp_svc(net, 0, &[1, 2], &[]);
    let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    let first = decode(&env.run(&f, Hook::WireIngress).1);
    let chosen = first.dst;
    let (keep, other) = if chosen == net.pod(1) { (1, 2) } else { (2, 1) };
    // The chosen endpoint starts terminating.
    let s = spec(
        svc_key(net.vip(), PORT, PROTO_TCP),
        0,
        vec![ep(net.pod(other), TARGET)],
        vec![ep(net.pod(keep), TARGET)],
    );
    env.set_services(&[s]);
    let ack = tcp(
        net,
        net.client(),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_ACK, 2, 1, b"data"),
    );
    let (o, out) = env.run(&ack, Hook::WireIngress);
    assert_eq!(o.event, Event::Established);
    let d = decode(&out);
    assert_eq!(d.dst, chosen, "established flow keeps its endpoint");
    assert_eq!(d.ports().0, first.ports().0, "and its SNAT port");

    // The same tuple reused for a new connection re-chooses: a ready one.
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    assert_eq!(decode(&out).dst, net.pod(other));
}

// spec: P6
fn p6_tcp_reset_syn(net: Net) {
    for flags in [0, SVC_F_LOCAL] {
        let mut env = tcp_svc(net, flags, &[], &[]);
        let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1000));
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::Reset));
        let d = decode(&out);
        assert_eq!((d.src, d.dst, d.ttl), (net.vip(), net.client(), 64));
        match d.l4 {
            L4::Tcp {
                sport,
                dport,
                flags,
                seq,
                ack,
                payload,
            } => {
                assert_eq!((sport, dport), (PORT, 40000));
                assert_eq!(flags, TCP_RST | TCP_ACK);
                assert_eq!((seq, ack), (0, 1001));
                assert!(payload.is_empty());
            }
            l => panic!("{l:?}"),
        }
        assert_eq!(out[0..6], MAC_A, "MACs swapped");
    }
}

// spec: P6
fn p6_tcp_reset_ack(net: Net) {
    let mut env = tcp_svc(net, 0, &[], &[]);
    let f = tcp(
        net,
        net.client(),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_ACK | TCP_PSH, 5000, 777, b"payload"),
    );
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::Reset);
    match decode(&out).l4 {
        L4::Tcp { flags, seq, .. } => {
            assert_eq!(flags, TCP_RST);
            assert_eq!(seq, 777, "seq = their ack");
        }
        l => panic!("{l:?}"),
    }
    // Without ACK, with payload and FIN: ack covers all of it.
    let f = tcp(
        net,
        net.client(),
        40001,
        net.vip(),
        PORT,
        &seg(TCP_FIN, 5000, 0, b"abc"),
    );
    let (_, out) = env.run(&f, Hook::WireIngress);
    match decode(&out).l4 {
        L4::Tcp {
            flags, seq, ack, ..
        } => {
            assert_eq!(flags, TCP_RST | TCP_ACK);
            assert_eq!((seq, ack), (0, 5004));
        }
        l => panic!("{l:?}"),
    }
}

// spec: P6
fn p6_rst_not_answered(net: Net) {
    let mut env = tcp_svc(net, 0, &[], &[]);
    let f = tcp(
        net,
        net.client(),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_RST, 1, 0, b""),
    );
    let (o, _) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.verdict, Verdict::Drop);
}

// spec: P6
fn p6_udp_port_unreachable(net: Net) {
    let mut env = tcp_svc(net, 0, &[], &[]);
    let f = udp(net, net.client(), 41000, net.vip(), 53, &[0xab; 100]);
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::Unreachable));
    let d = decode(&out);
    assert_eq!((d.src, d.dst, d.ttl), (net.vip(), net.client(), 64));
    let ip_len = if net.v6 { 40 } else { 20 };
    match d.l4 {
        L4::Icmp { ty, code, payload } => {
            if net.v6 {
                assert_eq!((ty, code), (1, 4));
            } else {
                assert_eq!((ty, code), (3, 3));
            }
            // The original IP header and the UDP header, unchanged.
            assert_eq!(payload, f[14..14 + ip_len + 8].to_vec());
        }
        l => panic!("{l:?}"),
    }
    if !net.v6 {
        // With IPv4 options the whole original header is quoted.
        let f = with_ipv4_options(&udp(net, net.client(), 41001, net.vip(), 53, b"q"));
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::Unreachable);
        match decode(&out).l4 {
            L4::Icmp { payload, .. } => assert_eq!(payload, f[14..14 + 24 + 8].to_vec()),
            l => panic!("{l:?}"),
        }
    }
}

fn affinity_env(net: Net, timeout_s: u32, ready: &[u16], terminating: &[u16]) -> common::Env {
    let mut s = spec(
        svc_key(net.vip(), PORT, PROTO_TCP),
        SVC_F_AFFINITY,
        ready.iter().map(|&n| ep(net.pod(n), TARGET)).collect(),
        terminating
            .iter()
            .map(|&n| ep(net.pod(n), TARGET))
            .collect(),
    );
    s.affinity_timeout_s = timeout_s;
    common::Env::new(net, &[s])
}

// spec: P2 (sessionAffinity: ClientIP)
fn affinity_sticks_and_expires(net: Net) {
    let mut env = affinity_env(net, 30, &[1, 2, 3, 4, 5], &[]);
    let mut first = None;
    for i in 0..40u16 {
        let f = tcp(net, net.client(), 30000 + i, net.vip(), PORT, &syn(1));
        let d = decode(&env.run(&f, Hook::WireIngress).1);
        assert_eq!(
            *first.get_or_insert(d.dst),
            d.dst,
            "same client, same endpoint"
        );
        env.clock.advance_s(20);
    }
    // Past the timeout each new flow may land elsewhere.
    let mut seen = HashSet::new();
    for i in 0..40u16 {
        env.clock.advance_s(31);
        let f = tcp(net, net.client(), 31000 + i, net.vip(), PORT, &syn(1));
        seen.insert(decode(&env.run(&f, Hook::WireIngress).1).dst);
    }
    assert!(seen.len() > 1, "affinity never expired");
    // Other clients are spread over the endpoints.
    let mut spread = HashSet::new();
    for c in 0..40u16 {
        let f = tcp(net, net.client_n(c), 32000, net.vip(), PORT, &syn(1));
        spread.insert(decode(&env.run(&f, Hook::WireIngress).1).dst);
    }
    assert!(spread.len() > 2);
}

// spec: P5 (affinity does not pin new flows to a terminating endpoint)
fn affinity_leaves_terminating_endpoint(net: Net) {
    let mut env = affinity_env(net, 3600, &[1, 2], &[]);
    let f = tcp(net, net.client(), 30000, net.vip(), PORT, &syn(1));
    let chosen = decode(&env.run(&f, Hook::WireIngress).1).dst;
    let (keep, other) = if chosen == net.pod(1) { (1, 2) } else { (2, 1) };
    let mut s = spec(
        svc_key(net.vip(), PORT, PROTO_TCP),
        SVC_F_AFFINITY,
        vec![ep(net.pod(other), TARGET)],
        vec![ep(net.pod(keep), TARGET)],
    );
    s.affinity_timeout_s = 3600;
    env.set_services(&[s]);
    let f = tcp(net, net.client(), 30001, net.vip(), PORT, &syn(1));
    assert_eq!(
        decode(&env.run(&f, Hook::WireIngress).1).dst,
        net.pod(other)
    );
}

fn fwd_key(net: Net, sport: u16) -> CtKey {
    CtKey {
        saddr: net.client(),
        daddr: net.vip(),
        sport,
        dport: PORT,
        proto: PROTO_TCP,
        dir: CT_DIR_FORWARD,
        _pad: [0; 2],
    }
}

/// The reply entry's key of the forward value `fv`.
fn reply_key(fv: &sluice_datapath::maps::CtValue) -> CtKey {
    CtKey {
        saddr: fv.nat_daddr,
        daddr: fv.nat_saddr,
        sport: fv.nat_dport,
        dport: fv.nat_sport,
        proto: PROTO_TCP,
        dir: CT_DIR_REPLY,
        _pad: [0; 2],
    }
}

fn pair_state(env: &common::Env, net: Net, sport: u16) -> (u8, u8) {
    use sluice_datapath::env::Maps;
    let fk = fwd_key(net, sport);
    let fv = env.maps.ct_get(&fk).expect("forward entry");
    let rk = reply_key(&fv);
    let rv = env.maps.ct_get(&rk).expect("reply entry");
    (merged(&fv).0, merged(&rv).0)
}

/// The client side and the endpoint side of one translated connection.
struct Conn {
    net: Net,
    cport: u16,
    ep: sluice_datapath::maps::Addr,
    snat_port: u16,
}

impl Conn {
    fn open(env: &mut common::Env, net: Net, cport: u16) -> Self {
        let f = tcp(net, net.client(), cport, net.vip(), PORT, &syn(1));
        let d = decode(&env.run(&f, Hook::WireIngress).1);
        Conn {
            net,
            cport,
            ep: d.dst,
            snat_port: d.ports().0,
        }
    }
    fn client(&self, env: &mut common::Env, flags: u8) -> sluice_datapath::Outcome {
        let n = self.net;
        let f = tcp(
            n,
            n.client(),
            self.cport,
            n.vip(),
            PORT,
            &seg(flags, 2, 2, b""),
        );
        env.run(&f, Hook::WireIngress).0
    }
    fn server(&self, env: &mut common::Env, flags: u8) -> sluice_datapath::Outcome {
        let n = self.net;
        let f = tcp(
            n,
            self.ep,
            TARGET,
            n.node(),
            self.snat_port,
            &seg(flags, 2, 2, b""),
        );
        env.run(&f, Hook::WireIngress).0
    }
}

// spec: P5 (connection tracking backs "established flows keep their endpoint")
fn ct_tcp_states(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let c = Conn::open(&mut env, net, 40000);
    assert_eq!(
        pair_state(&env, net, 40000),
        (CT_STATE_SYN_SENT, CT_STATE_SYN_SENT)
    );
    assert_eq!(c.server(&mut env, TCP_SYN | TCP_ACK).event, Event::ReplyNat);
    assert_eq!(
        pair_state(&env, net, 40000),
        (CT_STATE_ESTABLISHED, CT_STATE_ESTABLISHED)
    );
    c.client(&mut env, TCP_FIN | TCP_ACK);
    assert_eq!(
        pair_state(&env, net, 40000),
        (CT_STATE_FIN_WAIT, CT_STATE_FIN_WAIT)
    );
    c.server(&mut env, TCP_FIN | TCP_ACK);
    assert_eq!(
        pair_state(&env, net, 40000),
        (CT_STATE_CLOSING, CT_STATE_CLOSING)
    );

    let c = Conn::open(&mut env, net, 40001);
    c.client(&mut env, TCP_ACK);
    assert_eq!(
        pair_state(&env, net, 40001).0,
        CT_STATE_ESTABLISHED,
        "forward ACK"
    );
    c.server(&mut env, TCP_RST);
    assert_eq!(
        pair_state(&env, net, 40001),
        (CT_STATE_CLOSED, CT_STATE_CLOSED)
    );
    // A closed flow lingers for the close timeout, then is gone.
    env.clock.advance_s(11);
    assert_eq!(c.server(&mut env, TCP_ACK).event, Event::NotService);
}

// spec: P5 (timeouts)
fn ct_expiry(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let c = Conn::open(&mut env, net, 40000);
    env.clock.advance_s(59);
    assert_eq!(c.server(&mut env, TCP_SYN | TCP_ACK).event, Event::ReplyNat);
    // Established: six hours without traffic still holds.
    env.clock.advance_s(21_599);
    assert_eq!(c.client(&mut env, TCP_ACK).event, Event::Established);
    env.clock.advance_s(21_601);
    assert_eq!(
        c.server(&mut env, TCP_ACK).event,
        Event::NotService,
        "expired"
    );
    assert_eq!(
        c.client(&mut env, TCP_ACK).event,
        Event::NewFlow,
        "expired entry replaced"
    );

    // A half-open flow lasts 60 s.
    let c = Conn::open(&mut env, net, 40001);
    env.clock.advance_s(61);
    assert_eq!(
        c.server(&mut env, TCP_SYN | TCP_ACK).event,
        Event::NotService
    );

    // UDP: 60 s, refreshed by traffic.
    let f = udp(net, net.client(), 41000, net.vip(), 53, b"q");
    assert_eq!(env.run(&f, Hook::WireIngress).0.event, Event::NewFlow);
    env.clock.advance_s(50);
    assert_eq!(env.run(&f, Hook::WireIngress).0.event, Event::Established);
    env.clock.advance_s(50);
    assert_eq!(env.run(&f, Hook::WireIngress).0.event, Event::Established);
    env.clock.advance_s(61);
    assert_eq!(env.run(&f, Hook::WireIngress).0.event, Event::NewFlow);

    let before = env.maps.ct_len();
    assert!(before > 0);
    env.clock.advance_s(100_000);
    assert_eq!(env.maps.expire(env.now()), before);
    assert_eq!(env.maps.ct_len(), 0);
}

// spec: P3 (a retransmitted SYN keeps its SNAT port and endpoint)
fn ct_syn_retransmit_keeps_entry(net: Net) {
    let mut env = tcp_svc(net, 0, &[1, 2, 3], &[]);
    let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    let a = decode(&env.run(&f, Hook::WireIngress).1);
    env.clock.advance_s(1);
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::Established);
    let b = decode(&out);
    assert_eq!((a.src, a.ports(), a.dst), (b.src, b.ports(), b.dst));
    assert_eq!(env.maps.ct_len(), 2);
}

// spec: P5 (a new connection goes to a serving endpoint: a client whose
// connect timed out against an endpoint that then died, reconnecting from
// the same port with a new initial sequence number, is not held to it)
fn ct_new_syn_on_opening_flow_chooses_again(net: Net) {
    let mut env = tcp_svc(net, 0, &[1, 2, 3], &[]);
    // Ports until the first try lands on pod 1, the one that will die.
    let (sport, first) = (40000..40100)
        .find_map(|p| {
            let f = tcp(net, net.client(), p, net.vip(), PORT, &syn(1));
            let d = decode(&env.run(&f, Hook::WireIngress).1);
            (d.dst == net.pod(1)).then_some((p, f))
        })
        .expect("some port hashes to pod 1");
    // Pod 1 dies before answering; the SYN is retransmitted: same entry.
    env.set_services(&[spec(
        svc_key(net.vip(), PORT, PROTO_TCP),
        0,
        vec![ep(net.pod(2), TARGET), ep(net.pod(3), TARGET)],
        vec![],
    )]);
    env.clock.advance_s(1);
    let (o, out) = env.run(&first, Hook::WireIngress);
    assert_eq!(
        o.event,
        Event::Established,
        "a retransmission keeps its flow"
    );
    assert_eq!(decode(&out).dst, net.pod(1));
    // The client gives up and connects again from the same port: another
    // initial sequence number, so a new connection, chosen among the live.
    env.clock.advance_s(2);
    let again = tcp(net, net.client(), sport, net.vip(), PORT, &syn(7919));
    let (o, out) = env.run(&again, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    let d = decode(&out);
    assert!(
        d.dst == net.pod(2) || d.dst == net.pod(3),
        "the new connection went to {:?}",
        d.dst
    );
    // Its own retransmission now keeps the new endpoint.
    env.clock.advance_s(1);
    let (o, out) = env.run(&again, Hook::WireIngress);
    assert_eq!(o.event, Event::Established);
    assert_eq!(decode(&out).dst, d.dst);
}

// spec: P1 (fragments aimed at a VIP cannot be matched to a port)
fn fragments(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let frag = |f: &[u8], more: bool, off: u16| {
        if net.v6 {
            ipv6_fragment(f, more, off)
        } else {
            ipv4_fragment(f, more, off)
        }
    };
    let to_vip = udp(net, net.client(), 41000, net.vip(), 53, &[0; 64]);
    let to_other = udp(net, net.client(), 41000, net.other(), 53, &[0; 64]);
    for (more, off) in [(true, 0), (false, 8), (true, 8)] {
        let (o, _) = env.run(&frag(&to_vip, more, off), Hook::WireIngress);
        assert_eq!((o.verdict, o.event), (Verdict::Drop, Event::Fragment));
        let f = frag(&to_other, more, off);
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::Fragment));
        assert_eq!(out, f);
    }
}

// spec: P1 (malformed frames never translated, never read out of bounds)
fn truncated_frames_pass_or_drop(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let to_vip = tcp(
        net,
        net.client(),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_SYN, 1, 0, b"abcd"),
    );
    let to_other = tcp(
        net,
        net.client(),
        40000,
        net.other(),
        PORT,
        &seg(TCP_SYN, 1, 0, b"abcd"),
    );
    let ip_end = 14 + if net.v6 { 40 } else { 20 };
    for cut in 0..to_vip.len() {
        let f = &to_other[..cut];
        let (o, out) = env.run(f, Hook::WireIngress);
        assert_eq!(o.verdict, Verdict::Pass);
        assert_eq!(out, f);
        let (o, out) = env.run(&to_vip[..cut], Hook::WireIngress);
        if cut >= ip_end {
            // The IP header is readable: aimed at the VIP, dropped.
            assert_eq!(
                (o.verdict, o.event),
                (Verdict::Drop, Event::Malformed),
                "cut {cut}"
            );
        } else {
            assert_eq!(o.verdict, Verdict::Pass);
            assert_eq!(out, to_vip[..cut]);
        }
    }
    // Ethernet padding after a complete packet is fine.
    let mut padded = to_vip.clone();
    padded.extend_from_slice(&[0; 16]);
    assert_eq!(env.run(&padded, Hook::WireIngress).0.event, Event::NewFlow);
}

// spec: P2 (802.1Q tagged, and IPv4 options)
fn vlan_tagged(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let f = vlan_tag(&tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1)), 7);
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    let d = decode(&out);
    assert_eq!(
        (d.dst, d.ports().1, d.src),
        (net.pod(1), TARGET, net.node())
    );
    if !net.v6 {
        let f = with_ipv4_options(&tcp(net, net.client(), 40001, net.vip(), PORT, &syn(1)));
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        let d = decode(&out);
        assert_eq!(
            (d.dst, d.ports().1, d.src),
            (net.pod(1), TARGET, net.node())
        );
    }
}

// spec: P3
fn no_node_address(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let mut n = env.maps.node_config();
    n.addr4 = [0; 16];
    n.addr6 = [0; 16];
    env.maps.set_node(n);
    let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    let (o, _) = env.run(&f, Hook::WireIngress);
    assert_eq!((o.verdict, o.event), (Verdict::Drop, Event::NoNodeAddr));
}

// spec: P3 (collision-free SNAT ports; when none is left the client gets a
// reset at once, never a silent drop)
fn no_snat_port(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let mut n = env.maps.node_config();
    n.snat_port_min = 40000;
    n.snat_port_max = 40000;
    env.maps.set_node(n);
    let a = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    assert_eq!(env.run(&a, Hook::WireIngress).0.event, Event::NewFlow);
    let b = tcp(net, net.client_n(1), 40000, net.vip(), PORT, &syn(1));
    let (o, out) = env.run(&b, Hook::WireIngress);
    assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::NoSnatPort));
    let d = decode(&out);
    assert_eq!((d.src, d.dst), (net.vip(), net.client_n(1)));
    match d.l4 {
        L4::Tcp {
            sport,
            dport,
            flags,
            ack,
            ..
        } => {
            assert_eq!((sport, dport), (PORT, 40000));
            assert_eq!((flags, ack), (TCP_RST | TCP_ACK, 2));
        }
        l => panic!("{l:?}"),
    }
    // A reset that finds no port is not answered.
    let r = tcp(
        net,
        net.client_n(2),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_RST, 5, 0, b""),
    );
    let (o, _) = env.run(&r, Hook::WireIngress);
    assert_eq!((o.verdict, o.event), (Verdict::Drop, Event::NoSnatPort));
    // Once the first flow's entry expired its port is free again.
    env.clock.advance_s(61);
    assert_eq!(env.run(&b, Hook::WireIngress).0.event, Event::NewFlow);
}

/// A node whose SNAT range is two ports: which one a flow gets shows which
/// the claim preferred.
fn two_port_env(net: Net) -> common::Env {
    n_port_env(net, 2)
}

/// Open a flow from `client`:`cport` (initial sequence number `isn`) and
/// close it with FINs both ways; its SNAT port.
fn open_and_close(
    env: &mut common::Env,
    net: Net,
    client: sluice_datapath::maps::Addr,
    cport: u16,
    isn: u32,
) -> u16 {
    let f = tcp(net, client, cport, net.vip(), PORT, &syn(isn));
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    let d = decode(&out);
    let back = |flags| {
        tcp(
            net,
            d.dst,
            TARGET,
            net.node(),
            d.ports().0,
            &seg(flags, 2, 2, b""),
        )
    };
    assert_eq!(
        env.run(&back(TCP_SYN | TCP_ACK), Hook::WireIngress).0.event,
        Event::ReplyNat
    );
    let fin = tcp(
        net,
        client,
        cport,
        net.vip(),
        PORT,
        &seg(TCP_FIN | TCP_ACK, isn.wrapping_add(1), 2, b""),
    );
    assert_eq!(env.run(&fin, Hook::WireIngress).0.event, Event::Established);
    assert_eq!(
        env.run(&back(TCP_FIN | TCP_ACK), Hook::WireIngress).0.event,
        Event::ReplyNat
    );
    d.ports().0
}

fn snat_port_of(
    env: &mut common::Env,
    net: Net,
    client: sluice_datapath::maps::Addr,
    cport: u16,
) -> (Event, u16) {
    let f = tcp(net, client, cport, net.vip(), PORT, &syn(7));
    let (o, out) = env.run(&f, Hook::WireIngress);
    (
        o.event,
        if o.event == Event::NewFlow {
            decode(&out).ports().0
        } else {
            0
        },
    )
}

// spec: P3 (a SNAT port whose flow closed with FINs is not handed to a new
// flow while the endpoint may still hold the tuple in TIME_WAIT against it)
fn snat_port_held_for_time_wait(net: Net) {
    let mut env = two_port_env(net);
    // Closed past the new SYNs' sequence number (7), without timestamps:
    // the endpoint's TIME_WAIT would not take them.
    let a = open_and_close(&mut env, net, net.client(), 40000, 1_000_000);
    // The closing entries expired (10 s) but the hold (66 s more) has not;
    // the host maps' sweep keeps them as the kernel's LRU map does.
    env.clock.advance_s(11);
    env.maps.expire(env.now());
    let (e, b) = snat_port_of(&mut env, net, net.client_n(1), 40000);
    assert_eq!(e, Event::NewFlow);
    assert_ne!(b, a, "the free port is preferred over the held one");
    // Only the held port is left, and its TIME_WAIT would turn the SYN
    // away: the client is reset at once rather than left retransmitting
    // into the endpoint's TIME_WAIT for up to a minute.
    let (e, c) = snat_port_of(&mut env, net, net.client_n(2), 40000);
    assert_eq!((e, c), (Event::NoSnatPort, 0));

    // After the hold a closed port is free like any other.
    let mut env = two_port_env(net);
    let a = open_and_close(&mut env, net, net.client(), 40000, 1_000_000);
    // The closing timeout, the hold past it (the endpoint's 60 s TIME_WAIT
    // and the kernel timer's slack), a second more.
    let hold_s = (CT_TIMEOUT_TCP_CLOSE_NS + SNAT_TIME_WAIT_HOLD_NS) / 1_000_000_000;
    assert_eq!(hold_s, 76);
    env.clock.advance_s(hold_s - 1);
    let (e, b) = snat_port_of(&mut env, net, net.client_n(3), 40000);
    assert_eq!(e, Event::NewFlow, "the other port");
    assert_ne!(b, a);
    let (e, _) = snat_port_of(&mut env, net, net.client_n(4), 40000);
    assert_eq!(
        e,
        Event::NoSnatPort,
        "still held a second before the hold ends"
    );
    let mut env = two_port_env(net);
    let a = open_and_close(&mut env, net, net.client(), 40000, 1_000_000);
    env.clock.advance_s(hold_s + 1);
    let mut got = HashSet::new();
    for n in 1..=2 {
        let (e, p) = snat_port_of(&mut env, net, net.client_n(n), 40000);
        assert_eq!(e, Event::NewFlow);
        got.insert(p);
    }
    assert!(got.contains(&a), "{got:?}");
}

// spec: P3 (a client reusing its port for a new connection gets another
// SNAT port than the closed incarnation, whose tuple the endpoint may hold)
fn snat_reused_tuple_gets_a_fresh_port(net: Net) {
    let mut env = two_port_env(net);
    let a = open_and_close(&mut env, net, net.client(), 40000, 1);
    env.clock.advance_s(1);
    let (e, b) = snat_port_of(&mut env, net, net.client(), 40000);
    assert_eq!(e, Event::NewFlow);
    assert_ne!(b, a);

    // Connection after connection on one tuple, faster than the closing
    // timeout: each incarnation walks its own candidates, none is refused.
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let mut prev = None;
    for isn in 0..(4 * sluice_datapath::SNAT_RETRIES) {
        let p = open_and_close(&mut env, net, net.client(), 40000, 1000 + isn * 7919);
        assert_ne!(
            Some(p),
            prev,
            "incarnation {isn} got its predecessor's port"
        );
        prev = Some(p);
        env.clock.advance_ns(1_000_000);
    }
}

// spec: P3 (a held SNAT port goes to a SYN the endpoint's TIME_WAIT takes:
// a later sequence number without timestamps)
fn snat_port_held_goes_to_a_syn_time_wait_takes(net: Net) {
    // Both ports held: one closed before the new SYN's number, one after.
    // Whatever order the SYN tries them in, it gets the one whose socket
    // takes it.
    for (first, second) in [(100u32, 5_000u32), (5_000, 100)] {
        let mut env = two_port_env(net);
        let p1 = open_and_close(&mut env, net, net.client(), 40000, first);
        let p2 = open_and_close(&mut env, net, net.client(), 40001, second);
        env.clock.advance_s(11);
        let safe = if first < second { p1 } else { p2 };
        let f = tcp(net, net.client_n(1), 40000, net.vip(), PORT, &syn(3_000));
        let (o, out) = env.run(&f, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        assert_eq!(
            decode(&out).ports().0,
            safe,
            "closed at {first} and {second}"
        );
    }
}

// spec: P3 (the candidates are distinct ports: a range no larger than the
// retries is used to its last port)
fn snat_range_used_to_its_last_port(net: Net) {
    let n = sluice_datapath::SNAT_RETRIES as u16;
    let mut env = n_port_env(net, n);
    let mut got = HashSet::new();
    for c in 0..n {
        let (e, p) = snat_port_of(&mut env, net, net.client_n(c + 1), 40000);
        assert_eq!(e, Event::NewFlow, "flow {c} of {n}");
        got.insert(p);
    }
    assert_eq!(got.len(), usize::from(n));
    let (e, _) = snat_port_of(&mut env, net, net.client_n(n + 1), 40000);
    assert_eq!(e, Event::NoSnatPort);
}

/// A flow with timestamps opened by [`open_ts`]: what closing it needs.
struct TsFlow {
    client: sluice_datapath::maps::Addr,
    cport: u16,
    endpoint: sluice_datapath::maps::Addr,
    port: u16,
    ts: u32,
}

/// Open a flow with timestamps from `client`:`cport` at client time `ts`:
/// SYN and SYN-ACK.
fn open_ts(
    env: &mut common::Env,
    net: Net,
    client: sluice_datapath::maps::Addr,
    cport: u16,
    ts: u32,
) -> TsFlow {
    let f = tcp(net, client, cport, net.vip(), PORT, &syn(10).with_ts(ts));
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    let d = decode(&out);
    let flow = TsFlow {
        client,
        cport,
        endpoint: d.dst,
        port: d.ports().0,
        ts,
    };
    let synack = seg(TCP_SYN | TCP_ACK, 500, 11, b"");
    let back = tcp(net, d.dst, TARGET, net.node(), flow.port, &synack);
    assert_eq!(env.run(&back, Hook::WireIngress).0.event, Event::ReplyNat);
    flow
}

/// Close `f` cleanly: FINs both ways and the last ACK, the endpoint first
/// when `server_first`. Its SNAT port.
fn end(env: &mut common::Env, net: Net, f: &TsFlow, server_first: bool) -> u16 {
    let fwd = |s: TcpSeg| tcp(net, f.client, f.cport, net.vip(), PORT, &s);
    let back = |s: TcpSeg| tcp(net, f.endpoint, TARGET, net.node(), f.port, &s);
    let fin_ack = TCP_FIN | TCP_ACK;
    let ts = f.ts;
    let steps = if server_first {
        vec![
            fwd(seg(TCP_ACK, 11, 501, b"").with_ts(ts + 1)),
            back(seg(fin_ack, 501, 11, b"")),
            fwd(seg(fin_ack, 11, 502, b"").with_ts(ts + 2)),
            back(seg(TCP_ACK, 502, 12, b"")),
        ]
    } else {
        vec![
            fwd(seg(fin_ack, 11, 501, b"").with_ts(ts + 1)),
            back(seg(fin_ack, 501, 12, b"")),
            fwd(seg(TCP_ACK, 12, 502, b"").with_ts(ts + 2)),
        ]
    };
    for frame in steps {
        let (o, _) = env.run(&frame, Hook::WireIngress);
        assert_eq!(o.verdict, Verdict::Pass, "{:?}", o.event);
    }
    f.port
}

/// The SNAT port a new flow from another client, with timestamp `ts`, gets.
fn ts_syn_port(env: &mut common::Env, net: Net, ts: u32) -> u16 {
    let f = tcp(
        net,
        net.client_n(1),
        40000,
        net.vip(),
        PORT,
        &syn(1).with_ts(ts),
    );
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    decode(&out).ports().0
}

/// A node whose SNAT range is `n` ports from 40000.
fn n_port_env(net: Net, n: u16) -> common::Env {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let mut c = env.maps.node_config();
    c.snat_port_min = 40000;
    c.snat_port_max = 40000 + n - 1;
    env.maps.set_node(c);
    env
}

// spec: P3 (a flow that ended cleanly, last ACK seen, no longer ties up its
// port for the close timeout; the endpoint's TIME_WAIT takes a newer
// timestamp whatever the sequence number, and refuses an older one)
fn snat_port_of_an_ended_flow(net: Net) {
    // The endpoint closed first: its TIME_WAIT holds the tuple. One port:
    // a SYN with a newer timestamp gets it at once, the old code waited
    // the close timeout and refused the connect meanwhile.
    let mut env = n_port_env(net, 1);
    let first = open_ts(&mut env, net, net.client(), 40000, 1_000);
    let a = end(&mut env, net, &first, true);
    env.clock.advance_ns(1_000_000);
    let f = tcp(
        net,
        net.client(),
        40001,
        net.vip(),
        PORT,
        &syn(1).with_ts(1_003),
    );
    let (o, out) = env.run(&f, Hook::WireIngress);
    assert_eq!(o.event, Event::NewFlow);
    assert_eq!(decode(&out).ports().0, a);

    // Two ports, both of flows the endpoint closed first, with timestamps
    // 1 000 and 9 000: a SYN at 5 000 gets the first, whatever the order.
    for (t1, t2) in [(1_000u32, 9_000u32), (9_000, 1_000)] {
        let mut env = n_port_env(net, 2);
        let f1 = open_ts(&mut env, net, net.client(), 40000, t1);
        let f2 = open_ts(&mut env, net, net.client(), 40001, t2);
        let p1 = end(&mut env, net, &f1, true);
        let p2 = end(&mut env, net, &f2, true);
        let want = if t1 < t2 { p1 } else { p2 };
        assert_eq!(
            ts_syn_port(&mut env, net, 5_000),
            want,
            "ended at {t1} and {t2}"
        );
    }

    // The client closed first: the endpoint keeps no TIME_WAIT, the port is
    // free even for a SYN an endpoint's TIME_WAIT would refuse (an older
    // timestamp), ahead of one the endpoint does hold against it.
    for order in [false, true] {
        let mut env = n_port_env(net, 2);
        let (c1, c2) = if order {
            (40000, 40001)
        } else {
            (40001, 40000)
        };
        let f1 = open_ts(&mut env, net, net.client(), c1, 9_000);
        let f2 = open_ts(&mut env, net, net.client(), c2, 9_000);
        let free = end(&mut env, net, &f1, false);
        end(&mut env, net, &f2, true);
        assert_eq!(ts_syn_port(&mut env, net, 10), free);
    }
}

// spec: P3 (a held port goes only to a SYN the endpoint's TIME_WAIT takes.
// When the FINs cross, in either order through the node, the endpoint goes
// to TIME_WAIT as well as the client, and that socket keeps the timestamp
// of the client's last segment, the ACK of the endpoint's FIN, not its FIN)
fn snat_port_held_past_the_clients_last_ack(net: Net) {
    let fin_ack = TCP_FIN | TCP_ACK;
    for endpoint_fin_first in [true, false] {
        for (syn_ts, gets_it) in [(1_004u32, false), (1_005, false), (1_006, true)] {
            let mut env = n_port_env(net, 1);
            let f = open_ts(&mut env, net, net.client(), 40000, 1_000);
            let fwd = |s: TcpSeg| tcp(net, f.client, f.cport, net.vip(), PORT, &s);
            let back = |s: TcpSeg| tcp(net, f.endpoint, TARGET, net.node(), f.port, &s);
            // Neither FIN acknowledges the other's.
            let fins = [
                back(seg(fin_ack, 501, 11, b"")),
                fwd(seg(fin_ack, 11, 501, b"").with_ts(1_002)),
            ];
            let fins = if endpoint_fin_first {
                fins
            } else {
                let [b, f] = fins;
                [f, b]
            };
            // Then the endpoint acknowledges the client's FIN (the flow is
            // over) and the client's ACK of the endpoint's FIN comes, later
            // on its clock, with an older one reordered behind it.
            let acks = [
                back(seg(TCP_ACK, 502, 12, b"")),
                fwd(seg(TCP_ACK, 12, 502, b"").with_ts(1_005)),
                fwd(seg(TCP_ACK, 12, 502, b"").with_ts(1_003)),
            ];
            for frame in fins.into_iter().chain(acks) {
                let (o, _) = env.run(&frame, Hook::WireIngress);
                assert_eq!(o.verdict, Verdict::Pass, "{:?}", o.event);
            }
            // Same sequence number as the old flow's end, so only the
            // timestamp decides.
            let case = format!("SYN at {syn_ts}, endpoint's FIN first: {endpoint_fin_first}");
            syn_gets_the_held_port(
                &mut env,
                net,
                (12, syn_ts),
                gets_it.then_some(f.port),
                &case,
            );
        }
    }
}

// spec: P3 (a held port stays held while the endpoint's TIME_WAIT stands:
// a client's reset one short of the sequence number that TIME_WAIT expects
// does not end it, one at exactly that number does)
fn snat_port_held_past_a_stale_reset(net: Net) {
    // The client's FIN was seq 11: the endpoint's TIME_WAIT expects 12.
    for (rst_seq, freed) in [(11u32, false), (13, false), (12, true)] {
        let mut env = n_port_env(net, 1);
        let f = open_ts(&mut env, net, net.client(), 40000, 1_000);
        let port = end(&mut env, net, &f, true);
        // The client's answer to the endpoint's FIN retransmit, reordered
        // behind its last ACK and reaching the client after it closed.
        let rst = tcp(
            net,
            f.client,
            f.cport,
            net.vip(),
            PORT,
            &seg(TCP_RST, rst_seq, 0, b""),
        );
        let (o, _) = env.run(&rst, Hook::WireIngress);
        assert_eq!(o.verdict, Verdict::Pass, "{:?}", o.event);
        // A SYN older on the client's clock than the old flow's FIN: the
        // TIME_WAIT would refuse it.
        let case = format!("reset at seq {rst_seq}");
        syn_gets_the_held_port(&mut env, net, (1, 900), freed.then_some(port), &case);
    }
}

/// A SYN from another client port with (sequence number, timestamp)
/// `seq_ts`, on a node whose only SNAT port is held: it gets `port`, or
/// with `None` is refused for want of one (the port's TIME_WAIT would
/// turn it away).
fn syn_gets_the_held_port(
    env: &mut common::Env,
    net: Net,
    (seq, ts): (u32, u32),
    port: Option<u16>,
    case: &str,
) {
    let s = tcp(
        net,
        net.client(),
        40001,
        net.vip(),
        PORT,
        &syn(seq).with_ts(ts),
    );
    let (o, out) = env.run(&s, Hook::WireIngress);
    match port {
        Some(p) => {
            assert_eq!(o.event, Event::NewFlow, "{case}");
            assert_eq!(decode(&out).ports().0, p, "{case}");
        }
        None => assert_eq!(o.event, Event::NoSnatPort, "{case}"),
    }
}

const LINK: LocalLink = LocalLink {
    ifindex: POD_LINK,
    pod_mac: [0x02, 0x50, 0, 0, 0, 1],
    node_mac: [0x02, 0x4e, 0, 0, 0, 1],
};

/// `frame` with its TTL (hop limit) set to `ttl`, the IPv4 checksum redone.
fn with_ttl(mut f: Vec<u8>, ttl: u8) -> Vec<u8> {
    if f[12..14] == [0x86, 0xdd] {
        f[14 + 7] = ttl;
        return f;
    }
    f[14 + 8] = ttl;
    f[24] = 0;
    f[25] = 0;
    let mut sum = 0u32;
    for c in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

// spec: P2, P4 (a pod on this node gets its translated packets on its own
// link: the frame the node's routing would have sent, TTL spent)
fn local_pod_frames_go_to_its_link(net: Net) {
    for policy in [SVC_F_LOCAL, 0] {
        let mut env = tcp_svc(net, policy, &[1], &[]);
        env.maps.set_local_link(LocalKey { addr: net.pod(1) }, LINK);
        let syn = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
        let (o, out) = env.run(&syn, Hook::WireIngress);
        assert_eq!(
            (o.verdict, o.event),
            (Verdict::Redirect { ifindex: 7 }, Event::NewFlow)
        );
        assert_eq!(out[..6], LINK.pod_mac, "destination MAC: the pod's");
        assert_eq!(out[6..12], LINK.node_mac, "source MAC: the node side's");
        let d = decode(&out); // every checksum re-verified
        assert_eq!((d.dst, d.ttl), (net.pod(1), 63));
        assert_eq!(d.ports().1, TARGET);

        // Established packets too; a packet with its last hop left goes to
        // the node's routing, which answers time exceeded.
        let data = tcp(
            net,
            net.client(),
            40000,
            net.vip(),
            PORT,
            &seg(TCP_ACK, 2, 2, b"x"),
        );
        let (o, _) = env.run(&data, Hook::WireIngress);
        assert_eq!(o.verdict, Verdict::Redirect { ifindex: 7 });
        let (o, out) = env.run(&with_ttl(data.clone(), 1), Hook::WireIngress);
        assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::Established));
        assert_eq!(decode(&out).ttl, 1);
        assert_eq!(out[..12], with_ttl(data, 1)[..12], "MACs untouched");

        // The pod's reply is routed as before.
        let reply_dst = if policy == SVC_F_LOCAL {
            net.client()
        } else {
            net.node()
        };
        let reply_port = d.ports().0;
        let r = tcp(
            net,
            net.pod(1),
            TARGET,
            reply_dst,
            reply_port,
            &seg(TCP_SYN | TCP_ACK, 5, 2, b""),
        );
        assert_eq!(env.run(&r, Hook::FromPod).0.verdict, Verdict::Pass);
    }

    // An endpoint with no link on this node is routed.
    let mut env = tcp_svc(net, 0, &[2], &[]);
    env.maps.set_local_link(LocalKey { addr: net.pod(1) }, LINK);
    let syn = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));
    let (o, out) = env.run(&syn, Hook::WireIngress);
    assert_eq!(o.verdict, Verdict::Pass);
    assert_eq!(decode(&out).ttl, 64);
}

// spec: P1, P2, P6 (a node translates, or answers with a reset, only what
// was sent to it: a bridge floods unknown unicast to every port, and each
// node answering for the real receiver gave the client a second SYN-ACK or
// a reset)
fn flooded_frames_are_left_to_their_host(net: Net) {
    let syn = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(1));

    // Nothing serves: a frame for this node gets a reset, a flooded one none.
    let mut env = tcp_svc(net, 0, &[], &[]);
    assert_eq!(env.run(&syn, Hook::WireIngress).0.event, Event::Reset);
    let (o, out) = env.run_flooded(&syn, Hook::WireIngress);
    assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::OtherHost));
    assert_eq!(out, syn, "passed untouched, for the node's stack to drop");

    for policy in [SVC_F_LOCAL, 0] {
        // A pod on this node would answer a flooded SYN: it must not see it,
        // and no conntrack entry or SNAT port is taken for it.
        let mut env = tcp_svc(net, policy, &[1], &[]);
        env.maps.set_local_link(LocalKey { addr: net.pod(1) }, LINK);
        let (o, out) = env.run_flooded(&syn, Hook::WireIngress);
        assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::OtherHost));
        assert_eq!(out, syn);
        assert_eq!(env.maps.ct_len(), 0, "no conntrack for a flooded frame");

        // A flow of this node's stays this node's: its later segments
        // flooded elsewhere (the switch forgot the MAC) are not taken
        // over here, and replies are reverse-translated only when sent here.
        let (o, _) = env.run(&syn, Hook::WireIngress);
        assert_eq!(o.event, Event::NewFlow);
        let cts = env.maps.ct_len();
        let data = tcp(
            net,
            net.client(),
            40000,
            net.vip(),
            PORT,
            &seg(TCP_ACK, 2, 2, b"x"),
        );
        let (o, out) = env.run_flooded(&data, Hook::WireIngress);
        assert_eq!(
            (o.verdict, o.event, out),
            (Verdict::Pass, Event::OtherHost, data.clone())
        );
        assert_eq!(
            env.run(&data, Hook::WireIngress).0.event,
            Event::Established
        );
        assert_eq!(env.maps.ct_len(), cts);

        // At `FromPod` the same holds; `WireEgress` frames are the node's
        // own, never classified for another host.
        let reply_dst = if policy == SVC_F_LOCAL {
            net.client()
        } else {
            net.node()
        };
        let (_, fwd) = env.run(&syn, Hook::WireIngress);
        let reply = tcp(
            net,
            net.pod(1),
            TARGET,
            reply_dst,
            decode(&fwd).ports().0,
            &seg(TCP_SYN | TCP_ACK, 5, 2, b""),
        );
        let (o, out) = env.run_flooded(&reply, Hook::FromPod);
        assert_eq!(
            (o.verdict, o.event, out),
            (Verdict::Pass, Event::OtherHost, reply.clone())
        );
        assert_eq!(env.run(&reply, Hook::FromPod).0.event, Event::ReplyNat);
    }
}

#[test]
fn events_have_names() {
    let names: HashSet<_> = Event::ALL.iter().map(|e| e.name()).collect();
    assert_eq!(names.len(), Event::ALL.len());
    for (i, e) in Event::ALL.iter().enumerate() {
        assert_eq!(e.index(), i);
    }
}

/// A pod on this node, on a link of its own, next to pod 1 (on [`LINK`]).
const OTHER_LINK: LocalLink = LocalLink {
    ifindex: POD_LINK + 1,
    pod_mac: [0x02, 0x50, 0, 0, 0, 2],
    node_mac: [0x02, 0x4e, 0, 0, 0, 2],
};

// spec: P3
/// At `FromPod` a pod is believed only for its own addresses on its own
/// link. Another pod forging the endpoint's reply (its address and port,
/// to the node's SNAT port) is dropped, not delivered to the client, and
/// a forged reset does not close the flow; nor is anything it sends in the
/// name of a client, the node or a VIP passed on. Its own traffic, and
/// IPv6 link-local neighbour discovery, pass.
fn pods_speak_only_for_their_own_addresses(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    env.maps.set_local_link(LocalKey { addr: net.pod(1) }, LINK);
    env.maps
        .set_local_link(LocalKey { addr: net.pod(2) }, OTHER_LINK);
    let f = tcp(net, net.client(), 40000, net.vip(), PORT, &syn(100));
    let (_, out) = env.run(&f, Hook::WireIngress);
    let snat_port = decode(&out).ports().0;
    let cts = env.maps.ct_len();

    let evil = OTHER_LINK.ifindex;
    for flags in [
        TCP_RST,
        TCP_RST | TCP_ACK,
        TCP_FIN | TCP_ACK,
        TCP_SYN | TCP_ACK,
    ] {
        let forged = pod1_to_node(net, snat_port, &seg(flags, 5, 101, b""));
        let (o, out) = env.run_on(&forged, Hook::FromPod, evil);
        assert_eq!((o.verdict, o.event), (Verdict::Drop, Event::Spoofed));
        assert_eq!(out, forged, "left as it came");
    }
    assert_eq!(env.maps.ct_len(), cts);
    // The flow goes on as if nothing happened: the real handshake, then
    // data kept on the flow's endpoint.
    let reply = pod1_to_node(net, snat_port, &seg(TCP_SYN | TCP_ACK, 900, 101, b""));
    assert_eq!(env.run(&reply, Hook::FromPod).0.event, Event::ReplyNat);
    let ack = tcp(
        net,
        net.client(),
        40000,
        net.vip(),
        PORT,
        &seg(TCP_ACK, 101, 901, b"x"),
    );
    assert_eq!(env.run(&ack, Hook::WireIngress).0.event, Event::Established);

    // In the name of a client, the node, a VIP, or a pod of another link.
    for src in [net.client(), net.node(), net.vip(), net.pod(1), net.pod(3)] {
        let f = tcp(net, src, 1234, net.client(), 4321, &syn(1));
        let (o, _) = env.run_on(&f, Hook::FromPod, evil);
        assert_eq!((o.verdict, o.event), (Verdict::Drop, Event::Spoofed));
        let u = udp(net, src, 53, net.client(), 4321, b"forged");
        assert_eq!(env.run_on(&u, Hook::FromPod, evil).0.event, Event::Spoofed);
    }
    // Its own.
    let own = tcp(net, net.pod(2), 1234, net.client(), 4321, &syn(1));
    let (o, _) = env.run_on(&own, Hook::FromPod, evil);
    assert_eq!((o.verdict, o.event), (Verdict::Pass, Event::NotService));
    if net.v6 {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 2;
        let nd = udp(net, ll, 546, net.node(), 547, b"link-local");
        assert_ne!(env.run_on(&nd, Hook::FromPod, evil).0.event, Event::Spoofed);
    }
    // Not IP at all (ARP): the node's own business on that link.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&MAC_A);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    assert_eq!(env.run_on(&arp, Hook::FromPod, evil).0.event, Event::NotIp);
}

/// A connection through `PORT` from client port `cport`, handshake done:
/// the client's ISN 1, the endpoint's 100. The endpoint and SNAT port.
fn handshake(env: &mut common::Env, net: Net, cport: u16) -> (sluice_datapath::maps::Addr, u16) {
    let f = tcp(net, net.client(), cport, net.vip(), PORT, &syn(1));
    let d = decode(&env.run(&f, Hook::WireIngress).1);
    let (ep, snat) = (d.dst, d.ports().0);
    let sa = tcp(
        net,
        ep,
        TARGET,
        net.node(),
        snat,
        &seg(TCP_SYN | TCP_ACK, 100, 2, b""),
    );
    assert_eq!(env.run(&sa, Hook::WireIngress).0.event, Event::ReplyNat);
    let a = tcp(
        net,
        net.client(),
        cport,
        net.vip(),
        PORT,
        &seg(TCP_ACK, 2, 101, b"hi"),
    );
    assert_eq!(env.run(&a, Hook::WireIngress).0.event, Event::Established);
    (ep, snat)
}

// spec: P3, P6 (a blind spoofer's reset or FIN neither ends a live flow nor
// frees its SNAT port, nor makes the node answer for it; RFC 5961)
fn ct_forged_resets_and_fins_leave_the_flow(net: Net) {
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let (ep, snat) = handshake(&mut env, net, 40100);
    let client = |flags, seq, ack| {
        tcp(
            net,
            net.client(),
            40100,
            net.vip(),
            PORT,
            &seg(flags, seq, ack, b""),
        )
    };
    let server = |flags, seq, ack| {
        tcp(
            net,
            ep,
            TARGET,
            net.node(),
            snat,
            &seg(flags, seq, ack, b""),
        )
    };
    let forged = [
        // In the window but not where the endpoint expects it: passed for
        // the endpoint's challenge ACK, the flow untouched.
        (client(TCP_RST, 4_000, 0), Hook::WireIngress, Verdict::Pass),
        // Far outside: dropped.
        (
            client(TCP_RST, 0x8000_0000, 0),
            Hook::WireIngress,
            Verdict::Drop,
        ),
        (
            client(TCP_FIN | TCP_ACK, 0x4000_0000, 101),
            Hook::WireIngress,
            Verdict::Drop,
        ),
        // A FIN acknowledging data the endpoint never sent.
        (
            client(TCP_FIN | TCP_ACK, 4, 0x4000_0000),
            Hook::WireIngress,
            Verdict::Drop,
        ),
        (
            server(TCP_RST, 0x9000_0000, 0),
            Hook::WireIngress,
            Verdict::Drop,
        ),
        (
            server(TCP_RST | TCP_ACK, 0x1234_5678, 4),
            Hook::WireIngress,
            Verdict::Drop,
        ),
    ];
    for (f, hook, verdict) in forged {
        let (o, out) = env.run(&f, hook);
        assert_eq!(o.event, Event::CtInvalid, "{hook:?}");
        assert_eq!(o.verdict, verdict);
        // Never an answer of the node's own (P6 is for flows nothing serves).
        assert_ne!(decode(&out).ports().0, PORT, "answered for the flow");
        assert_eq!(
            pair_state(&env, net, 40100),
            (CT_STATE_ESTABLISHED, CT_STATE_ESTABLISHED)
        );
    }
    // A new flow may not take the live flow's port.
    let other = tcp(net, net.client_n(9), 40100, net.vip(), PORT, &syn(7));
    let d = decode(&env.run(&other, Hook::WireIngress).1);
    assert_ne!(d.ports().0, snat);
    // The reset the endpoint expects (its RCV.NXT, what the client sent
    // up to) ends the flow.
    assert_eq!(
        env.run(&client(TCP_RST, 4, 0), Hook::WireIngress).0.event,
        Event::Established
    );
    assert_eq!(
        pair_state(&env, net, 40100),
        (CT_STATE_CLOSED, CT_STATE_CLOSED)
    );
}

/// `HostMaps` with a packet held back: it runs, whole, the moment the first
/// packet has read its flow's entry and is about to write it. That is the
/// interleaving two CPUs produce when the client's packet and the
/// endpoint's are handled at once.
struct Racing<'a> {
    inner: &'a mut sluice_datapath::host::HostMaps,
    held: Option<(Vec<u8>, Hook)>,
    clock: sluice_datapath::host::TestClock,
}

impl sluice_datapath::env::Maps for Racing<'_> {
    fn node(&self) -> sluice_datapath::maps::NodeConfig {
        self.inner.node()
    }
    fn service(
        &self,
        k: &sluice_datapath::maps::ServiceKey,
    ) -> Option<sluice_datapath::maps::ServiceValue> {
        self.inner.service(k)
    }
    fn endpoint(&self, slot: u32) -> Option<sluice_datapath::maps::Endpoint> {
        self.inner.endpoint(slot)
    }
    fn maglev(&self, slot: u32) -> Option<u32> {
        self.inner.maglev(slot)
    }
    fn ct_get(&self, k: &CtKey) -> Option<sluice_datapath::maps::CtValue> {
        self.inner.ct_get(k)
    }
    fn ct_get_tracking<
        F: FnOnce(&sluice_datapath::maps::CtValue) -> Option<sluice_datapath::env::SeqTrack>,
    >(
        &mut self,
        k: &CtKey,
        out: &mut sluice_datapath::maps::CtValue,
        track: F,
    ) -> bool {
        self.inner.ct_get_tracking(k, out, track)
    }
    fn ct_write_half(&mut self, k: &CtKey, w: &sluice_datapath::env::CtWrite) -> Option<u8> {
        if let Some((frame, hook)) = self.held.take() {
            let mut p = sluice_datapath::host::VecPacket::new(frame).from_link(POD_LINK);
            let o = sluice_datapath::process(&mut p, &mut *self.inner, &mut self.clock, hook);
            assert_eq!(o.event, Event::ReplyNat, "the held packet");
        }
        self.inner.ct_write_half(k, w)
    }
    fn ct_put(&mut self, k: &CtKey, v: &sluice_datapath::maps::CtValue) -> bool {
        self.inner.ct_put(k, v)
    }
    fn ct_put_new(&mut self, k: &CtKey, v: &sluice_datapath::maps::CtValue) -> bool {
        self.inner.ct_put_new(k, v)
    }
    fn ct_delete(&mut self, k: &CtKey) {
        self.inner.ct_delete(k)
    }
    fn affinity_get(
        &self,
        k: &sluice_datapath::maps::AffinityKey,
    ) -> Option<sluice_datapath::maps::AffinityValue> {
        self.inner.affinity_get(k)
    }
    fn affinity_put(
        &mut self,
        k: &sluice_datapath::maps::AffinityKey,
        v: &sluice_datapath::maps::AffinityValue,
    ) {
        self.inner.affinity_put(k, v)
    }
    fn local_link(&self, k: &LocalKey) -> Option<LocalLink> {
        self.inner.local_link(k)
    }
    fn snat_exhausted(&mut self, k: &sluice_datapath::maps::SnatExhaustKey) {
        self.inner.snat_exhausted(k)
    }
}

// spec: P3 (the SNAT port stays held for the endpoint's TIME_WAIT: the
// client's FIN and timestamp must survive the endpoint's FIN updating the
// same flow at the same moment)
fn ct_both_sides_closing_at_once_lose_nothing(net: Net) {
    use sluice_datapath::env::Maps;
    let mut env = tcp_svc(net, 0, &[1], &[]);
    let (ep, snat) = handshake(&mut env, net, 40200);
    // The FINs cross: the client's (timestamp 777) on one CPU, the
    // endpoint's on the other.
    let fin = tcp(
        net,
        net.client(),
        40200,
        net.vip(),
        PORT,
        &seg(TCP_FIN | TCP_ACK, 4, 101, b"").with_ts(777),
    );
    let their_fin = tcp(
        net,
        ep,
        TARGET,
        net.node(),
        snat,
        &seg(TCP_FIN | TCP_ACK, 101, 4, b""),
    );
    let mut racing = Racing {
        inner: &mut env.maps,
        held: Some((their_fin, Hook::WireIngress)),
        clock: env.clock.clone(),
    };
    let mut p = sluice_datapath::host::VecPacket::new(fin).from_link(POD_LINK);
    let o = sluice_datapath::process(
        &mut p,
        &mut racing,
        &mut env.clock.clone(),
        Hook::WireIngress,
    );
    assert_eq!(o.event, Event::Established);
    assert!(racing.held.is_none(), "the endpoint's FIN ran in between");
    let fv = env
        .maps
        .ct_get(&fwd_key(net, 40200))
        .expect("forward entry");
    let rk = reply_key(&fv);
    let rv = env.maps.ct_get(&rk).expect("reply entry");
    for v in [fv, rv] {
        let (state, flags) = merged(&v);
        assert_eq!(state, CT_STATE_CLOSING);
        assert_eq!(
            flags & (CT_F_FIN_FORWARD | CT_F_FIN_REPLY),
            CT_F_FIN_FORWARD | CT_F_FIN_REPLY
        );
        assert_eq!(v.close_tsval, 777, "the client's FIN timestamp");
        assert_eq!(v.close_seq, 5);
    }
}
