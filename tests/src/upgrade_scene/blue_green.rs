//! The blue-green phases (B1–B6) under traffic: the pool set to
//! blue-green with `sluice node-pools update`, then
//! 1. an upgrade through every phase with short soaks, the controller
//!    killed -9 between its batches;
//! 2. one rolled back in the drain phase, after its first batch;
//! 3. one completed with `complete-upgrade` during a long soak.
//!
//! The clients' counts are split at each phase change, so every phase
//! has its own requests served and failed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::{record_traffic, warned_local, Loops, OpView, Report, Scene};
use crate::kube_cluster::KubeCluster;

/// The phases of a blue-green upgrade, in order.
const PHASES: [&str; 5] = [
    "CREATING_GREEN_POOL",
    "CORDONING_BLUE_POOL",
    "DRAINING_BLUE_POOL",
    "NODE_POOL_SOAKING",
    "DELETING_BLUE_POOL",
];

impl Scene {
    /// The three blue-green upgrades, to `versions[0]`, then
    /// `versions[1]` (rolled back), then `versions[1]` again (completed
    /// early); the checks and figures.
    pub fn run_blue_green(&self, c: &mut KubeCluster) -> Result<Report> {
        let mut report = Report::default();
        self.settle(c)?;
        self.through_every_phase(c, &mut report)?;
        self.settle(c)?;
        self.rolled_back_while_draining(c, &mut report)?;
        self.settle(c)?;
        self.completed_during_the_soak(c, &mut report)?;
        Ok(report)
    }

    pub(super) fn update(&self, c: &KubeCluster, flags: &[&str]) -> Result<String> {
        let mut args = vec!["node-pools", "update", &self.pool];
        args.extend_from_slice(flags);
        let out = self.sluice(c, &args)?;
        println!("    {}", out.trim());
        Ok(out)
    }

    pub(super) fn names(&self, c: &KubeCluster) -> Result<BTreeSet<String>> {
        Ok(self.node_states(c)?.into_iter().map(|n| n.name).collect())
    }

