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
    set(SigHandler::Handler(on_signal))
}

/// The signals end the process again, as before [`install`]: for what
/// comes after a part that stops itself at its checks.
pub fn restore() -> Result<()> {
    set(SigHandler::SigDfl)
}

fn set(handler: SigHandler) -> Result<()> {
    let action = SigAction::new(handler, SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic; SIG_DFL has none.
        unsafe { sigaction(sig, &action) }.with_context(|| format!("setting the {sig} handler"))?;
    }
    Ok(())
}
