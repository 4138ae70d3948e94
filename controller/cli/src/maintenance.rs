//! `sluice maintenance`: may maintenance start now (`check`), and when
//! next (`next`), by the cluster's maintenance policy (spec M). The
//! answers are `sluice_maintenance::Policy`'s, the same the controller
//! gates its work with.

use std::path::{Path, PathBuf};

use sluice_maintenance::{Event, Policy};
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::Timestamp;

use crate::client::{self, ClientError};
use crate::exit;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
#[command(after_help = crate::EXIT_CODES)]
pub struct Args {
    /// Read the policy from this Cluster manifest (YAML or JSON) instead
    /// of the cluster's Cluster `default` through the API.
    #[arg(long, global = true)]
    policy_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Whether an event may start at a time: allowed (until when) or
    /// blocked (why, and when it next may).
    #[command(after_help = crate::EXIT_CODES)]
    Check {
        /// The time (RFC 3339, any UTC offset; default now).
        #[arg(long)]
        at: Option<Timestamp>,
        /// node-patch, node-minor, node-disruption, cp-patch, cp-minor or
        /// cp-disruption (cp- may be written control-plane-).
        #[arg(long)]
        event: Event,
    },
    /// The next time the maintenance window opens, or, with --event, the
    /// earliest time that event may start.
    #[command(after_help = crate::EXIT_CODES)]
    Next {
        /// From when (RFC 3339, any UTC offset; default now).
        #[arg(long)]
        after: Option<Timestamp>,
        /// As for `check`.
        #[arg(long)]
        event: Option<Event>,
    },
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the cluster's maintenance policy: {0}")]
    Policy(#[from] sluice_maintenance::PolicyError),
}

/// Run a `maintenance` command; its exit code.
pub fn run(args: Args, kubeconfig: Option<&Path>, format: Format) -> u8 {
    // Whole seconds, as every stored time.
    let now = Timestamp::now();
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    match answer(&args, kubeconfig, format, now) {
        Ok((text, code)) => {
            print!("{text}");
            code
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::ERROR
        }
    }
}

fn cluster(args: &Args, kubeconfig: Option<&Path>) -> Result<Cluster, ClientError> {
    match &args.policy_file {
        Some(f) => client::cluster_from_file(f),
        None => client::cluster_from_api(kubeconfig),
    }
}

/// The text to print and the exit code; `now` stands for an absent time.
fn answer(
    args: &Args,
    kubeconfig: Option<&Path>,
    format: Format,
    now: Timestamp,
) -> Result<(String, u8), Error> {
    let policy = Policy::of_spec(&cluster(args, kubeconfig)?.spec)?;
    Ok(match args.command {
        Command::Check { at, event } => {
            let at = at.unwrap_or(now);
            let d = policy.may_start(event, at)?;
            let code = if d.is_allowed() {
                exit::OK
            } else {
                exit::BLOCKED
            };
            (output::check(format, event, at, &d), code)
        }
        Command::Next { after, event } => {
            let after = after.unwrap_or(now);
            let next = match event {
                Some(e) => policy.next_allowed(e, after)?,
                None => policy
                    .window()
                    .next_opening(after)
                    .map_err(sluice_maintenance::PolicyError::from)?,
            };
            let code = if next.is_some() {
                exit::OK
            } else {
                exit::BLOCKED
            };
            (output::next(format, event, after, next), code)
        }
    })
}
