//! `sluice-lb`: the load-balancer process (see the crate documentation).

use clap::Parser;

use sluice_lb::cli::Args;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice-lb: starting the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(sluice_lb::run::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-lb: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
