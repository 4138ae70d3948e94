//! Connections that have not yet shown they are clients: accepted, but not
//! yet through TLS and their first bytes. They are bounded, and when the
//! bound is reached one is closed to make room for the newcomer: the
//! silent one (not a byte received) that has waited longest, or if none is
//! silent, the oldest of the rest.
//!
//! Why: each costs a descriptor for up to the handshake and idle timeouts
//! (10 s, then `--idle-timeout`), so a few thousand silent sockets used to
//! run the server out of descriptors. `accept` then failed and kubectl and
//! the agents' Lease renewals waited behind the flood (8 s for one
//! `kubectl get` with 3 000 silent sockets and a soft limit of 1 024). A
//! real client sends its ClientHello as soon as it is connected, so a flood
//! of bare connections, however fast it churns, sheds only its own; the
//! agent's health servers likewise shed their idlest connection first.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Descriptors kept out of the pending budget: the store, the watch
/// cache's and the loops' files, the lab's agents, and the connections
/// that are past this stage.
const RESERVED: u64 = 256;
/// The budget never goes below this (a very low descriptor limit), nor
/// above the larger bound (a silent connection costs memory too).
const MIN_BUDGET: usize = 32;
const MAX_BUDGET: usize = 8192;

/// How many pending connections a server with `nofile` descriptors keeps:
/// half of what is left after the reserve, within the bounds.
pub fn budget_for(nofile: u64) -> usize {
    let half = nofile.saturating_sub(RESERVED) / 2;
    usize::try_from(half)
        .unwrap_or(usize::MAX)
        .clamp(MIN_BUDGET, MAX_BUDGET)
}

/// The pending connections, in two queues, each oldest first: the silent
/// (accepted, not a byte received) and the talking (into TLS, or through
/// it and not yet sent its first bytes). A newcomer over budget sheds the
/// oldest silent one, and a talking one only when none is silent: a flood
/// of bare connections then never sheds a client that has spoken.
#[derive(Clone)]
pub struct Pending {
    inner: Arc<Mutex<Inner>>,
    cap: usize,
}

struct Inner {
    next: u64,
    /// By admission order: the first entry is the one waiting longest. Its
    /// sender is fired to shed it. A silent one also keeps its socket's
    /// descriptor, to look again before it is shed.
    silent: BTreeMap<u64, (oneshot::Sender<()>, RawFd)>,
    talking: BTreeMap<u64, oneshot::Sender<()>>,
    shed: u64,
}

impl Inner {
    fn len(&self) -> usize {
        self.silent.len() + self.talking.len()
    }
}

/// One pending connection's place. Dropping it (the connection got
/// through, or ended) frees the place.
pub struct Slot {
    id: u64,
    inner: Arc<Mutex<Inner>>,
}

/// Resolves when a newcomer took the connection's place.
pub type Shed = oneshot::Receiver<()>;

