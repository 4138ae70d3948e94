//! Connection budgets: one per listener (the node server, each Service's
//! health port), and the choice of which connection gives way when one is
//! full.
//!
//! Why a budget per listener: any host that reaches the node can open
//! connections to these ports and hold them. With one cap shared by every
//! port, idle sockets on 10256 also starve every Service's check, and the
//! load balancer pulls a healthy node (H1, H3, H4).
//!
//! Why shed rather than refuse: a load balancer's probe sends its request at
//! once and is answered within microseconds, so the connection that has
//! waited longest without delivering a request is the one least likely to be
//! a probe. Refusing the newest instead hands the port to whoever opened
//! their sockets first.
//!
//! [`choose_victim`] and [`classify_accept_error`] are pure (the clock is a
//! `Duration` passed in); [`Budget`] is the table the connection tasks keep
//! up to date, with the counters `/metrics` reports.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::AbortHandle;

/// What a connection is doing, as far as shedding cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Nothing of a request received since it was accepted or since its last
    /// answer.
    Idle,
    /// Part of a request received: a head not yet complete, or a body being
    /// skipped.
    Partial,
    /// Writing the answer to a complete request.
    Answering,
}

/// One connection as [`choose_victim`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnView {
    pub id: u64,
    pub phase: Phase,
    /// Idle or partial: since it began waiting for this request (accepted,
    /// or its previous answer written). Answering: since the answer began.
    pub since: Duration,
}

/// Why a connection was dropped to make room, by what it was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShedReason {
    Idle,
    PartialRequest,
    /// Its answer could not be handed to the kernel for a while: the client
    /// does not read.
    StalledWrite,
}

impl ShedReason {
    pub const ALL: [ShedReason; 3] = [
        ShedReason::Idle,
        ShedReason::PartialRequest,
        ShedReason::StalledWrite,
    ];

    /// The `reason` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::Idle => "idle",
            ShedReason::PartialRequest => "partial_request",
            ShedReason::StalledWrite => "stalled_write",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which deadline closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// A request head (the first one counted from the accept) not complete
    /// in time, or a small body not skipped in time.
    Head,
    /// No new request on a keep-alive connection.
    Idle,
    /// An answer not handed to the kernel in time.
    Write,
}

impl Deadline {
    pub const ALL: [Deadline; 3] = [Deadline::Head, Deadline::Idle, Deadline::Write];

    /// The `deadline` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Deadline::Head => "head",
            Deadline::Idle => "idle",
            Deadline::Write => "write",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The connection to drop so that a new one fits, or `None`: every
/// connection is answering a request and none of those writes has stalled
/// for `stalled_after`, so the newcomer is refused instead.
///
/// Waiting connections (idle or partial) go first, the one waiting longest
/// first: a probe is answered long before an idle or slowloris socket has
/// aged. A connection answering a request is never shed while one is
/// waiting, and then only once its write has stalled (its client does not
/// read), so an answer on its way is not cut for a socket that sends nothing.
/// Ties go to idle before partial, then the lower (older) id.
pub fn choose_victim(
    conns: impl IntoIterator<Item = ConnView>,
    now: Duration,
    stalled_after: Duration,
) -> Option<(u64, ShedReason)> {
    conns
        .into_iter()
        .filter_map(|c| {
            let (class, reason) = match c.phase {
                Phase::Idle => (0u8, ShedReason::Idle),
                Phase::Partial => (0, ShedReason::PartialRequest),
                Phase::Answering if now.saturating_sub(c.since) >= stalled_after => {
                    (1, ShedReason::StalledWrite)
                }
                Phase::Answering => return None,
            };
            Some(((class, c.since, c.phase, c.id), reason))
        })
        .min_by_key(|(key, _)| *key)
        .map(|((_, _, _, id), reason)| (id, reason))
}

/// What to do after `accept` failed, by its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptError {
    /// The failure belongs to one pending connection (reset or aborted
    /// before it was taken): take the next one at once.
    ConnectionGone,
    /// Out of file descriptors (process or system) or socket memory: free
    /// one by shedding, or else back off so the listener, still readable,
    /// does not spin.
    Descriptors,
    /// Anything else: back off, don't spin.
    Other,
}

impl AcceptError {
    /// The `kind` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            AcceptError::ConnectionGone => "connection_gone",
            AcceptError::Descriptors => "descriptors",
            AcceptError::Other => "other",
        }
    }
}

