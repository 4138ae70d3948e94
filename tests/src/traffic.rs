//! New connections through a VIP on a thread of their own, counted, while a
//! test changes things under them (bounded in count, stopped by the test).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::whoami::{tcp_request, TcpOutcome};

/// New connections through the VIP on a thread, counting answers by pod and
/// failures, until stopped (bounded in count too).
pub struct Traffic {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// When the latest failed request was started.
    last_failure: Arc<Mutex<Option<Instant>>>,
    thread: Option<thread::JoinHandle<Vec<String>>>,
}

impl Traffic {
    pub fn start(ns: &str, vip: SocketAddr) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let last_failure = Arc::new(Mutex::new(None));
        let (s, o, f, ns) = (stop.clone(), ok.clone(), failed.clone(), ns.to_string());
        let last = last_failure.clone();
        let thread = thread::spawn(move || {
            let mut errors = Vec::new();
            let t0 = Instant::now();
            for _ in 0..20_000 {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let started = Instant::now();
                match tcp_request(&ns, vip) {
                    Ok(TcpOutcome::Reply { .. }) => {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        f.fetch_add(1, Ordering::Relaxed);
                        // When, too: a burst of failures reads differently
                        // from failures spread over the run.
                        // An error's Debug form carries its backtrace.
                        let what = match other {
                            Ok(o) => format!("{o:?}"),
                            Err(e) => format!("{e:#}"),
                        };
                        // The wall clock too, to find it in the logs.
                        errors.push(format!(
                            "{what} at {:.2} s ({})",
                            started.duration_since(t0).as_secs_f64(),
                            wall_clock(wall_at(started))
                        ));
                        if let Ok(mut l) = last.lock() {
                            *l = Some(started);
                        }
                    }
                }
                thread::sleep(Duration::from_millis(20));
            }
            errors
        });
        Traffic {
            stop,
            ok,
            failed,
            last_failure,
            thread: Some(thread),
        }
    }

    /// When the latest failed request so far was started.
    pub fn last_failure(&self) -> Option<Instant> {
        self.last_failure.lock().ok().and_then(|l| *l)
    }

    /// Answered so far.
    pub fn answered(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stop and return (answered, failed, first errors).
    pub fn finish(mut self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let errors = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            errors,
        )
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The wall-clock time of `at`, a moment already past.
fn wall_at(at: Instant) -> std::time::SystemTime {
    std::time::SystemTime::now() - at.elapsed()
}

/// `HH:MM:SS.mmm` UTC, as the logs' timestamps read.
fn wall_clock(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let s = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}
