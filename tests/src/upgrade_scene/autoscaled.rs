//! Autoscaled blue-green (A1–A4) under traffic: the pool autoscaled and
//! set to blue-green with an `autoscaledRolloutPolicy` whose wait is
//! seconds, then upgraded: green starts empty, blue is cordoned, the wait
//! (the controller killed -9 during it), then blue drained and deleted
//! while green grows for the pods that leave it. The clients' counts are
//! split at each phase change.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::Result;

use super::{OpView, Report, Scene};
use crate::kube_cluster::KubeCluster;

/// The phases of an autoscaled blue-green upgrade, in order.
const PHASES: [&str; 5] = [
    "CREATING_GREEN_POOL",
    "CORDONING_BLUE_POOL",
    "WAITING_TO_DRAIN_BLUE_POOL",
    "DRAINING_BLUE_POOL",
    "DELETING_BLUE_POOL",
];

impl Scene {
    /// One autoscaled blue-green upgrade to `versions[0]`; the checks and
    /// figures. The pool is left autoscaled.
    pub fn run_autoscaled_blue_green(&self, c: &mut KubeCluster) -> Result<Report> {
        let mut report = Report::default();
        self.settle(c)?;
        let v = &self.versions[0];
        println!(
            "==> the pool autoscaled (1 to 4 nodes a zone) and set to autoscaled blue-green with a 5 s wait; upgraded to {v}"
        );
        c.kubectl(&[
            "patch",
            "nodepool",
            &self.pool,
            "--type=merge",
            "-p",
            r#"{"spec":{"autoscaling":{"enabled":true,"minNodeCount":1,"maxNodeCount":4}}}"#,
        ])?;
        self.update(
            c,
            &[
                "--enable-blue-green-upgrade",
                "--autoscaled-rollout-policy=wait-for-drain-duration=5s",
            ],
        )?;
        let blue = self.names(c)?;
        let t = Instant::now();
        let op = self.start_with(c, v, &[])?;
        // spec: A1 — green is created empty: nothing new until the wait.
        let (_, waiting) = self.follow(
            c,
            &mut report,
            &op,
            "autoscaled",
            |o| o.is_final() || o.phase == "WAITING_TO_DRAIN_BLUE_POOL",
            None,
        )?;
        let early = self.node_states(c)?;
        let green_then = early.iter().filter(|n| n.version == *v).count();
        let cordoned = early
            .iter()
            .filter(|n| blue.contains(&n.name) && n.cordoned)
            .count();
        report.check(
            !waiting.is_final() && green_then == 0 && cordoned == blue.len(),
            format!(
                "{op} waits to drain with {green_then} green node(s) and {cordoned} of {} blue cordoned",
                blue.len()
            ),
        );
        // Killed -9 during the wait: the restarted controller keeps the
        // wait's end and goes on.
        let during: &dyn Fn(&OpView) -> bool = &|o| o.phase == "WAITING_TO_DRAIN_BLUE_POOL";
        let (phases, end) = self.follow(
            c,
            &mut report,
            &op,
            "autoscaled",
            OpView::is_final,
            Some(during),
        )?;
        let in_order = super::in_order(&phases, &PHASES);
        report.check(
            end.state == "DONE" && in_order && !phases.iter().any(|p| p == "NODE_POOL_SOAKING"),
            format!(
                "{op} {} after {:.1} s through {}",
                end.state,
                t.elapsed().as_secs_f64(),
                phases.join(" → ")
            ),
        );
        // spec: A2 — blue is gone; green holds the pool, on the new version.
        let green = c.wait_for(&format!("only Ready nodes on {v}"), self.wait, || {
            let n = self.node_states(c).ok()?;
            (n.len() >= 2 && n.iter().all(|n| n.ready && n.version == *v)).then_some(n)
        });
        let names: BTreeSet<String> = green
            .as_ref()
            .map(|n| n.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        report.check(
            green.is_ok() && names.is_disjoint(&blue),
            format!(
                "green grew from zero to {} node(s) on {v}, blue is gone: {}",
                names.len(),
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
        println!("==> sluice operations describe {op}");
        match self.sluice(c, &["operations", "describe", &op]) {
            Ok(out) => out.lines().for_each(|l| println!("    {l}")),
            Err(e) => println!("    ({e})"),
        }
        let pool_v = self.pool_version(c);
        report.check(pool_v == *v, format!("the pool's spec.version is {pool_v}"));
        self.clean(c, &mut report, "after the autoscaled blue-green upgrade")?;
        Ok(report)
    }
}
