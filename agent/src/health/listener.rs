//! Listeners and connections: binding the sockets, accepting within each
//! listener's [`Budget`], and the per-connection loop (read a head within
//! its deadline, answer through [`super::requests`], write, keep alive).
//!
//! Defences, because any host on the network can reach these ports: a
//! budget per listener that sheds the longest-waiting connection when full
//! ([`super::budget`]), a bounded request head (431), a short deadline for
//! every head (the first one counted from the accept, so a socket that sends
//! nothing is cut as early as a slow one), an idle deadline between
//! keep-alive requests, a write deadline, every framing error answered 400
//! and closed, and an accept loop that backs off rather than spin when
//! descriptors run out.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::budget::{
    accept_backoff, classify_accept_error, AcceptError, Budget, Deadline, Phase, Ticket,
};
use super::http::Reject;
use super::requests::{handle_one, write_reject, Shared, Site};

/// A listening socket; `[::]` is made dual-stack explicitly (not left to the
/// `bindv6only` sysctl) and falls back to `0.0.0.0` where IPv6 is off.
pub(super) fn bind_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    match bind_one(addr) {
        Err(e) if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) && ipv6_unavailable(&e) => {
            debug!(error = %e, "IPv6 unavailable; health server on 0.0.0.0 only");
            bind_one(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                addr.port(),
            ))
        }
        r => r,
    }
}

fn ipv6_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL) | Some(libc::EPROTONOSUPPORT)
    )
}

fn bind_one(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
        s.set_only_v6(false)?;
    }
    // Restarting agent: sockets of the old one in TIME_WAIT must not block.
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

pub(super) async fn accept_loop(
    std_listener: std::net::TcpListener,
    site: Site,
    sh: Arc<Shared>,
    budget: Arc<Budget>,
    done: mpsc::Sender<()>,
) {
    // Declared first so it drops last: its disconnect tells `set_services`
    // the listener is closed.
    let _done = done;
    let listener = match TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            warn!(error = %e, "health listener unusable");
            return;
        }
    };
    // Dropping the set (task aborted) aborts every connection of this server.
    let mut conns = JoinSet::new();
    // Consecutive back-offs, reset by the next accept that succeeds.
    let mut failures = 0u32;
    loop {
        tokio::select! {
            biased;
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    failures = 0;
                    // A full budget drops its longest-waiting connection;
                    // `None` only when all are busy answering.
                    let Some(ticket) = budget.admit() else {
                        drop(stream);
                        continue;
                    };
                    let id = ticket.id();
                    let abort = conns.spawn(serve_conn(stream, site.clone(), sh.clone(), ticket));
                    budget.attach(id, abort);
                }
                Err(e) => {
                    let kind = classify_accept_error(e.raw_os_error());
                    budget.accept_failed(kind);
                    if kind == AcceptError::ConnectionGone {
                        continue;
                    }
                    // The pending connection stays queued and the listener
                    // readable: retrying at once would spin. Out of
                    // descriptors, the longest-waiting connection of this
                    // listener gives its own back: its socket closes when
                    // the runtime drops its aborted task, which yielding
                    // lets it do, and the next accept can succeed. With
                    // nobody to shed (or another error), pause, longer each
                    // time, so a lasting shortage costs a few wake-ups a
                    // second rather than a core.
                    if kind == AcceptError::Descriptors && budget.shed_one() {
                        debug!(error = %e, "accept failed; shed a connection");
                        tokio::task::yield_now().await;
                        continue;
                    }
                    debug!(error = %e, "accept failed; backing off");
                    tokio::time::sleep(accept_backoff(failures)).await;
                    failures = failures.saturating_add(1);
                }
            },
        }
    }
}

enum Step {
    /// Keep reading.
    More,
    /// Flush and close.
    Close,
}

async fn serve_conn(mut stream: TcpStream, site: Site, sh: Arc<Shared>, ticket: Ticket) {
    let _ = stream.set_nodelay(true);
    let limits = sh.limits.clone();
    let mut buf = vec![0u8; limits.max_head_bytes.max(256)];
    let mut filled = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    let mut body: Vec<u8> = Vec::with_capacity(512);
    // Request-body bytes still to read and drop.
    let mut discard: u64 = 0;
    // Deadline of the request being received; `None` while idle between
    // keep-alive requests. The first request's runs from the accept: a
    // checker sends it at once, so a socket that sends nothing is cut as
    // early as one that sends slowly.
    let mut req_deadline: Option<Instant> = Some(Instant::now() + limits.request_timeout);

    loop {
        // Answer everything complete in the buffer (pipelined requests too).
        let mut step = Step::More;
        while filled > 0 && discard == 0 {
            match handle_one(&sh, &site, &limits, &buf[..filled], &mut body, &mut out) {
                None => break,
                Some((consumed, close, rest_of_body)) => {
                    let consumed = consumed.min(filled);
                    buf.copy_within(consumed..filled, 0);
                    filled -= consumed;
                    discard = rest_of_body;
                    req_deadline = (filled > 0 || discard > 0)
                        .then(|| Instant::now() + limits.request_timeout);
                    if close {
                        step = Step::Close;
                        break;
                    }
                }
            }
        }
        if !out.is_empty() {
            ticket.set_phase(Phase::Answering);
            match tokio::time::timeout(limits.write_timeout, stream.write_all(&out)).await {
                Ok(Ok(())) => out.clear(),
                Ok(Err(_)) => return,
                Err(_) => {
                    ticket.timed_out(Deadline::Write);
                    return;
                }
            }
        }
        // Waiting for (the rest of) a request from here on: the answer, if
        // any, is with the kernel.
        let waiting = if filled > 0 || discard > 0 {
            Phase::Partial
        } else {
            Phase::Idle
        };
        ticket.set_phase(waiting);
        if let Step::Close = step {
            close_gracefully(stream).await;
            return;
        }
        if filled == buf.len() {
            // A head that does not fit is refused whole.
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(&mut out, Reject::HeadersTooLarge, &sh);
            let _ = tokio::time::timeout(limits.write_timeout, stream.write_all(&out)).await;
            close_gracefully(stream).await;
            return;
        }
        let until = req_deadline.unwrap_or_else(|| Instant::now() + limits.idle_timeout);
        let n = match tokio::time::timeout_at(until, stream.read(&mut buf[filled..])).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
            Err(_) => {
                ticket.timed_out(if req_deadline.is_some() {
                    Deadline::Head
                } else {
                    Deadline::Idle
                });
                debug!("health connection timed out");
                return;
            }
        };
        if req_deadline.is_none() {
            req_deadline = Some(Instant::now() + limits.request_timeout);
        }
        if discard > 0 {
            let drop_now = (discard.min(n as u64)) as usize;
            discard -= drop_now as u64;
            buf.copy_within(filled + drop_now..filled + n, filled);
            filled += n - drop_now;
            if discard == 0 && filled == 0 {
                req_deadline = None;
            }
        } else {
            filled += n;
        }
    }
}

/// Half-close, then drain briefly so unread request bytes don't turn the
/// close into a reset that destroys the answer on its way (Go does the same).
async fn close_gracefully(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let until = Instant::now() + Duration::from_millis(500);
    let mut total = 0usize;
    while total < 256 * 1024 {
        match tokio::time::timeout_at(until, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
        }
    }
}