/// `accept(2)` on Linux: "network errors for the new socket ... should be
/// treated like EAGAIN by retrying".
pub fn classify_accept_error(errno: Option<i32>) -> AcceptError {
    match errno {
        Some(
            libc::ECONNABORTED
            | libc::ECONNRESET
            | libc::EINTR
            | libc::EAGAIN
            | libc::EPROTO
            | libc::EPERM
            | libc::ENETDOWN
            | libc::ENOPROTOOPT
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::EHOSTUNREACH
            | libc::EOPNOTSUPP
            | libc::ENETUNREACH
            | libc::ETIMEDOUT,
        ) => AcceptError::ConnectionGone,
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            AcceptError::Descriptors
        }
        _ => AcceptError::Other,
    }
}

/// Pause after the `failures`-th consecutive failed accept (0-based) that
/// shedding could not cure: 5 ms, doubling to 160 ms. Short at first because
/// probes wait in the backlog meanwhile (descriptors held elsewhere in the
/// agent may come back soon); bounded, so a lasting shortage costs a few
/// wake-ups a second rather than a core.
pub fn accept_backoff(failures: u32) -> Duration {
    Duration::from_millis(5 << failures.min(5))
}

/// Which server a listener belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ListenerKind {
    /// `/healthz`, `/livez` (10256).
    Node,
    /// A Service's `healthCheckNodePort`.
    Service,
    /// The agent's own `/metrics` (10249), budgeted the same way so idle
    /// sockets there cannot take the descriptors the health ports need.
    Metrics,
}

impl ListenerKind {
    /// The `listener` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListenerKind::Node => "node",
            ListenerKind::Service => "service",
            ListenerKind::Metrics => "metrics",
        }
    }
}

/// Connection counters of one listener, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerCounters {
    pub listener: ListenerKind,
    pub port: u16,
    /// Open right now.
    pub open: u64,
    pub accepted: u64,
    /// Closed at once: the budget was full and no connection could give way.
    pub refused: u64,
    /// Dropped to make room, indexed like [`ShedReason::ALL`].
    pub shed: [u64; 3],
    /// Closed by a deadline, indexed like [`Deadline::ALL`].
    pub timed_out: [u64; 3],
    /// `accept` failed for lack of descriptors or socket memory.
    pub accept_descriptors: u64,
    /// `accept` failed otherwise (pending connections gone not counted).
    pub accept_other: u64,
}

impl ListenerCounters {
    pub fn shed(&self, r: ShedReason) -> u64 {
        self.shed[r.index()]
    }

    pub fn timed_out(&self, d: Deadline) -> u64 {
        self.timed_out[d.index()]
    }

    pub fn shed_total(&self) -> u64 {
        self.shed.iter().sum()
    }

    pub fn timed_out_total(&self) -> u64 {
        self.timed_out.iter().sum()
    }
}

#[derive(Default)]
struct AtomicCounters {
    accepted: AtomicU64,
    refused: AtomicU64,
    shed: [AtomicU64; 3],
    timed_out: [AtomicU64; 3],
    accept_descriptors: AtomicU64,
    accept_other: AtomicU64,
}

struct Slot {
    phase: Phase,
    since: Duration,
    /// Set right after the task is spawned; a connection shed before that
    /// has not started and ends when its task first runs.
    abort: Option<AbortHandle>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    conns: HashMap<u64, Slot>,
}

/// The open connections of one listener, at most `cap` of them.
pub struct Budget {
    kind: ListenerKind,
    port: u16,
    cap: usize,
    stalled_after: Duration,
    /// The monotonic clock, as time since the budget was made.
    clock: Box<dyn Fn() -> Duration + Send + Sync>,
    table: Mutex<Table>,
    counters: AtomicCounters,
}

impl Budget {
    /// `clock`: monotonic time as a `Duration` from any fixed point.
    pub fn new(
        kind: ListenerKind,
        port: u16,
        cap: usize,
        stalled_after: Duration,
        clock: Box<dyn Fn() -> Duration + Send + Sync>,
    ) -> Budget {
        Budget {
            kind,
            port,
            cap: cap.max(1),
            stalled_after,
            clock,
            table: Mutex::new(Table::default()),
            counters: AtomicCounters::default(),
        }
    }

