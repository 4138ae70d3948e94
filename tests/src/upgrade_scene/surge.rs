//! The surge phases (U1–U6): an upgrade with the controller killed -9
//! halfway, one cancelled and resumed, one rolled back.

use std::collections::BTreeSet;

use anyhow::{bail, Result};

use super::{OpView, Report, Scene};
use crate::kube_cluster::KubeCluster;

impl Scene {
    /// The whole scene; the checks and figures. An `Err` is a step that
    /// could not run at all (a command refused, a wait out of time before
    /// the phase could start).
    pub fn run(&self, c: &mut KubeCluster) -> Result<Report> {
        let mut report = Report::default();
        self.settle(c)?;
        self.upgrade_with_a_crash(c, &mut report)?;
        self.settle(c)?;
        self.cancel_and_resume(c, &mut report)?;
        self.settle(c)?;
        self.roll_back(c, &mut report)?;
        Ok(report)
    }

    /// Phase 1. spec: U1, U2, U3 (a surge upgrade, one zone at a time);
    /// the controller survives `kill -9` mid-upgrade.
    fn upgrade_with_a_crash(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let v = &self.versions[0];
        let before: BTreeSet<String> = self.node_states(c)?.into_iter().map(|n| n.name).collect();
        println!(
            "==> sluice node-pools upgrade {} --version {v} --max-surge 1 --max-unavailable 0, clients looping over web and web-local; the controller killed -9 halfway",
            self.pool
        );
        let (loops, t, op, half) =
            self.begin(c, v, self.nodes.div_ceil(2), "half the nodes upgraded")?;
        println!(
            "    {op}: {} of {} upgraded after {:.1} s ({}); kill -9 the controller, start it again",
            half.upgraded,
            half.total,
            t.elapsed().as_secs_f64(),
            half.message
        );
        let killed = t.elapsed();
        c.crash_and_restart_controller()?;
        println!(
            "    the controller killed at {:.1} s and serving again at {:.1} s",
            killed.as_secs_f64(),
            t.elapsed().as_secs_f64()
        );
        let done = self.wait_op(c, &op, "finished", OpView::is_final)?;
        let took = t.elapsed();
        report.check(
            done.state == "DONE" && done.upgraded == self.nodes,
            format!(
                "{op} {} after {:.1} s: {} of {} nodes upgraded, the restarted controller carried it on ({})",
                done.state,
                took.as_secs_f64(),
                done.upgraded,
                done.total,
                done.message
            ),
        );
        let after = self.all_on(c, v);
        let names: BTreeSet<String> = after
            .as_ref()
            .map(|n| n.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        report.check(
            after.is_ok() && names.is_disjoint(&before),
            format!(
                "every node replaced by a new one on {v}: {}",
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
        let pool_v = self.pool_version(c);
        report.check(
            pool_v == *v,
            format!("the pool's spec.version moved with its nodes: {pool_v}"),
        );
        self.clean(c, report, "after the upgrade")?;
        self.traffic(
            report,
            "the upgrade and the controller's crash",
            loops,
            took,
            self.nodes,
        );
        Ok(())
    }

    /// Phase 2. spec: U6 — cancel lets started nodes finish and leaves the
    /// others (two versions); resume upgrades the rest.
    fn cancel_and_resume(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let (from, v) = (&self.versions[0], &self.versions[1]);
        println!(
            "==> sluice node-pools upgrade {} --version {v}, cancelled halfway (sluice operations cancel), then resumed (sluice upgrade resume)",
            self.pool
        );
        let (loops, t, op, half) =
            self.begin(c, v, self.nodes.div_ceil(2), "half the nodes upgraded")?;
        let out = self.sluice(c, &["operations", "cancel", &op])?;
        println!(
            "    {} of {} upgraded after {:.1} s: {}",
            half.upgraded,
            half.total,
            t.elapsed().as_secs_f64(),
            out.trim()
        );
        let cancelled = self.wait_op(c, &op, "cancelled", OpView::is_final)?;
        // The cancelled operation's nodes: those started finished, the
        // others stay; the deleted ones' Nodes go a moment after.
        let split = c.wait_for("the cancelled pool settled", self.wait, || {
            let (by, left) = self.versions(c).ok()?;
            let total: usize = by.values().sum();
            (total == self.nodes && left.is_empty()).then_some(by)
        });
        let by = split.as_ref().cloned().unwrap_or_default();
        report.check(
            cancelled.state == "CANCELLED"
                && by.get(v).is_some_and(|n| *n > 0)
                && by.get(from).is_some_and(|n| *n > 0),
            format!(
                "{op} {} with {} of {} upgraded: the pool runs two versions {by:?} ({})",
                cancelled.state, cancelled.upgraded, cancelled.total, cancelled.message
            ),
        );
        self.clean(c, report, "after the cancel")?;
        let out = self.sluice(c, &["upgrade", "resume", &self.pool])?;
        println!("    {}", out.trim());
        let done = self.wait_op(c, &op, "done after the resume", |o| {
            o.state == "DONE" || o.state == "FAILED"
        })?;
        let took = t.elapsed();
        let after = self.all_on(c, v);
        report.check(
            done.state == "DONE" && after.is_ok(),
            format!(
                "resumed, {op} {}: every node on {v} after {:.1} s in all",
                done.state,
                took.as_secs_f64()
            ),
        );
        self.clean(c, report, "after the resume")?;
        self.traffic(
            report,
            "the cancelled and resumed upgrade",
            loops,
            took,
            self.nodes,
        );
        Ok(())
    }

    /// Phase 3. spec: U6 — rollback restores the upgraded nodes.
    fn roll_back(&self, c: &mut KubeCluster, report: &mut Report) -> Result<()> {
        let (back, v) = (&self.versions[1], &self.versions[2]);
        println!(
            "==> sluice node-pools upgrade {} --version {v}, rolled back after its first node (sluice node-pools rollback)",
            self.pool
        );
        let (loops, t, op, first) = self.begin(c, v, 1, "a node upgraded")?;
        if first.is_final() {
            bail!(
                "{op} ended ({}) before it could be rolled back",
                first.state
            );
        }
        let out = self.sluice(c, &["node-pools", "rollback", &self.pool])?;
        println!(
            "    {} of {} upgraded after {:.1} s: {}",
            first.upgraded,
            first.total,
            t.elapsed().as_secs_f64(),
            out.trim()
        );
        let end = self.wait_op(c, &op, "rolled back", OpView::is_final)?;
        let took = t.elapsed();
        let after = self.all_on(c, back);
        report.check(
            end.state == "ROLLED_BACK" && after.is_ok(),
            format!(
                "{op} {} after {:.1} s: every node back on {back} ({})",
                end.state,
                took.as_secs_f64(),
                end.message
            ),
        );
        let pool_v = self.pool_version(c);
        report.check(
            pool_v == *back,
            format!("the pool's spec.version stayed {back}: {pool_v}"),
        );
        self.clean(c, report, "after the rollback")?;
        // Nodes made: the upgraded ones, then as many again back.
        self.traffic(
            report,
            "the rolled-back upgrade",
            loops,
            took,
            first.upgraded.max(1) * 2,
        );
        Ok(())
    }
}
