//! `sluice upgrade resume POOL`: Sluice's issue asks for it by this name
//! (gcloud resumes with `node-pools upgrade`): RESUME on the pool's
//! cancelled upgrade (U6).

use std::path::Path;

use sluice_model::operation::OperationAction;

use crate::api;
use crate::node_pools;
use crate::output::Format;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Go on with the pool's cancelled upgrade: the nodes not yet
    /// upgraded are.
    Resume { pool: String },
}

/// Run an `upgrade` command; its exit code.
pub fn run(command: Command, kubeconfig: Option<&Path>, format: Format) -> u8 {
    match command {
        Command::Resume { pool } => api::run(kubeconfig, |client| async move {
            node_pools::steer(
                &client,
                &pool,
                OperationAction::Resume,
                None,
                "resume",
                format,
            )
            .await
        }),
    }
}
