//! `sluice operations list|describe|wait|cancel`, worded like `gcloud
//! container operations`: the cluster's `Operation` objects.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::operation::{Operation, OperationAction};

use crate::api::{self, ApiError};
use crate::exit;
use crate::output::{self, Format};
use crate::request;
use crate::view;

const WAIT_CODES: &str = "Exit codes: 0 DONE; 1 FAILED or an error; 10 CANCELLED, ROLLED_BACK or the timeout passed; 2 bad usage.";

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The operations, newest first.
    List {
        /// Only the operations on this node pool.
        #[arg(long)]
        pool: Option<String>,
    },
    /// Every field of an operation, with each zone's progress, what
    /// blocks it, and the warnings.
    Describe { name: String },
    /// Follow an operation until it ends, one line a change.
    #[command(after_help = WAIT_CODES)]
    Wait {
        name: String,
        /// Give up after this long (90s, 5m, 1h); default: never.
        #[arg(long, value_parser = request::parse_timeout)]
        timeout: Option<Duration>,
    },
    /// Ask a running upgrade to pause (spec.action CANCEL, U6): nodes
    /// whose upgrade started finish it, no other starts.
    Cancel { name: String },
}

/// Run an `operations` command; its exit code.
pub fn run(command: Command, kubeconfig: Option<&Path>, format: Format) -> u8 {
    api::run(kubeconfig, |client| async move {
        match command {
            Command::List { pool } => list(&client, pool.as_deref(), format).await,
            Command::Describe { name } => {
                let op = api::operation(&client, &name).await?;
                print!("{}", output::either(format, || view::describe(&op), &op));
                Ok(exit::OK)
            }
            Command::Wait { name, timeout } => wait(&client, &name, timeout, format).await,
            Command::Cancel { name } => {
                let op = api::operation(&client, &name).await?;
                request::cancellable(&op)?;
                let op = api::set_action(&client, &name, OperationAction::Cancel, None).await?;
                print!("{}", acted(&op, "cancel", format));
                Ok(exit::OK)
            }
        }
    })
}

/// What a command that wrote `spec.action` prints.
pub fn acted(op: &Operation, verb: &str, format: Format) -> String {
    let human = || {
        format!(
            "asked operation {} to {verb} (status {})\n",
            op.metadata.name.as_deref().unwrap_or_default(),
            request::state_name(op.status.as_ref().and_then(|s| s.status))
        )
    };
    output::either(format, human, op)
}

async fn list(client: &Client, pool: Option<&str>, format: Format) -> Result<u8, ApiError> {
    let mut ops = api::list(client).await?;
    if let Some(p) = pool {
        ops.retain(|o| o.spec.node_pool() == Some(p));
    }
    request::newest_first(&mut ops);
    print!("{}", output::either(format, || view::table(&ops), &ops));
    Ok(exit::OK)
}

/// Consecutive watch errors after which `wait` gives up (the watcher
/// backs off between them).
const WATCH_ERRORS: u32 = 5;

/// Follow `name` through a watch until it ends (exit code by
/// [`view::wait_exit`]) or `timeout` passes (10).
pub async fn wait(
    client: &Client,
    name: &str,
    timeout: Option<Duration>,
    format: Format,
) -> Result<u8, ApiError> {
    // Read first: an unknown name is an error, not an endless wait.
    let first = api::operation(client, name).await?;
    let follow = follow(client, name, first, format);
    match timeout {
        None => follow.await,
        Some(t) => match tokio::time::timeout(t, follow).await {
            Ok(r) => r,
            Err(_) => {
                eprintln!(
                    "timed out after {}s waiting for operation {name:?}",
                    t.as_secs()
                );
                Ok(exit::BLOCKED)
            }
        },
    }
}

async fn follow(
    client: &Client,
    name: &str,
    first: Operation,
    format: Format,
) -> Result<u8, ApiError> {
    let mut last = String::new();
    let mut show = |op: &Operation| -> Option<u8> {
        let text = view::progress_text(op);
        if text != last {
            let now = Timestamp::now();
            let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
            match format {
                Format::Human => print!("{}", view::progress_line(op, now)),
                Format::Json => print!("{}", view::progress_json(op, now)),
            }
            last = text;
        }
        view::wait_exit(op.status.as_ref().and_then(|s| s.status), op.spec.action)
    };
    if let Some(code) = show(&first) {
        return Ok(code);
    }
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api::operations(client), config).default_backoff());
    let mut errors = 0;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(op) | watcher::Event::InitApply(op))
                if op.metadata.name.as_deref() == Some(name) =>
            {
                errors = 0;
                if let Some(code) = show(&op) {
                    return Ok(code);
                }
            }
            Ok(watcher::Event::Delete(op)) if op.metadata.name.as_deref() == Some(name) => {
                return Err(ApiError::Input(format!(
                    "operation {name:?} was deleted while waiting"
                )));
            }
            Ok(_) => errors = 0,
            Err(e) => {
                errors += 1;
                if errors >= WATCH_ERRORS {
                    return Err(ApiError::Input(format!("watching operation {name:?}: {e}")));
                }
            }
        }
    }
    Err(ApiError::Input(format!(
        "watching operation {name:?}: the watch ended"
    )))
}