    /// Follows `op` until `until` holds, the clients' counts cut at every
    /// phase change into figures labelled `label: PHASE`; the phases seen,
    /// in order, and the operation as last read. Each phase may last at
    /// most the scene's wait.
    ///
    /// With `crash`, the controller is killed -9 and started again the
    /// first time the operation matches it, the clients looping on.
    pub(super) fn follow(
        &self,
        c: &mut KubeCluster,
        report: &mut Report,
        op: &str,
        label: &str,
        until: impl Fn(&OpView) -> bool,
        crash: Option<&dyn Fn(&OpView) -> bool>,
    ) -> Result<(Vec<String>, OpView)> {
        let mut seen: Vec<String> = Vec::new();
        let mut loops = Loops::start(c);
        let mut since = Instant::now();
        let mut current = String::new();
        let mut said: Vec<String> = Vec::new();
        let mut crashed = false;
        // The Local Services the operation warned about in this phase.
        let mut warned = BTreeSet::new();
        loop {
            let view = self.op(c, op)?;
            warned.extend(warned_local(&view.warnings));
            if !crashed && !view.is_final() && crash.is_some_and(|f| f(&view)) {
                crashed = true;
                let t = Instant::now();
                c.crash_and_restart_controller()?;
                println!(
                    "    {op}: {} ({}): the controller killed -9 and serving again after {:.1} s",
                    view.phase,
                    view.message,
                    t.elapsed().as_secs_f64()
                );
                continue;
            }
            // What holds the upgrade, each time it changes: where a phase's
            // time goes.
            if view.blocking != said {
                for b in &view.blocking {
                    println!("      {b}");
                }
                said = view.blocking.clone();
            }
            let phase = if view.phase.is_empty() {
                "UPDATE_STARTED".to_owned()
            } else {
                view.phase.clone()
            };
            let stop = until(&view);
            if phase != current || stop {
                if !current.is_empty() {
                    let ended = std::mem::replace(&mut loops, Loops::start(c));
                    let phase = format!("{label}: {current}");
                    record_traffic(report, &phase, ended, since.elapsed(), 0, &warned, false);
                    since = Instant::now();
                    warned.clear();
                }
                if seen.last() != Some(&phase) {
                    println!("    {op}: {phase} ({})", view.message);
                    seen.push(phase.clone());
                }
                current = phase;
            }
            if stop {
                // The loops started for the next segment are dropped unused.
                let _ = loops.finish();
                return Ok((seen, view));
            }
            if since.elapsed() > self.wait {
                let _ = loops.finish();
                return Err(anyhow!(
                    "operation {op}: {current} lasted over {:?} ({})",
                    self.wait,
                    view.message
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Upgrade 1. spec: B1, B2, B3, B4, B5 — every phase in order, green
    /// alone at the end.
    fn through_every_phase(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let v = &self.versions[0];
        println!(
            "==> sluice node-pools update {} --enable-blue-green-upgrade, batches of 2 soaked 2 s, the pool soaked 4 s; upgraded to {v}",
            self.pool
        );
        self.update(
            c,
            &[
                "--enable-blue-green-upgrade",
                "--standard-rollout-policy=batch-node-count=2,batch-soak-duration=2s",
                "--node-pool-soak-duration=4s",
            ],
        )?;
        let blue = self.names(c)?;
        let t = Instant::now();
        let op = self.start_with(c, v, &[])?;
        // Killed -9 between the batches: the restarted controller must
        // carry on from the API's state (batches, soak, cordons).
        let between: &dyn Fn(&OpView) -> bool =
            &|o| o.phase == "DRAINING_BLUE_POOL" && o.batches_drained >= 1;
        let (phases, end) = self.follow(
            c,
            report,
            &op,
            "blue-green",
            OpView::is_final,
            Some(between),
        )?;
        // A phase of one pass (the cordons) may fall between two reads;
        // under load a read takes seconds, and green's creation (seconds
        // too) may also be missed: the order is checked, and the phases
        // that wait on purpose must show.
        let must = ["DRAINING_BLUE_POOL", "NODE_POOL_SOAKING"];
        let in_order =
            must.iter().all(|p| phases.iter().any(|s| s == p)) && super::in_order(&phases, &PHASES);
        report.check(
            end.state == "DONE" && in_order,
            format!(
                "{op} {} after {:.1} s through {}",
                end.state,
                t.elapsed().as_secs_f64(),
                phases.join(" → ")
            ),
        );
        let green = self.all_on(c, v);
        let names: BTreeSet<String> = green
            .as_ref()
            .map(|n| n.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        report.check(
            green.is_ok() && names.is_disjoint(&blue),
            format!(
                "only green is left, {} nodes on {v}: {}",
                names.len(),
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
        let pool_v = self.pool_version(c);
        report.check(pool_v == *v, format!("the pool's spec.version is {pool_v}"));
        self.clean(c, report, "after the blue-green upgrade")?;
        Ok(())
    }

    /// Upgrade 2. spec: B6 — rolled back in the drain phase: blue serves
    /// again, green is gone.
    fn rolled_back_while_draining(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let (back, v) = (&self.versions[0], &self.versions[1]);
        println!(
            "==> an upgrade to {v} with an hour's soak after each batch of 2, rolled back after its first batch (sluice node-pools rollback --respect-pdb)"
        );
        self.update(
            c,
            &["--standard-rollout-policy=batch-node-count=2,batch-soak-duration=3600s"],
        )?;
        let blue = self.names(c)?;
        let t = Instant::now();
        let op = self.start_with(c, v, &[])?;
        let (_, first) = self.follow(
            c,
            report,
            &op,
            "rollback",
            |o| o.is_final() || (o.phase == "DRAINING_BLUE_POOL" && o.batches_drained >= 1),
            None,
        )?;
        if first.is_final() {
            return Err(anyhow!(
                "{op} ended ({}) before it could be rolled back",
                first.state
            ));
        }
        let out = self.sluice(c, &["node-pools", "rollback", &self.pool, "--respect-pdb"])?;
        println!("    {}", out.trim());
        // Killed -9 as the rollback runs: blue must end uncordoned and
        // green gone, not half made.
        let rolling: &dyn Fn(&OpView) -> bool = &|o| o.phase == "ROLLBACK_STARTED";
        let (phases, end) =
            self.follow(c, report, &op, "rollback", OpView::is_final, Some(rolling))?;
        report.check(
            end.state == "ROLLED_BACK" && phases.iter().any(|p| p == "ROLLBACK_STARTED"),
            format!(
                "{op} {} after {:.1} s ({})",
                end.state,
                t.elapsed().as_secs_f64(),
                end.message
            ),
        );
        let after = self.all_on(c, back);
        let names: BTreeSet<String> = after
            .as_ref()
            .map(|n| n.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        report.check(
            after.is_ok() && names == blue,
            format!(
                "blue serves again, green is gone: {}",
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
        self.clean(c, report, "after the blue-green rollback")?;
        Ok(())
    }

    /// Upgrade 3. spec: B4 — `complete-upgrade` ends a long soak at once.
    fn completed_during_the_soak(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let v = &self.versions[1];
        println!(
            "==> an upgrade to {v} in batches of 2 with an hour's soak, completed early (sluice node-pools complete-upgrade)"
        );
        self.update(
            c,
            &[
                "--standard-rollout-policy=batch-node-count=2,batch-soak-duration=0s",
                "--node-pool-soak-duration=3600s",
            ],
        )?;
        let t = Instant::now();
        let op = self.start_with(c, v, &[])?;
        let (_, soaking) = self.follow(
            c,
            report,
            &op,
            "complete",
            |o| o.is_final() || o.phase == "NODE_POOL_SOAKING",
            None,
        )?;
        if soaking.is_final() {
            return Err(anyhow!("{op} ended ({}) before its soak", soaking.state));
        }
        let out = self.sluice(c, &["node-pools", "complete-upgrade", &self.pool])?;
        println!("    {}", out.trim());
        let soak_ended = Instant::now();
        let (_, end) = self.follow(c, report, &op, "complete", OpView::is_final, None)?;
        report.check(
            end.state == "DONE",
            format!(
                "{op} {} {:.1} s after complete-upgrade, {:.1} s in all, of an hour's soak",
                end.state,
                soak_ended.elapsed().as_secs_f64(),
                t.elapsed().as_secs_f64()
            ),
        );
        let after = self.all_on(c, v);
        report.check(after.is_ok(), format!("every node on {v}"));
        self.clean(c, report, "after the completed upgrade")?;
        Ok(())
    }
}
