//! The "who-am-I" server pods run, and bounded clients.
//!
//! The server answers every line (TCP) or datagram (UDP) with
//! `pod=<name> peer=<ip>:<port> local=<ip>:<port>`: which pod answered, the
//! source address the pod saw, and the address it was reached on. Its sockets
//! are bound with `IP_FREEBIND` to the pod's own addresses, so it can start
//! before the agent has wired the pod. Everything is bounded in time.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::mem;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::netns::in_ns;

/// Connect timeout of the clients: long enough for ARP/ND on a fresh
/// topology, short enough to tell a reset from a drop.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client waits for an answer line or datagram.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// A server connection lives at most this long.
const MAX_CONN_LIFE: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(50);

/// One answer of the who-am-I server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub pod: String,
    /// The source the pod saw.
    pub peer: SocketAddr,
    /// The address the pod was reached on.
    pub local: SocketAddr,
}

impl FromStr for Reply {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Reply> {
        let mut pod = None;
        let mut peer = None;
        let mut local = None;
        for field in s.split_whitespace() {
            let (k, v) = field
                .split_once('=')
                .ok_or_else(|| anyhow!("bad field {field:?} in {s:?}"))?;
            match k {
                "pod" => pod = Some(v.to_string()),
                "peer" => peer = Some(v.parse().with_context(|| format!("peer in {s:?}"))?),
                "local" => local = Some(v.parse().with_context(|| format!("local in {s:?}"))?),
                _ => {}
            }
        }
        Ok(Reply {
            pod: pod.ok_or_else(|| anyhow!("no pod= in {s:?}"))?,
            peer: peer.ok_or_else(|| anyhow!("no peer= in {s:?}"))?,
            local: local.ok_or_else(|| anyhow!("no local= in {s:?}"))?,
        })
    }
}

fn format_reply(pod: &str, peer: SocketAddr, local: SocketAddr) -> String {
    format!(
        "pod={pod} peer={} local={}\n",
        canonical(peer),
        canonical(local)
    )
}

/// The most a bulk request sends or asks for, each way.
pub const MAX_BULK: usize = 64 << 20;
/// A server write blocked this long (a client that stopped reading)
/// ends the connection.
const BULK_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server sends for one request line.
struct Answer {
    /// Pattern bytes to send first (`fill=<n>`).
    fill: Option<usize>,
    line: String,
}

/// The answer to `line` (without its newline): the who-am-I line, and for
/// a bulk request (`fill=<n> <payload>`) `n` pattern bytes before it and
/// `got=<len> sum=<fnv>` of the whole request line in it, so a client can
/// tell that every byte arrived unchanged both ways.
fn answer_line(line: &[u8], pod: &str, peer: SocketAddr, local: SocketAddr) -> Answer {
    let reply = format_reply(pod, peer, local);
    let fill = line
        .strip_prefix(b"fill=")
        .map(|rest| rest.split(|b| *b == b' ').next().unwrap_or_default())
        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
        .filter(|n| *n <= MAX_BULK);
    match fill {
        None => Answer { fill, line: reply },
        Some(_) => Answer {
            fill,
            line: format!(
                "{} got={} sum={:016x}\n",
                reply.trim_end(),
                line.len(),
                fnv1a(line)
            ),
        },
    }
}

/// FNV-1a, 64 bits: enough to tell a changed byte, with no dependency.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Byte `i` of the bulk pattern: letters, never a newline.
pub fn pattern_byte(i: usize) -> u8 {
    // Period 251 (a prime): a lost or repeated segment of any usual size
    // shows as a wrong byte.
    b'!' + (i % 251 % 94) as u8
}

fn write_pattern(w: &mut impl Write, n: usize) -> io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    let mut sent = 0;
    while sent < n {
        let k = (n - sent).min(buf.len());
        for (j, b) in buf[..k].iter_mut().enumerate() {
            *b = pattern_byte(sent + j);
        }
        w.write_all(&buf[..k])?;
        sent += k;
    }
    Ok(())
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// A running who-am-I server; stops (and joins its threads) when dropped.
pub struct WhoAmI {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl WhoAmI {
    /// Serve TCP on every `ip:port` of `ips` × `tcp_ports` and UDP likewise,
    /// in namespace `ns`, answering as `pod`.
    pub fn start(
        ns: &str,
        pod: &str,
        ips: &[IpAddr],
        tcp_ports: &[u16],
        udp_ports: &[u16],
    ) -> Result<WhoAmI> {
        let ns = ns.to_string();
        Self::start_with(pod, ips, tcp_ports, udp_ports, move |addr, kind| {
            in_ns(&ns, move || freebind_socket(addr, kind))?
        })
    }