impl Pending {
    pub fn new(cap: usize) -> Self {
        Pending {
            inner: Arc::new(Mutex::new(Inner {
                next: 0,
                silent: BTreeMap::new(),
                talking: BTreeMap::new(),
                shed: 0,
            })),
            cap: cap.max(1),
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Admit the connection on descriptor `fd`, shedding another if the
    /// budget is full. `spoken(fd)` says whether a connection's first bytes
    /// are in: asked of the newcomer, and again of a silent one before it
    /// is shed (a client that spoke after its accept, before its task ran,
    /// is then kept). Returns its slot, what tells it it was shed, and
    /// whether one was shed for it.
    pub fn admit(&self, fd: RawFd, spoken: impl Fn(RawFd) -> bool) -> (Slot, Shed, bool) {
        let (tx, rx) = oneshot::channel();
        let spoke = spoken(fd);
        let mut g = lock(&self.inner);
        let mut shed_one = false;
        if g.len() >= self.cap {
            // Each look that finds bytes moves a connection to the talking
            // for good, so the looks are paid once per connection.
            let victim = loop {
                match g.silent.pop_first() {
                    Some((id, (tx, fd))) if spoken(fd) => {
                        g.talking.insert(id, tx);
                    }
                    Some((_, (tx, _))) => break Some(tx),
                    None => break g.talking.pop_first().map(|(_, tx)| tx),
                }
            };
            if let Some(tx) = victim {
                // The receiver may be gone (its task ending): it was
                // leaving anyway.
                let _ = tx.send(());
                g.shed += 1;
                shed_one = true;
            }
        }
        let id = g.next;
        g.next += 1;
        if spoke {
            g.talking.insert(id, tx);
        } else {
            g.silent.insert(id, (tx, fd));
        }
        drop(g);
        let slot = Slot {
            id,
            inner: self.inner.clone(),
        };
        (slot, rx, shed_one)
    }

    /// How many are pending now, silent and talking.
    pub fn len(&self) -> usize {
        lock(&self.inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many were shed since the start.
    pub fn shed_total(&self) -> u64 {
        lock(&self.inner).shed
    }
}

impl Slot {
    /// The connection's first bytes arrived: it is shed only after every
    /// silent one. `false` if it was shed already (the accept loop looked
    /// a moment before its bytes came): its task must stop there, before
    /// the handshake, or the client completes a handshake with a server
    /// that then resets it under the request (a broken pipe the client
    /// cannot tell from a failed request).
    #[must_use]
    pub fn talking(&self) -> bool {
        let mut g = lock(&self.inner);
        if let Some((tx, _)) = g.silent.remove(&self.id) {
            g.talking.insert(self.id, tx);
            return true;
        }
        g.talking.contains_key(&self.id)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = lock(&self.inner);
        if g.silent.remove(&self.id).is_none() {
            g.talking.remove(&self.id);
        }
    }
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    // The critical sections cannot panic; a poisoned lock still holds
    // consistent maps.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silent(_: RawFd) -> bool {
        false
    }

    fn spoken(_: RawFd) -> bool {
        true
    }

    #[test]
    fn the_budget_follows_the_descriptor_limit_within_bounds() {
        assert_eq!(budget_for(1024), 384);
        assert_eq!(budget_for(0), MIN_BUDGET);
        assert_eq!(budget_for(300), MIN_BUDGET);
        assert_eq!(budget_for(20_000), 8192);
        assert_eq!(budget_for(u64::MAX), MAX_BUDGET);
    }

    #[test]
    fn a_full_budget_sheds_the_oldest_for_a_newcomer() {
        let p = Pending::new(2);
        let (a, mut a_shed, shed) = p.admit(0, silent);
        assert!(!shed);
        let (b, mut b_shed, _) = p.admit(0, silent);
        assert_eq!(p.len(), 2);
        let (_c, mut c_shed, shed) = p.admit(0, silent);
        assert!(shed);
        assert_eq!(p.len(), 2);
        assert_eq!(p.shed_total(), 1);
        // The oldest was told; the others were not.
        assert!(a_shed.try_recv().is_ok());
        assert!(b_shed.try_recv().is_err());
        assert!(c_shed.try_recv().is_err());
        // The shed one's slot going away frees nothing twice.
        drop(a);
        assert_eq!(p.len(), 2);
        let (_d, _, shed) = p.admit(0, silent);
        assert!(shed);
        assert!(b_shed.try_recv().is_ok());
        drop(b);
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn silent_connections_go_before_any_that_has_spoken() {
        let p = Pending::new(2);
        let (talker, mut talker_shed, _) = p.admit(0, silent);
        assert!(talker.talking());
        let (_silent, mut silent_shed, _) = p.admit(0, silent);
        // The talker is older, but the silent one goes.
        let (_new, mut new_shed, shed) = p.admit(0, silent);
        assert!(shed);
        assert!(silent_shed.try_recv().is_ok());
        assert!(talker_shed.try_recv().is_err());
        // A second newcomer sheds the newer silent one, still not the talker.
        let (_newer, _, _) = p.admit(0, silent);
        assert!(new_shed.try_recv().is_ok());
        assert!(talker_shed.try_recv().is_err());
        // One that spoke before it was admitted is a talker from the start.
        let p = Pending::new(2);
        let (_early, mut early_shed, _) = p.admit(1, spoken);
        let (_s1, mut s1_shed, _) = p.admit(0, silent);
        let (_s2, _, shed) = p.admit(0, silent);
        assert!(shed);
        assert!(s1_shed.try_recv().is_ok());
        assert!(early_shed.try_recv().is_err());
        // With only talkers left, the oldest talker goes.
        let p = Pending::new(1);
        let (t1, mut t1_shed, _) = p.admit(0, silent);
        assert!(t1.talking());
        let (t2, _, shed) = p.admit(0, silent);
        assert!(shed);
        assert!(t1_shed.try_recv().is_ok());
        assert!(!t1.talking(), "shed as a talker: still shed");
        assert!(t2.talking());
        drop(t2);
        assert!(p.is_empty());
    }

    #[test]
    fn a_silent_one_that_has_spoken_since_is_kept_and_the_next_goes() {
        let p = Pending::new(2);
        // Descriptor 7 was silent when accepted, then its bytes arrived
        // before its task ran; descriptor 8 never speaks.
        let (_late, mut late_shed, _) = p.admit(7, silent);
        let (_mute, mut mute_shed, _) = p.admit(8, silent);
        let (_new, _, shed) = p.admit(9, |fd| fd == 7);
        assert!(shed);
        assert!(late_shed.try_recv().is_err(), "the late talker stays");
        assert!(mute_shed.try_recv().is_ok());
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn one_shed_just_before_its_bytes_came_is_told_so_when_it_speaks() {
        // The accept loop looked at descriptor 7 before its ClientHello
        // arrived and shed it; its task then sees the socket readable. It
        // must not go on to a handshake with a client about to be reset.
        let p = Pending::new(1);
        let (late, mut late_shed, _) = p.admit(7, silent);
        let (_new, _, shed) = p.admit(8, silent);
        assert!(shed);
        assert!(late_shed.try_recv().is_ok());
        assert!(!late.talking(), "shed: no handshake");
        assert_eq!(p.len(), 1);
        // One moved to the talkers by the accept loop's look is told to go on.
        let p = Pending::new(2);
        let (early, mut early_shed, _) = p.admit(7, silent);
        let (_mute, mut mute_shed, _) = p.admit(9, silent);
        let (_new, _, shed) = p.admit(8, |fd| fd == 7);
        assert!(shed);
        assert!(mute_shed.try_recv().is_ok());
        assert!(early_shed.try_recv().is_err());
        assert!(early.talking());
    }

    #[test]
    fn a_connection_that_got_through_frees_its_place() {
        let p = Pending::new(1);
        let (a, _, _) = p.admit(0, silent);
        assert!(a.talking());
        drop(a);
        assert!(p.is_empty());
        let (_b, mut b_shed, shed) = p.admit(0, silent);
        assert!(!shed, "nothing to shed: the first one left");
        assert!(b_shed.try_recv().is_err());
        assert_eq!(p.shed_total(), 0);
    }
}
