//! The `/metrics` HTTP server the agent and the load balancer share: one
//! request per connection (scrapers open a connection per scrape anyway),
//! the body rendered by the caller at each scrape.
//!
//! Connections have a budget like the health listeners' (at most 64, the
//! longest-waiting one shed for a newcomer, 5 s per request): without a
//! cap, anyone reaching the port could hold the process's descriptors with
//! idle sockets. The budget's own counters are handed to the renderer, to
//! be reported under `listener="metrics"`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use crate::health::budget::{classify_accept_error, AcceptError, Budget, Phase, Ticket};
use crate::health::http::{parse_head, write_response, ConnHeader, Head, Response, CT_TEXT};
use crate::health::time::{http_date, unix_secs};
use crate::health::{Deadline, ListenerCounters, ListenerKind};

const MAX_HEAD: usize = 8192;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapers are few and quick.
pub const MAX_CONNECTIONS: usize = 64;

/// Serve `GET /metrics` on `listener` until the task is dropped (dropping
/// it aborts every connection). `render` makes the body from the server's
/// own connection counters.
pub async fn serve<F>(listener: TcpListener, render: F) -> std::io::Result<()>
where
    F: Fn(ListenerCounters) -> String + Send + Sync + 'static,
{
    let render = Arc::new(render);
    let port = listener.local_addr()?.port();
    let budget = Arc::new(Budget::on_tokio_clock(
        ListenerKind::Metrics,
        port,
        MAX_CONNECTIONS,
        REQUEST_TIMEOUT,
    ));
    let mut conns = JoinSet::new();
    loop {
        let (sock, peer) = tokio::select! {
            biased;
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    let kind = classify_accept_error(e.raw_os_error());
                    budget.accept_failed(kind);
                    if kind != AcceptError::ConnectionGone {
                        warn!(error = %e, "metrics accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
        };
        // `None` only when every connection is busy answering.
        let Some(ticket) = budget.admit() else {
            drop(sock);
            continue;
        };
        let id = ticket.id();
        let render = render.clone();
        let abort = conns.spawn(serve_one(sock, peer, render, budget.clone(), ticket));
        budget.attach(id, abort);
    }
}

/// One connection: a request within `REQUEST_TIMEOUT`, then the answer,
/// then close.
async fn serve_one<F>(
    mut sock: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    render: Arc<F>,
    budget: Arc<Budget>,
    ticket: Ticket,
) where
    F: Fn(ListenerCounters) -> String + Send + Sync + 'static,
{
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        loop {
            let n = sock.read(&mut buf[len..]).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(None);
            }
            if len == 0 {
                ticket.set_phase(Phase::Partial);
            }
            len += n;
            match parse_head(&buf[..len]) {
                Head::Partial if len < MAX_HEAD => continue,
                Head::Partial => return Ok(Some((431, false, false))),
                Head::Reject(r) => return Ok(Some((r.status(), false, false))),
                Head::Request(h) => {
                    let path = h.target.split('?').next().unwrap_or("");
                    let status = if path == "/metrics" { 200 } else { 404 };
                    return Ok(Some((status, h.http10, h.method != "HEAD")));
                }
            }
        }
    })
    .await;
    let (status, http10, send_body) = match read {
        Ok(Ok(Some(r))) => r,
        Err(_) => {
            ticket.timed_out(Deadline::Head);
            debug!(%peer, "metrics request timed out");
            return;
        }
        _ => {
            debug!(%peer, "metrics request dropped");
            return;
        }
    };
    ticket.set_phase(Phase::Answering);
    let body = if status == 200 {
        render(budget.counters())
    } else {
        "404 page not found\n".to_string()
    };
    let mut out = Vec::with_capacity(body.len() + 256);
    let date = http_date(unix_secs(SystemTime::now()));
    write_response(
        &mut out,
        http10,
        &Response {
            status,
            content_type: Some(if status == 200 {
                "text/plain; version=0.0.4; charset=utf-8"
            } else {
                CT_TEXT
            }),
            nosniff: true,
            weight: None,
            location: None,
            body: body.as_bytes(),
            send_body,
            conn: ConnHeader::Close,
        },
        &date,
    );
    if tokio::time::timeout(REQUEST_TIMEOUT, sock.write_all(&out))
        .await
        .is_err()
    {
        ticket.timed_out(Deadline::Write);
    }
}
