//! `sluice node-pools upgrade|update|rollback|complete-upgrade`, worded
//! like `gcloud container node-pools`: a manual upgrade is an `Operation`
//! the controller runs (U1–U7, B1–B7); `update` sets the pool's upgrade
//! strategy; a rollback or a completion is that operation's `spec.action`
//! (U6, B4, B6).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::Client;
use sluice_model::operation::{Operation, OperationAction};

use crate::api::{self, ApiError};
use crate::exit;
use crate::operations;
use crate::output::{self, Format};
use crate::request::{self, Change, StrategyFlags};
use sluice_model::node_pool::{AutoscaledRolloutPolicy, StandardRolloutPolicy};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Move the pool's nodes to a version or a node config: creates an
    /// UPGRADE_NODES operation and, unless --async, waits for it as
    /// `operations wait` does.
    Upgrade(UpgradeArgs),
    /// Roll back the pool's running or cancelled upgrade (U6, B6): the
    /// upgraded nodes go back to the pool's version and config. A
    /// completed upgrade is not rolled back: downgrade instead.
    Rollback {
        pool: String,
        /// Blue-green: drain green honouring PodDisruptionBudgets (else
        /// its pods are deleted).
        #[arg(long)]
        respect_pdb: bool,
    },
    /// Set the pool's upgrade strategy and its settings (what later
    /// upgrades use; a running one keeps its own).
    Update(UpdateArgs),
    /// Blue-green: end the soak of the pool's upgrade now and delete the
    /// blue nodes (B4).
    CompleteUpgrade { pool: String },
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    pool: String,
    /// Upgrade blue-green: a second set of nodes, the old kept until the
    /// new have soaked.
    #[arg(long, conflicts_with = "enable_surge_upgrade")]
    enable_blue_green_upgrade: bool,
    /// Upgrade by surge (the default strategy); drops blue-green settings.
    #[arg(long)]
    enable_surge_upgrade: bool,
    /// batch-node-count=N,batch-percent=F,batch-soak-duration=Ds: how blue
    /// is drained (one of the two batch sizes).
    #[arg(long, value_parser = request::parse_standard_rollout_policy)]
    standard_rollout_policy: Option<StandardRolloutPolicy>,
    /// wait-for-drain-duration=Ds: autoscaled blue-green (green grows with
    /// the autoscaler; blue is drained after the wait, default 3 days); an
    /// empty value (`--autoscaled-rollout-policy=`) takes the defaults.
    /// Replaces a standard rollout policy.
    #[arg(
        long,
        conflicts_with = "standard_rollout_policy",
        value_parser = request::parse_autoscaled_rollout_policy
    )]
    autoscaled_rollout_policy: Option<AutoscaledRolloutPolicy>,
    /// Ds: the soak after blue is drained, before it is deleted.
    #[arg(long, value_parser = |s: &str| request::parse_duration("--node-pool-soak-duration", s))]
    node_pool_soak_duration: Option<sluice_model::duration::Duration>,
    /// Surge: extra nodes per zone during an upgrade.
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(0..))]
    max_surge_upgrade: Option<i32>,
    /// Surge: nodes per zone that may be down at once.
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(0..))]
    max_unavailable_upgrade: Option<i32>,
}

impl UpdateArgs {
    fn flags(&self) -> StrategyFlags {
        StrategyFlags {
            blue_green: self.enable_blue_green_upgrade,
            surge: self.enable_surge_upgrade,
            max_surge: self.max_surge_upgrade,
            max_unavailable: self.max_unavailable_upgrade,
            standard: self.standard_rollout_policy.clone(),
            autoscaled: self.autoscaled_rollout_policy.clone(),
            node_pool_soak: self.node_pool_soak_duration,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("change").required(true).args(["version", "config"]))]
pub struct UpgradeArgs {
    pool: String,
    /// The Kubernetes version the nodes move to (1.33.5).
    #[arg(long)]
    version: Option<String>,
    /// A YAML NodeConfig file (capacity, labels, taints, spot) the nodes
    /// move to, whole.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Extra nodes per zone during the upgrade (default: the pool's, else 1).
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(0..))]
    max_surge: Option<i32>,
    /// Nodes per zone that may be down at once (default: the pool's, else 0).
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(0..))]
    max_unavailable: Option<i32>,
    /// Return once the operation is created; follow it with `sluice
    /// operations wait NAME`.
    #[arg(long = "async")]
    run_async: bool,
    /// With the wait, give up after this long (90s, 5m, 1h).
    #[arg(long, value_parser = request::parse_timeout)]
    timeout: Option<Duration>,
}

/// Run a `node-pools` command; its exit code.
pub fn run(command: Command, kubeconfig: Option<&Path>, format: Format) -> u8 {
    match command {
        Command::Upgrade(u) => {
            // The file is read before any request: a bad one costs nothing.
            let change = match change(&u) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return exit::ERROR;
                }
            };
            api::run(kubeconfig, |client| async move {
                upgrade(&client, &u, change, format).await
            })
        }
        Command::Rollback { pool, respect_pdb } => api::run(kubeconfig, |client| async move {
            let respect = respect_pdb.then_some(true);
            steer(
                &client,
                &pool,
                OperationAction::Rollback,
                respect,
                "roll back",
                format,
            )
            .await
        }),
        Command::CompleteUpgrade { pool } => api::run(kubeconfig, |client| async move {
            steer(
                &client,
                &pool,
                OperationAction::Complete,
                None,
                "complete",
                format,
            )
            .await
        }),
        Command::Update(u) => {
            let flags = u.flags();
            if flags.is_empty() {
                // Refused before any request.
                if let Err(e) = request::updated_settings(None, &flags) {
                    eprintln!("error: {e}");
                }
                return exit::ERROR;
            }
            api::run(kubeconfig, |client| async move {
                update(&client, &u.pool, &flags, format).await
            })
        }
    }
}

