//! `sluice-controller`: the controller's commands.

use clap::{Parser, Subcommand};
use sluice_controller::init::{self, InitOptions};
use sluice_controller::serve::{self, ServeOptions};

#[derive(Parser)]
#[command(name = "sluice-controller", version, about = "The Sluice controller")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make the cluster's credentials: a CA, the API server's certificate,
    /// bearer tokens for an admin and for each node, and their kubeconfigs.
    Init(InitOptions),
    /// Serve the API over HTTPS (bearer tokens from `init`'s tokens.csv)
    /// until SIGTERM or Ctrl-C.
    Serve(Box<ServeOptions>),
}

fn serve_until_signal(opts: &ServeOptions) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        serve::run(opts, stop).await
    })
}

fn main() {
    let result = match Cli::parse().command {
        Cmd::Serve(opts) => serve_until_signal(&opts).map_err(|e| format!("{e:#}")),
        Cmd::Init(opts) => init::run(&opts)
            .map(|files| {
                for f in files {
                    println!("wrote {}", f.display());
                }
            })
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = result {
        eprintln!("sluice-controller: {e}");
        std::process::exit(1);
    }
}
