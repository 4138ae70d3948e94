//! Ctrl-C, SIGTERM and SIGHUP noted rather than obeyed, so the lab and
//! the benches stop at their next check and tear down what they made
//! (namespaces, agents) instead of dying with it in place.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub fn install() -> Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(sig, &action) }.with_context(|| format!("installing {sig} handler"))?;
    }
    Ok(())
}