    /// A budget on tokio's clock (paused and advanced in tests that ask).
    pub fn on_tokio_clock(
        kind: ListenerKind,
        port: u16,
        cap: usize,
        stalled_after: Duration,
    ) -> Budget {
        let epoch = tokio::time::Instant::now();
        Budget::new(
            kind,
            port,
            cap,
            stalled_after,
            Box::new(move || epoch.elapsed()),
        )
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Plain data, consistent after any panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for a new connection (shedding one if the budget is full
    /// and one can go) and registers it, idle since now; `None`: refused.
    pub fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let now = (self.clock)();
        let mut t = self.table();
        if t.conns.len() >= self.cap && !self.shed_locked(&mut t, now) {
            drop(t);
            self.counters.refused.fetch_add(1, Relaxed);
            return None;
        }
        let id = t.next_id;
        t.next_id += 1;
        t.conns.insert(
            id,
            Slot {
                phase: Phase::Idle,
                since: now,
                abort: None,
            },
        );
        drop(t);
        self.counters.accepted.fetch_add(1, Relaxed);
        Some(Ticket {
            budget: self.clone(),
            id,
        })
    }

    /// Drops one waiting (or stalled) connection to free its descriptor,
    /// whether or not the budget is full. `false`: none could go.
    pub fn shed_one(&self) -> bool {
        let now = (self.clock)();
        let mut t = self.table();
        self.shed_locked(&mut t, now)
    }

    fn shed_locked(&self, t: &mut Table, now: Duration) -> bool {
        let views = t.conns.iter().map(|(&id, s)| ConnView {
            id,
            phase: s.phase,
            since: s.since,
        });
        let Some((id, reason)) = choose_victim(views, now, self.stalled_after) else {
            return false;
        };
        if let Some(slot) = t.conns.remove(&id) {
            if let Some(a) = slot.abort {
                // Dropping the task closes its socket.
                a.abort();
            }
        }
        self.counters.shed[reason.index()].fetch_add(1, Relaxed);
        true
    }

    /// Lets a shed abort the task that serves connection `id`.
    pub fn attach(&self, id: u64, abort: AbortHandle) {
        match self.table().conns.get_mut(&id) {
            Some(slot) => slot.abort = Some(abort),
            // Shed (or ended) before its task was known: make sure it ends.
            None => abort.abort(),
        }
    }

    /// Counts an `accept` failure.
    pub fn accept_failed(&self, kind: AcceptError) {
        match kind {
            AcceptError::ConnectionGone => {}
            AcceptError::Descriptors => {
                self.counters.accept_descriptors.fetch_add(1, Relaxed);
            }
            AcceptError::Other => {
                self.counters.accept_other.fetch_add(1, Relaxed);
            }
        }
    }

    pub fn counters(&self) -> ListenerCounters {
        let c = &self.counters;
        ListenerCounters {
            listener: self.kind,
            port: self.port,
            open: self.table().conns.len() as u64,
            accepted: c.accepted.load(Relaxed),
            refused: c.refused.load(Relaxed),
            shed: [0, 1, 2].map(|i| c.shed[i].load(Relaxed)),
            timed_out: [0, 1, 2].map(|i| c.timed_out[i].load(Relaxed)),
            accept_descriptors: c.accept_descriptors.load(Relaxed),
            accept_other: c.accept_other.load(Relaxed),
        }
    }
}

/// A connection's place in its [`Budget`]; released when dropped (the task
/// ended or was aborted).
pub struct Ticket {
    budget: Arc<Budget>,
    id: u64,
}

impl Ticket {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Records what the connection does now. Idle → partial keeps the time
    /// it began waiting (a slowloris ages from its accept, not from its last
    /// byte); every other change restarts it.
    pub fn set_phase(&self, phase: Phase) {
        let now = (self.budget.clock)();
        if let Some(slot) = self.budget.table().conns.get_mut(&self.id) {
            let keeps_since =
                slot.phase == phase || (slot.phase == Phase::Idle && phase == Phase::Partial);
            if !keeps_since {
                slot.since = now;
            }
            slot.phase = phase;
        }
    }

