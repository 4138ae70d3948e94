//! `sluice-controller`: the controller's commands.

use clap::{Parser, Subcommand};
use sluice_controller::init::{self, InitOptions};

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
}

fn main() {
    let result = match Cli::parse().command {
        Cmd::Init(opts) => init::run(&opts).map(|files| {
            for f in files {
                println!("wrote {}", f.display());
            }
        }),
    };
    if let Err(e) = result {
        eprintln!("sluice-controller: {e}");
        std::process::exit(1);
    }
}
