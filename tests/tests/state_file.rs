//! The agent's state file under careless and hostile writes, end to end
//! (issue 8): a client loops over the VIP while the file is emptied, half
//! written, given wrong types or absurd nesting, and removed. Not one
//! connection may fail, and the `Local` check keeps telling the truth,
//! under both engines.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use sluice_tests::{
    http_get, node_name, Cluster, ClusterSpec, EndpointSpec, Engine, Family, Policy, ServiceSpec,
    Traffic,
};

const HC_PORT: u16 = 30_125;
/// Rejections show in the status file within a poll or two; this bound is
/// only for a loaded machine.
const REJECT_BOUND: Duration = Duration::from_secs(20);
/// How long each bad version stays in place while the client loops.
const HOLD: Duration = Duration::from_millis(1500);

fn local_check(c: &Cluster) -> (u16, Option<u64>) {
    let addr = SocketAddr::new(Family::V4.node_ip(1), HC_PORT);
    match http_get(c.client_ns(), addr, "/") {
        Ok(a) => {
            let n = a.json().ok().and_then(|j| j["localEndpoints"].as_u64());
            (a.status, n)
        }
        Err(e) => panic!("probing {addr}: {e:#}\n{}", c.agent_log(1)),
    }
}

fn bad_files_change_nothing(engine: Engine) {
    // spec: H1, H3, P2 — the running state (pods, maps, health answers) is
    // kept while the file holds something the agent must refuse.
    let tag = match engine {
        Engine::Emulated => "bfe",
        Engine::Kernel => "bfk",
        Engine::Auto => "bfa",
    };
    let mut c = Cluster::start(
        tag,
        engine,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(
                ServiceSpec::lb("web", 1)
                    .policy(Policy::Local)
                    .tcp("http", 80, 8080)
                    .health_check_node_port(HC_PORT)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            .via(1),
    )
    .expect("cluster");
    assert_eq!(local_check(&c), (200, Some(1)));
    let good = c.manifests(1).expect("manifests");
    let generation = c.agent_status(1).expect("status").generation;
    let vip = c.vip("web", Family::V4, 80).expect("vip");
    let traffic = Traffic::start(c.client_ns(), vip);

    let bad_type = format!(
        "{good}---\napiVersion: v1\nkind: Service\nmetadata: {{name: bad}}\nspec: {{ports: [{{port: eighty}}]}}\n"
    );
    let deep = format!(
        "{good}---\nkind: Service\nx: {}{}\n",
        "[".repeat(160_000),
        "]".repeat(160_000)
    );
    let cases: [(&str, Option<&str>, &str); 4] = [
        ("empty", Some(""), "no manifests"),
        (
            "wrong type",
            Some(&bad_type),
            "Service default/bad: spec.ports[0].port: expected an integer, got \"eighty\"",
        ),
        ("deeply nested", Some(&deep), "nested more than 100 levels"),
        ("vanished", None, "No such file"),
    ];
    for (what, text, want) in cases {
        c.write_state_raw(1, text).expect("write");
        let st = c
            .wait_rejected(1, want, REJECT_BOUND)
            .unwrap_or_else(|e| panic!("{what}: {e:#}\n{}", c.agent_log(1)));
        std::thread::sleep(HOLD);
        assert_eq!(st.generation, generation, "{what}: nothing applied");
        assert_eq!(st.pods, 1, "{what}: the pod stays plugged");
        assert_eq!(local_check(&c), (200, Some(1)), "{what}");
        // The good file back: the agent takes it (same content as what it
        // runs, so nothing changes but the error clears).
        c.write_state_raw(1, Some(&good)).expect("restore");
        wait_clear(&c, what);
    }

    // Half written: the file is truncated and the first half written, then
    // the writer pauses before the rest. A valid prefix (the Node alone)
    // would unplug the pod if read; the open write is waited for.
    let path = c.dir().join(format!("{}.yaml", node_name(1)));
    if path.exists() {
        let mut f = std::fs::File::create(&path).expect("open");
        let cut = good.find("kind: Service").unwrap_or(good.len() / 2);
        f.write_all(&good.as_bytes()[..cut]).expect("write");
        f.flush().expect("flush");
        std::thread::sleep(HOLD);
        let st = c.agent_status(1).expect("status");
        assert!(st.error.is_none(), "half a file was read: {st:?}");
        assert_eq!(st.generation, generation, "half a file was applied");
        f.write_all(&good.as_bytes()[cut..]).expect("write");
    } else {
        panic!("state file not at {}", path.display());
    }
    std::thread::sleep(HOLD);
    assert_eq!(local_check(&c), (200, Some(1)));

    let (ok, failed, errors) = traffic.finish();
    assert_eq!(
        failed,
        0,
        "connections failed while the file was bad: {errors:?}\n{}",
        c.agent_log(1)
    );
    assert!(ok > 50, "the client looped ({ok} answers)");
}

fn wait_clear(c: &Cluster, what: &str) {
    for _ in 0..(REJECT_BOUND.as_millis() / 50) {
        if c.agent_status(1).is_some_and(|s| s.error.is_none()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{what}: the good file was not taken back\n{}",
        c.agent_log(1)
    );
}

mod emulated {
    #[test]
    fn bad_files_change_nothing() {
        crate::bad_files_change_nothing(crate::Engine::Emulated)
    }
}

mod kernel {
    #[test]
    fn bad_files_change_nothing() {
        crate::bad_files_change_nothing(crate::Engine::Kernel)
    }
}