/// How many times `update` writes before it reports a conflict, as
/// client-go's DefaultRetry (5 steps).
const CONFLICT_ATTEMPTS: u32 = 5;

async fn update(
    client: &Client,
    name: &str,
    flags: &StrategyFlags,
    format: Format,
) -> Result<u8, ApiError> {
    // The controllers write the pool's status, which moves its
    // resourceVersion: read, change and write again on a 409, as
    // client-go's RetryOnConflict does, a bounded number of times.
    let mut attempt = 0;
    let pool = loop {
        attempt += 1;
        let pool = api::pool(client, name).await?;
        let settings = request::updated_settings(pool.spec.upgrade_settings.as_ref(), flags)
            .map_err(ApiError::Input)?;
        match api::set_upgrade_settings(client, &pool, settings).await {
            Err(ApiError::Conflict { .. }) if attempt < CONFLICT_ATTEMPTS => continue,
            written => break written?,
        }
    };
    let strategy = pool
        .spec
        .upgrade_settings
        .as_ref()
        .map(crate::view::settings_text)
        .unwrap_or_default();
    print!(
        "{}",
        output::either(
            format,
            || format!("updated node pool {name}: {strategy}\n"),
            &pool
        )
    );
    Ok(exit::OK)
}

fn change(u: &UpgradeArgs) -> Result<Change, ApiError> {
    match (&u.version, &u.config) {
        (Some(v), _) => Ok(Change::Version(v.clone())),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ApiError::Input(format!("{}: {e}", path.display())))?;
            request::config_from_yaml(&text)
                .map(Change::Config)
                .map_err(|e| ApiError::Input(format!("{}: {e}", path.display())))
        }
        // clap's group requires one of them.
        (None, None) => Err(ApiError::Input(
            "give --version or --config: nothing to upgrade".into(),
        )),
    }
}

fn new_name() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let millis = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
    // Two commands in one millisecond differ by their process and nanos.
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) as u16;
    request::operation_name(millis, salt)
}

async fn upgrade(
    client: &Client,
    u: &UpgradeArgs,
    change: Change,
    format: Format,
) -> Result<u8, ApiError> {
    let pool = api::pool(client, &u.pool).await?;
    let spec = request::upgrade_spec(&pool, change, u.max_surge, u.max_unavailable)?;
    let op = Operation::new(&new_name(), spec);
    let op = api::create(client, &op).await?;
    let name = op.metadata.name.clone().unwrap_or_default();
    match format {
        Format::Human => println!("created operation {name} (upgrade of node pool {})", u.pool),
        Format::Json if u.run_async => print!("{}", output::either(format, String::new, &op)),
        Format::Json => {}
    }
    if u.run_async {
        return Ok(exit::OK);
    }
    operations::wait(client, &name, u.timeout, format).await
}

/// Write `action` on the pool's upgrade [`request::action_target`] picks.
pub async fn steer(
    client: &Client,
    pool: &str,
    action: OperationAction,
    respect_pdb: Option<bool>,
    verb: &str,
    format: Format,
) -> Result<u8, ApiError> {
    // An unknown pool is said as such, not as "no operation".
    api::pool(client, pool).await?;
    let ops = api::list(client).await?;
    let name = request::action_target(&ops, pool, action)?;
    let op = api::set_action(client, &name, action, respect_pdb).await?;
    print!("{}", operations::acted(&op, verb, format));
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sluice_model::duration::Duration;

    use super::*;

    /// The `node-pools update` flags of `args`, as the command line gives them.
    fn update_flags(args: &[&str]) -> Result<StrategyFlags, String> {
        let argv = ["sluice", "node-pools", "update", "pool-a"]
            .iter()
            .chain(args)
            .copied();
        match crate::Cli::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .command
        {
            crate::Command::NodePools(Command::Update(u)) => Ok(u.flags()),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    /// spec: A1, A4 — gcloud's spelling, on the command line.
    #[test]
    fn update_takes_the_autoscaled_rollout_policy_as_gcloud_spells_it() {
        let f = update_flags(&[
            "--enable-blue-green-upgrade",
            "--autoscaled-rollout-policy=wait-for-drain-duration=7200s",
        ])
        .unwrap();
        assert!(f.blue_green);
        assert_eq!(
            f.autoscaled.and_then(|p| p.wait_for_drain_duration),
            Some(Duration::from_secs(7200))
        );
        // An empty value is the defaults, as gcloud's `=""`.
        for empty in [
            &["--autoscaled-rollout-policy="][..],
            &["--autoscaled-rollout-policy", ""],
        ] {
            let args = [&["--enable-blue-green-upgrade"][..], empty].concat();
            let f = update_flags(&args).unwrap();
            assert_eq!(f.autoscaled, Some(AutoscaledRolloutPolicy::default()));
        }
        // One rollout policy or the other, and bad values named.
        for (bad, says) in [
            (
                vec![
                    "--standard-rollout-policy=batch-node-count=1",
                    "--autoscaled-rollout-policy=",
                ],
                "cannot be used with",
            ),
            (
                vec!["--autoscaled-rollout-policy=wait=1s"],
                "unknown key \"wait\": expected wait-for-drain-duration",
            ),
            (
                vec!["--autoscaled-rollout-policy=wait-for-drain-duration=3d"],
                "wait-for-drain-duration: \"3d\" is not a duration",
            ),
        ] {
            let e = update_flags(&bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
