//! The lab's careless-write part: node-1's state file is emptied, then given
//! a type error, then removed, while a client loops over the `Local` VIP
//! through node-1. Each version is refused, naming what is wrong, and
//! node-1 keeps serving and keeps telling the load balancer the truth.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use sluice_tests::{http_get, Cluster, Family, Traffic};

use super::health::{LOCAL_HC_PORT, LOCAL_SERVICE};

/// How long each bad version stays in place while the client loops.
const HOLD: Duration = Duration::from_millis(1500);
const BOUND: Duration = Duration::from_secs(20);

fn local_check(c: &Cluster) -> String {
    let addr = SocketAddr::new(Family::V4.node_ip(1), LOCAL_HC_PORT);
    match http_get(c.client_ns(), addr, "/") {
        Ok(a) => {
            let n = a
                .json()
                .ok()
                .and_then(|j| j["localEndpoints"].as_u64())
                .map_or("?".to_string(), |n| n.to_string());
            format!("Local {} localEndpoints={n}", a.status)
        }
        Err(e) => format!("no answer ({e})"),
    }
}

/// Run the part; the number of failed checks.
pub fn demo(c: &mut Cluster) -> Result<usize> {
    println!(
        "==> careless writes to node-1's state file while a client loops over {LOCAL_SERVICE} via node-1"
    );
    println!("  (each refused whole; the Local check and the VIP keep answering)");
    c.route_vips_via(1)?;
    let good = c.manifests(1)?;
    let healthy = local_check(c);
    let vip = c.vip(LOCAL_SERVICE, Family::V4, 80)?;
    let traffic = Traffic::start(c.client_ns(), vip);
    let type_error = format!(
        "{good}---\napiVersion: v1\nkind: Service\nmetadata: {{name: typo}}\nspec: {{ports: [{{port: eighty}}]}}\n"
    );
    let cases: [(&str, Option<&str>, &str); 3] = [
        ("emptied", Some(""), "no manifests"),
        ("a type error", Some(&type_error), "expected an integer"),
        ("removed", None, "No such file"),
    ];
    let mut failures = 0;
    for (what, text, want) in cases {
        c.write_state_raw(1, text)?;
        let (refused, error) = match c.wait_rejected(1, want, BOUND) {
            Ok(st) => (true, st.error.unwrap_or_default()),
            Err(e) => (false, format!("{e:#}")),
        };
        std::thread::sleep(HOLD);
        let check = local_check(c);
        let ok = refused && check == healthy;
        failures += usize::from(!ok);
        // The message without the file's path, cut to a line.
        let error = error
            .split_once(".yaml: ")
            .map_or(error.as_str(), |(_, m)| m);
        let error: String = match error.char_indices().nth(72) {
            Some((i, _)) => format!("{}...", &error[..i]),
            None => error.to_string(),
        };
        println!(
            "  {what:<13} {check:<22} {}  refused: {error}",
            if ok { "ok" } else { "FAIL" }
        );
        c.write_state_raw(1, Some(&good))?;
    }
    let (answered, failed, errors) = traffic.finish();
    let ok = failed == 0 && answered > 0;
    failures += usize::from(!ok);
    println!(
        "  client: {answered} connections answered, {failed} failed{}  {}",
        errors
            .first()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default(),
        if ok { "ok" } else { "FAIL" }
    );
    println!("  a version is taken only whole; write a new one and rename it into place.");
    println!();
    Ok(failures)
}