    pub fn timed_out(&self, d: Deadline) {
        self.budget.counters.timed_out[d.index()].fetch_add(1, Relaxed);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.budget.table().conns.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    const STALL: Duration = Duration::from_secs(1);

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn v(id: u64, phase: Phase, since: u64) -> ConnView {
        ConnView {
            id,
            phase,
            since: s(since),
        }
    }

    #[test]
    fn the_longest_waiting_connection_goes_first() {
        let conns = [
            v(1, Phase::Idle, 30),
            v(2, Phase::Partial, 10),
            v(3, Phase::Idle, 20),
        ];
        assert_eq!(
            choose_victim(conns, s(40), STALL),
            Some((2, ShedReason::PartialRequest))
        );
        let conns = [v(1, Phase::Idle, 5), v(2, Phase::Partial, 10)];
        assert_eq!(
            choose_victim(conns, s(40), STALL),
            Some((1, ShedReason::Idle))
        );
    }

    #[test]
    fn ties_go_to_idle_then_the_older_id() {
        let conns = [
            v(7, Phase::Partial, 10),
            v(9, Phase::Idle, 10),
            v(8, Phase::Idle, 10),
        ];
        assert_eq!(
            choose_victim(conns, s(10), STALL),
            Some((8, ShedReason::Idle))
        );
    }

    #[test]
    fn an_answer_in_progress_never_gives_way_to_a_waiting_socket() {
        // The writer is far older than the idle one, and stalled: still the
        // idle one goes.
        let conns = [v(1, Phase::Answering, 0), v(2, Phase::Idle, 99)];
        assert_eq!(
            choose_victim(conns, s(100), STALL),
            Some((2, ShedReason::Idle))
        );
    }

    #[test]
    fn with_only_writers_a_stalled_one_goes_else_the_newcomer_is_refused() {
        let now = s(100);
        let fresh = [v(1, Phase::Answering, 100), v(2, Phase::Answering, 100)];
        assert_eq!(choose_victim(fresh, now, STALL), None);
        let one_stalled = [v(1, Phase::Answering, 100), v(2, Phase::Answering, 98)];
        assert_eq!(
            choose_victim(one_stalled, now, STALL),
            Some((2, ShedReason::StalledWrite))
        );
        assert_eq!(choose_victim([], now, STALL), None);
    }

    #[test]
    fn accept_errors_are_sorted_by_what_frees_them() {
        for e in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert_eq!(classify_accept_error(Some(e)), AcceptError::Descriptors);
        }
        for e in [libc::ECONNABORTED, libc::EINTR, libc::EPROTO] {
            assert_eq!(classify_accept_error(Some(e)), AcceptError::ConnectionGone);
        }
        assert_eq!(classify_accept_error(Some(libc::EBADF)), AcceptError::Other);
        assert_eq!(classify_accept_error(None), AcceptError::Other);
        assert_eq!(accept_backoff(0), Duration::from_millis(5));
        assert_eq!(accept_backoff(3), Duration::from_millis(40));
        assert_eq!(accept_backoff(40), Duration::from_millis(160));
    }

    /// A budget on a clock the test turns by hand.
    fn budget(cap: usize) -> (Arc<Budget>, Arc<AtomicU64>) {
        let ms = Arc::new(AtomicU64::new(0));
        let c = ms.clone();
        let b = Budget::new(
            ListenerKind::Node,
            10256,
            cap,
            STALL,
            Box::new(move || Duration::from_millis(c.load(Relaxed))),
        );
        (Arc::new(b), ms)
    }

    #[test]
    fn a_full_budget_sheds_the_oldest_waiting_and_admits_the_newcomer() {
        let (b, ms) = budget(3);
        let slow = b.admit().expect("room");
        ms.store(100, Relaxed);
        let answering = b.admit().expect("room");
        ms.store(200, Relaxed);
        let idle = b.admit().expect("room");
        // The slowloris sends a byte later: it still ages from its accept.
        ms.store(300, Relaxed);
        slow.set_phase(Phase::Partial);
        answering.set_phase(Phase::Answering);
        ms.store(400, Relaxed);
        let newest = b.admit().expect("the slowloris gives way");
        let c = b.counters();
        assert_eq!((c.open, c.accepted, c.refused), (3, 4, 0));
        assert_eq!(c.shed(ShedReason::PartialRequest), 1);
        // Then the idle one.
        let newer = b.admit().expect("the idle one gives way");
        assert_eq!(b.counters().shed(ShedReason::Idle), 1);
        // Open now: `answering` (since 300), `newest` and `newer`. Once all
        // three are answering, nobody gives way: the newcomer is refused.
        newest.set_phase(Phase::Answering);
        newer.set_phase(Phase::Answering);
        assert!(b.admit().is_none(), "every connection is answering");
        assert_eq!(b.counters().refused, 1);
        // A write stuck past the stall limit gives way.
        ms.store(1_300, Relaxed);
        assert!(b.admit().is_some());
        assert_eq!(b.counters().shed(ShedReason::StalledWrite), 1);
        drop((slow, idle));
    }

    #[test]
    fn tickets_release_their_slot_once() {
        let (b, _ms) = budget(2);
        let a = b.admit().expect("room");
        let _b2 = b.admit().expect("room");
        assert_eq!(b.counters().open, 2);
        drop(a);
        assert_eq!(b.counters().open, 1);
        assert!(b.shed_one());
        assert_eq!(b.counters().open, 0);
        assert!(!b.shed_one(), "nothing left to shed");
    }
}