    /// The same, in the caller's own network namespace (a pod's process).
    pub fn start_here(
        pod: &str,
        ips: &[IpAddr],
        tcp_ports: &[u16],
        udp_ports: &[u16],
    ) -> Result<WhoAmI> {
        Self::start_with(pod, ips, tcp_ports, udp_ports, freebind_socket)
    }

    fn start_with(
        pod: &str,
        ips: &[IpAddr],
        tcp_ports: &[u16],
        udp_ports: &[u16],
        bind: impl Fn(SocketAddr, libc::c_int) -> Result<OwnedFd>,
    ) -> Result<WhoAmI> {
        let mut listeners = Vec::new();
        let mut udps = Vec::new();
        for &ip in ips {
            for &port in tcp_ports {
                listeners.push(TcpListener::from(bind(
                    SocketAddr::new(ip, port),
                    libc::SOCK_STREAM,
                )?));
            }
            for &port in udp_ports {
                udps.push(UdpSocket::from(bind(
                    SocketAddr::new(ip, port),
                    libc::SOCK_DGRAM,
                )?));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for l in listeners {
            l.set_nonblocking(true)?;
            let stop = stop.clone();
            let pod = pod.to_string();
            threads.push(
                thread::Builder::new()
                    .name(format!("whoami-{pod}"))
                    .spawn(move || serve_tcp(l, &pod, &stop))?,
            );
        }
        for s in udps {
            s.set_read_timeout(Some(POLL))?;
            let stop = stop.clone();
            let pod = pod.to_string();
            threads.push(
                thread::Builder::new()
                    .name(format!("whoami-u-{pod}"))
                    .spawn(move || serve_udp(s, &pod, &stop))?,
            );
        }
        Ok(WhoAmI { stop, threads })
    }
}

impl Drop for WhoAmI {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve_tcp(l: TcpListener, pod: &str, stop: &Arc<AtomicBool>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, peer)) => {
                let stop = stop.clone();
                let pod = pod.to_string();
                if let Ok(h) = thread::Builder::new()
                    .name(format!("whoami-c-{pod}"))
                    .spawn(move || serve_conn(s, peer, &pod, &stop))
                {
                    conns.push(h);
                }
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(POLL),
            Err(_) => thread::sleep(POLL),
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

fn serve_conn(s: TcpStream, peer: SocketAddr, pod: &str, stop: &AtomicBool) {
    let Ok(local) = s.local_addr() else { return };
    if s.set_nonblocking(false).is_err() || s.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let Ok(mut w) = s.try_clone() else { return };
    if w.set_write_timeout(Some(BULK_WRITE_TIMEOUT)).is_err() {
        return;
    }
    let mut r = BufReader::new(s);
    let mut line = Vec::new();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < MAX_CONN_LIFE {
        match r.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) if line.len() > MAX_BULK => return,
            Ok(_) => {
                if line.ends_with(b"\n") {
                    let answer = answer_line(&line[..line.len() - 1], pod, peer, local);
                    line.clear();
                    if let Some(n) = answer.fill {
                        if write_pattern(&mut w, n).is_err() {
                            return;
                        }
                    }
                    if w.write_all(answer.line.as_bytes()).is_err() {
                        return;
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

fn serve_udp(s: UdpSocket, pod: &str, stop: &AtomicBool) {
    let Ok(local) = s.local_addr() else { return };
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        match s.recv_from(&mut buf) {
            Ok((_, peer)) => {
                let _ = s.send_to(format_reply(pod, peer, local).as_bytes(), peer);
            }
            Err(_) => continue,
        }
    }
}

/// A socket of `ty` bound to `addr` with IP_FREEBIND (the address need not
/// exist yet), listening if it is a stream socket.
fn freebind_socket(addr: SocketAddr, ty: libc::c_int) -> Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2); the result is checked and then owned.
    let raw: RawFd = unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error()).context("socket");
    }
    // SAFETY: raw is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let one: libc::c_int = 1;
    let setopt = |level, name| -> io::Result<()> {
        // SAFETY: an int option on our socket.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                level,
                name,
                &one as *const libc::c_int as *const libc::c_void,
                mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    setopt(libc::SOL_SOCKET, libc::SO_REUSEADDR).context("SO_REUSEADDR")?;
    match addr {
        SocketAddr::V4(a) => {
            setopt(libc::SOL_IP, libc::IP_FREEBIND).context("IP_FREEBIND")?;
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: bind with a valid sockaddr_in of the right length.
            let rc = unsafe {
                libc::bind(
                    raw,
                    &sa as *const libc::sockaddr_in as *const libc::sockaddr,
                    mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error()).with_context(|| format!("bind {addr}"));
            }
        }
        SocketAddr::V6(a) => {
            setopt(libc::SOL_IPV6, libc::IPV6_V6ONLY).context("IPV6_V6ONLY")?;
            setopt(libc::SOL_IPV6, libc::IPV6_FREEBIND).context("IPV6_FREEBIND")?;
            let sa = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: bind with a valid sockaddr_in6 of the right length.
            let rc = unsafe {
                libc::bind(
                    raw,
                    &sa as *const libc::sockaddr_in6 as *const libc::sockaddr,
                    mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error()).with_context(|| format!("bind {addr}"));
            }
        }
    }
    if ty == libc::SOCK_STREAM {
        // SAFETY: listen on our bound socket.
        if unsafe { libc::listen(raw, 128) } < 0 {
            return Err(io::Error::last_os_error()).context("listen");
        }
    }
    Ok(fd)
}

// --- clients --------------------------------------------------------------

/// What a TCP request came to.
#[derive(Debug)]
pub enum TcpOutcome {
    /// Connected and answered; `peer` is the connected socket's peer address
    /// (the handshake completed with it, so it is the reply source).
    Reply { reply: Reply, peer: SocketAddr },
    /// The connect was refused: a TCP reset (ECONNREFUSED).
    Refused,
    /// No answer within the bound (connect or reply).
    TimedOut,
    /// Anything else (unreachable, reset after connect, ...).
    Failed(String),
}

impl TcpOutcome {
    pub fn reply(self) -> Result<(Reply, SocketAddr)> {
        match self {
            TcpOutcome::Reply { reply, peer } => Ok((reply, peer)),
            other => bail!("expected a reply, got {other:?}"),
        }
    }
}

fn classify(e: &io::Error) -> TcpOutcome {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => TcpOutcome::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => TcpOutcome::TimedOut,
        _ => TcpOutcome::Failed(e.to_string()),
    }
}

/// A TCP connection made from a namespace; send lines, read answers.
pub struct TcpConn {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl TcpConn {
    /// Connect from namespace `ns` to `dst`, bounded by [`CONNECT_TIMEOUT`].
    pub fn connect(ns: &str, dst: SocketAddr) -> Result<std::result::Result<TcpConn, TcpOutcome>> {
        let r = in_ns(ns, move || {
            TcpStream::connect_timeout(&dst, CONNECT_TIMEOUT)
        })?;
        let stream = match r {
            Ok(s) => s,
            Err(e) => return Ok(Err(classify(&e))),
        };
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Ok(TcpConn { stream, reader }))
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Send one line and read the answer line.
    pub fn request(&mut self) -> std::result::Result<Reply, TcpOutcome> {
        if let Err(e) = self.stream.write_all(b"who\n") {
            return Err(classify(&e));
        }
        let mut line = String::new();
        // Bound the line length: a who-am-I answer is short.
        match (&mut self.reader).take(512).read_line(&mut line) {
            Ok(0) => Err(TcpOutcome::Failed("connection closed".into())),
            Ok(_) => line
                .trim()
                .parse()
                .map_err(|e: anyhow::Error| TcpOutcome::Failed(e.to_string())),
            Err(e) => Err(classify(&e)),
        }
    }
}

impl TcpConn {
    /// One bulk request: `up` pattern bytes sent in one line, `down`
    /// pattern bytes asked back. Each is checked byte for byte (the
    /// server reports the length and hash of what it got); `Err` names
    /// the first difference or the outcome that cut it short.
    pub fn bulk(&mut self, up: usize, down: usize) -> std::result::Result<Reply, TcpOutcome> {
        let fail = |what: String| TcpOutcome::Failed(what);
        let mut line = format!("fill={down} ").into_bytes();
        let head = line.len();
        line.extend((0..up).map(pattern_byte));
        let (len, sum) = (line.len(), fnv1a(&line));
        line.push(b'\n');
        if let Err(e) = self.stream.write_all(&line) {
            return Err(classify(&e));
        }
        let mut got = vec![0u8; down];
        if let Err(e) = self.reader.read_exact(&mut got) {
            return Err(classify(&e));
        }
        if let Some(i) = (0..down).find(|i| got[*i] != pattern_byte(*i)) {
            return Err(fail(format!(
                "byte {i} of {down} sent back differs: {:#04x}, not {:#04x}",
                got[i],
                pattern_byte(i)
            )));
        }
        let mut answer = String::new();
        match (&mut self.reader).take(512).read_line(&mut answer) {
            Ok(0) => return Err(fail("connection closed".into())),
            Ok(_) => {}
            Err(e) => return Err(classify(&e)),
        }
        let want = format!("got={len} sum={sum:016x}");
        if !answer.contains(&want) {
            return Err(fail(format!(
                "the pod got other bytes than the {} sent ({} of header): {:?}, want {want}",
                len - head,
                head,
                answer.trim()
            )));
        }
        answer
            .trim()
            .parse()
            .map_err(|e: anyhow::Error| TcpOutcome::Failed(e.to_string()))
    }
}

/// Connect from `ns` to `dst`, ask once, close.
pub fn tcp_request(ns: &str, dst: SocketAddr) -> Result<TcpOutcome> {
    let mut c = match TcpConn::connect(ns, dst)? {
        Ok(c) => c,
        Err(o) => return Ok(o),
    };
    let peer = c.peer_addr()?;
    Ok(match c.request() {
        Ok(reply) => TcpOutcome::Reply { reply, peer },
        Err(o) => o,
    })
}

/// What a UDP request came to.
#[derive(Debug)]
pub enum UdpOutcome {
    /// Answered; the socket is connected to `dst`, so the answer came from it.
    Reply {
        reply: Reply,
        peer: SocketAddr,
    },
    /// ICMP port unreachable came back (ECONNREFUSED on the connected socket).
    Refused,
    TimedOut,
    Failed(String),
}

/// From `ns`, send a datagram to `dst` on a connected UDP socket and wait for
/// an answer; up to `tries` sends, each waiting [`REPLY_TIMEOUT`].
pub fn udp_request(ns: &str, dst: SocketAddr, tries: usize) -> Result<UdpOutcome> {
    let bind: SocketAddr = if dst.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let sock = in_ns(ns, move || -> io::Result<UdpSocket> {
        let s = UdpSocket::bind(bind)?;
        s.connect(dst)?;
        Ok(s)
    })??;
    sock.set_read_timeout(Some(REPLY_TIMEOUT))?;
    let peer = sock.peer_addr()?;
    let mut buf = [0u8; 2048];
    for _ in 0..tries.max(1) {
        if let Err(e) = sock.send(b"who\n") {
            if e.kind() == io::ErrorKind::ConnectionRefused {
                return Ok(UdpOutcome::Refused);
            }
            return Ok(UdpOutcome::Failed(e.to_string()));
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                return Ok(match text.trim().parse() {
                    Ok(reply) => UdpOutcome::Reply { reply, peer },
                    Err(e) => UdpOutcome::Failed(format!("{e}")),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Ok(UdpOutcome::Refused)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Ok(UdpOutcome::Failed(e.to_string())),
        }
    }
    Ok(UdpOutcome::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_round_trips() {
        let s = format_reply(
            "web-1",
            "[::ffff:198.18.0.2]:4000".parse().unwrap(),
            "[fd00:19:1::10]:8080".parse().unwrap(),
        );
        let r: Reply = s.trim().parse().unwrap();
        assert_eq!(r.pod, "web-1");
        assert_eq!(r.peer, "198.18.0.2:4000".parse().unwrap());
        assert_eq!(r.local, "[fd00:19:1::10]:8080".parse().unwrap());
    }
}
