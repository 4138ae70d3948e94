//! `sluice node-pools upgrade|rollback`, worded like `gcloud container
//! node-pools`: a manual upgrade is an `Operation` the controller runs
//! (U1–U7); a rollback is that operation's `spec.action` (U6).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::Client;
use sluice_model::operation::{Operation, OperationAction};

use crate::api::{self, ApiError};
use crate::exit;
use crate::operations;
use crate::output::{self, Format};
use crate::request::{self, Change};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Move the pool's nodes to a version or a node config: creates an
    /// UPGRADE_NODES operation and, unless --async, waits for it as
    /// `operations wait` does.
    Upgrade(UpgradeArgs),
    /// Roll back the pool's running or cancelled upgrade (U6): the
    /// upgraded nodes go back to the pool's version and config. A
    /// completed upgrade is not rolled back: downgrade instead.
    Rollback { pool: String },
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
        Command::Rollback { pool } => api::run(kubeconfig, |client| async move {
            steer(
                &client,
                &pool,
                OperationAction::Rollback,
                "roll back",
                format,
            )
            .await
        }),
    }
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
    verb: &str,
    format: Format,
) -> Result<u8, ApiError> {
    // An unknown pool is said as such, not as "no operation".
    api::pool(client, pool).await?;
    let ops = api::list(client).await?;
    let name = request::action_target(&ops, pool, action)?;
    let op = api::set_action(client, &name, action).await?;
    print!("{}", operations::acted(&op, verb, format));
    Ok(exit::OK)
}
