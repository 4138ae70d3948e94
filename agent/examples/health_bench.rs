//! Throwaway harness for measuring the health server with wrk (see
//! docs/benchmarks-health.md). Loopback only; stops by itself.
//!
//!   health_bench --port 18256 [--service-port 18257] [--seconds 30]
//!   health_bench --static --port 18258 [--seconds 30]
//!
//! `--static` runs the baseline instead: the same runtime shape (one thread,
//! current-thread tokio) answering every request with fixed bytes, no
//! parsing beyond finding the end of the head.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use sluice_agent::health::{HealthConfig, HealthHandle, ServiceHealthEntry, SystemClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Opts {
    port: u16,
    service_port: Option<u16>,
    seconds: u64,
    static_baseline: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        port: 18256,
        service_port: None,
        seconds: 30,
        static_baseline: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--port" => o.port = u16::try_from(num("--port")?).map_err(|e| e.to_string())?,
            "--service-port" => {
                o.service_port =
                    Some(u16::try_from(num("--service-port")?).map_err(|e| e.to_string())?)
            }
            "--seconds" => o.seconds = num("--seconds")?,
            "--static" => o.static_baseline = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("health_bench: {e}");
            std::process::exit(2);
        }
    };
    let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), o.port);
    if o.static_baseline {
        if let Err(e) = run_static(addr, o.seconds) {
            eprintln!("health_bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    let cfg = HealthConfig::new(Duration::from_secs(1)).on_ip(addr.ip(), o.port);
    let h = match HealthHandle::start(cfg, Arc::new(SystemClock)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("health_bench: {e}");
            std::process::exit(1);
        }
    };
    h.record_synced();
    if let Some(p) = o.service_port {
        let rep = h.set_services(&[ServiceHealthEntry {
            namespace: "bench".into(),
            name: "web".into(),
            port: Some(p),
            local_endpoints: 2,
        }]);
        eprintln!("services: {rep:?}");
    }
    eprintln!("health server on {addr} for {}s", o.seconds);
    std::thread::sleep(Duration::from_secs(o.seconds));
    eprintln!("{:?}", h.counters());
    h.shutdown();
}

const STATIC: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";

fn run_static(addr: SocketAddr, seconds: u64) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("static baseline on {addr} for {seconds}s");
        let serve = async {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut filled = 0;
                    loop {
                        let n = match s.read(&mut buf[filled..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        filled += n;
                        let mut out = Vec::new();
                        while let Some(i) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n")
                        {
                            out.extend_from_slice(STATIC);
                            buf.copy_within(i + 4..filled, 0);
                            filled -= i + 4;
                        }
                        if filled == buf.len() || s.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                });
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(seconds), serve).await;
        Ok(())
    })
}
