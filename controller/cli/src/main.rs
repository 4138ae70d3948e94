//! `sluice`: the command line for a Sluice cluster, worded like `gcloud
//! container`. Each command group has its own module; `client` reaches
//! the cluster, `output` prints for people or scripts.

mod api;
mod autoscaler;
mod client;
mod maintenance;
mod node_pools;
mod operations;
mod output;
mod request;
mod upgrade;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use output::Format;

/// Exit codes, the same for every command.
pub mod exit {
    /// Allowed (`check`), or found (`next`).
    pub const OK: u8 = 0;
    /// Something went wrong: an unreadable or invalid policy, an
    /// unreachable API server, a bad time.
    pub const ERROR: u8 = 1;
    /// Flags clap could not parse (clap's own code).
    pub const USAGE: u8 = 2;
    /// Blocked (`check`), or nothing within the horizon (`next`).
    pub const BLOCKED: u8 = 10;
}

const EXIT_CODES: &str = "Exit codes: 0 allowed (check), found (next), done; 10 blocked (check), none within about 2 years (next), an operation CANCELLED or ROLLED_BACK or a wait timed out; 1 error (bad policy, file, time or API; an operation FAILED); 2 bad usage.";

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "Manage a Sluice cluster", after_help = EXIT_CODES)]
struct Cli {
    /// The kubeconfig to reach the cluster with (default: $KUBECONFIG,
    /// then ~/.kube/config).
    #[arg(long, global = true, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// How to print: `human` lines or `json` for scripts.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    format: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Why the cluster autoscaler does what it does, and what it would do
    /// next (a dry run).
    #[command(subcommand, after_help = EXIT_CODES)]
    Autoscaler(autoscaler::Command),
    /// The cluster's maintenance windows and exclusions (spec M).
    Maintenance(maintenance::Args),
    /// Upgrade or roll back a node pool's nodes (spec U).
    #[command(subcommand, after_help = EXIT_CODES)]
    NodePools(node_pools::Command),
    /// The cluster's long-running operations: list, describe, wait,
    /// cancel.
    #[command(subcommand, after_help = EXIT_CODES)]
    Operations(operations::Command),
    /// Steer a node pool's upgrade: resume a cancelled one (U6).
    #[command(subcommand, after_help = EXIT_CODES)]
    Upgrade(upgrade::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Autoscaler(args) => autoscaler::run(args, cli.kubeconfig.as_deref(), cli.format),
        Command::Maintenance(args) => maintenance::run(args, cli.kubeconfig.as_deref(), cli.format),
        Command::NodePools(args) => node_pools::run(args, cli.kubeconfig.as_deref(), cli.format),
        Command::Operations(args) => operations::run(args, cli.kubeconfig.as_deref(), cli.format),
        Command::Upgrade(args) => upgrade::run(args, cli.kubeconfig.as_deref(), cli.format),
    };
    ExitCode::from(code)
}
