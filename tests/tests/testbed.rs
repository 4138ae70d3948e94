//! The test bed itself, without any agent: namespaces, veths, the who-am-I
//! server and the clients, against plain kernel networking. If these fail,
//! the end-to-end tests cannot mean anything.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use sluice_tests::{tcp_request, udp_request, Family, Netns, TcpOutcome, UdpOutcome, WhoAmI};

fn pair(f: Family) -> (Netns, Netns, IpAddr, IpAddr) {
    let a = Netns::new("tba").expect("netns a");
    let b = Netns::new("tbb").expect("netns b");
    a.veth_to("eth0", &b, "eth0").expect("veth");
    let (ia, ib, plen): (IpAddr, IpAddr, u8) = match f {
        Family::V4 => (
            "198.18.0.2".parse().expect("ip"),
            "198.18.0.3".parse().expect("ip"),
            24,
        ),
        Family::V6 => (
            "fd00:18::2".parse().expect("ip"),
            "fd00:18::3".parse().expect("ip"),
            64,
        ),
    };
    a.addr_add("eth0", &format!("{ia}/{plen}")).expect("addr a");
    b.addr_add("eth0", &format!("{ib}/{plen}")).expect("addr b");
    (a, b, ia, ib)
}

fn talk(f: Family) {
    let (a, b, ia, ib) = pair(f);
    let _srv = WhoAmI::start(b.name(), "srv", &[ib], &[8080], &[5353]).expect("server");
    let out = tcp_request(a.name(), SocketAddr::new(ib, 8080)).expect("client");
    let (reply, peer) = out.reply().expect("answer");
    assert_eq!(reply.pod, "srv");
    assert_eq!(reply.peer.ip(), ia);
    assert_eq!(reply.local, SocketAddr::new(ib, 8080));
    assert_eq!(peer, SocketAddr::new(ib, 8080));

    let out = tcp_request(a.name(), SocketAddr::new(ib, 9)).expect("client");
    assert!(matches!(out, TcpOutcome::Refused), "closed port: {out:?}");

    match udp_request(a.name(), SocketAddr::new(ib, 5353), 3).expect("client") {
        UdpOutcome::Reply { reply, .. } => {
            assert_eq!(reply.pod, "srv");
            assert_eq!(reply.peer.ip(), ia);
        }
        other => panic!("udp: {other:?}"),
    }
    let out = udp_request(a.name(), SocketAddr::new(ib, 9), 3).expect("client");
    assert!(
        matches!(out, UdpOutcome::Refused),
        "closed UDP port: {out:?}"
    );

    let out = tcp_request(a.name(), SocketAddr::new(ia, 8080)).expect("client");
    assert!(
        matches!(out, TcpOutcome::Refused),
        "own closed port: {out:?}"
    );

    let names = [a.name().to_string(), b.name().to_string()];
    drop(a);
    drop(b);
    for n in names {
        assert!(
            !Path::new(&format!("/run/netns/{n}")).exists(),
            "{n} removed"
        );
    }
}

#[test]
fn testbed_talks_v4() {
    talk(Family::V4);
}

#[test]
fn testbed_talks_v6() {
    talk(Family::V6);
}

#[test]
fn sysctl_is_per_namespace() {
    let a = Netns::new("tbs").expect("netns");
    a.sysctl("net.ipv4.ip_forward", "1").expect("sysctl");
    let v = a
        .exec(&["cat", "/proc/sys/net/ipv4/ip_forward"])
        .expect("read");
    assert_eq!(v.trim(), "1");
}
