//! The Linux packet I/O the relay uses: TAP devices, `AF_PACKET` sockets
//! with vnet headers, an eventfd. Each constructor acts in the calling
//! thread's network namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context, Result};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;

const SOL_PACKET: libc::c_int = 263;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL: u16 = 0x0003;

#[repr(C)]
struct IfReqFlags {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn ifname_bytes(name: &str) -> Result<[u8; 16]> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 15 || b.contains(&0) {
        bail!("bad interface name {name:?} (1 to 15 bytes)");
    }
    let mut out = [0u8; 16];
    out[..b.len()].copy_from_slice(b);
    Ok(out)
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A TAP named `name` with virtio-net headers, non-blocking. Checksum and
/// TSO offloads are on where the kernel allows: what the stack sends may
/// arrive as a super-frame with its checksum partial, and the relays pass
/// it on as it is (`sluice-lb` only rewrites MACs; the engine's relay runs
/// the program once on it). It disappears when the fd closes.
pub fn open_tap_vnet(name: &str) -> Result<OwnedFd> {
    let fd = tap(name, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)?;
    // SAFETY: an ioctl taking an integer on a fd we own.
    let r = cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            TUNSETOFFLOAD,
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6,
        )
    });
    if let Err(e) = r {
        tracing::debug!(error = %e, "TUNSETOFFLOAD");
    }
    Ok(fd)
}

fn tap(name: &str, flags: libc::c_short) -> Result<OwnedFd> {
    let mut req = IfReqFlags {
        name: ifname_bytes(name)?,
        flags,
        _pad: [0; 22],
    };
    // SAFETY: plain syscalls on a fd we own; `req` outlives the ioctl.
    unsafe {
        let fd = cvt(libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        ))
        .context("opening /dev/net/tun")?;
        let fd = OwnedFd::from_raw_fd(fd);
        cvt(libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req))
            .with_context(|| format!("creating TAP {name} (TUNSETIFF)"))?;
        Ok(fd)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: pointer and length describe a live c_int.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// An `AF_PACKET` raw socket on link `ifname`: every frame, with a vnet
/// header in front (partial checksums and GSO super-frames are described
/// rather than completed), never our own transmissions. Non-blocking.
pub fn open_packet_socket(ifname: &str) -> Result<OwnedFd> {
    let ifindex = crate::netlink::link_index(ifname)?;
    // SAFETY: plain syscalls; every pointer refers to a live local.
    unsafe {
        // Protocol 0: receive nothing until bound to the one link.
        let fd = cvt(libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))
        .context("creating AF_PACKET socket")?;
        let fd = OwnedFd::from_raw_fd(fd);
        let raw = fd.as_raw_fd();
        setsockopt_int(raw, SOL_PACKET, PACKET_VNET_HDR, 1).context("PACKET_VNET_HDR")?;
        setsockopt_int(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            .context("PACKET_IGNORE_OUTGOING")?;
        for (opt, name) in [
            (libc::SO_RCVBUFFORCE, "SO_RCVBUFFORCE"),
            (libc::SO_SNDBUFFORCE, "SO_SNDBUFFORCE"),
        ] {
            if let Err(e) = setsockopt_int(raw, libc::SOL_SOCKET, opt, 8 << 20) {
                tracing::debug!(error = %e, "{name}");
            }
        }
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        cvt(libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        ))
        .with_context(|| format!("binding AF_PACKET socket to {ifname}"))?;
        Ok(fd)
    }
}

pub fn eventfd() -> Result<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
        .context("creating eventfd")?;
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), 8);
    }
}

pub fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe {
        libc::read(fd, (&mut v as *mut u64).cast(), 8);
    }
}

/// `sll_pkttype` of a frame addressed to another host (`linux/if_packet.h`).
const PACKET_OTHERHOST: u8 = 3;

/// One frame read: its length and, for packet sockets, how the kernel
/// classified it on arrival.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub len: usize,
    /// `PACKET_OTHERHOST`: the destination MAC is another host's (the frame
    /// was flooded to this port); what a TC hook reads in `skb->pkt_type`.
    pub other_host: bool,
}

/// Non-blocking read; `Ok(None)` when nothing is queued. With `socket`
/// (packet sockets, read with `MSG_TRUNC`) the real length is returned even
/// when it exceeded `buf`, and the kernel's `sll_pkttype` is kept.
pub fn read_frame(fd: RawFd, buf: &mut [u8], socket: bool) -> io::Result<Option<Received>> {
    // SAFETY: an all-zero sockaddr_ll is valid.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: reads at most buf.len() bytes into buf; `from` is a live
    // sockaddr_ll of `from_len` bytes.
    let r = unsafe {
        if socket {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        } else {
            libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
        }
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(Received {
        len: r as usize,
        other_host: socket && from.sll_pkttype == PACKET_OTHERHOST,
    }))
}

/// Buffers and headers for reading a batch of frames from a packet socket
/// with one `recvmmsg`: at high packet rates the relay's time goes to
/// system calls, and this is one per batch instead of one per frame (and
/// a short batch tells the queue is empty, where single reads needed one
/// more that failed).
pub struct RecvBatch {
    /// One buffer per frame; the caller may swap them for others of the
    /// same length between calls.
    pub bufs: Vec<Vec<u8>>,
    /// What the last [`RecvBatch::recv`] read, in order, into `bufs[i]`.
    pub got: Vec<Received>,
    from: Vec<libc::sockaddr_ll>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl RecvBatch {
    pub fn new(frames: usize, buf_len: usize) -> Self {
        let frames = frames.max(1);
        RecvBatch {
            bufs: vec![vec![0u8; buf_len]; frames],
            got: Vec::with_capacity(frames),
            // SAFETY: all-zero sockaddr_ll, iovec and mmsghdr are valid.
            from: vec![unsafe { std::mem::zeroed() }; frames],
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                frames
            ],
            // SAFETY: `mmsghdr` is plain data; all zeroes is its empty
            // value, filled in before each call.
            msgs: vec![unsafe { std::mem::zeroed() }; frames],
        }
    }

    /// Read what is queued on packet socket `fd`, up to one frame per
    /// buffer, without blocking, each with `MSG_TRUNC` (the real length
    /// even when it exceeded its buffer) and its `sll_pkttype`; the count
    /// read (0: nothing queued).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.got.clear();
        let n = self.bufs.len();
        // The buffers may have been swapped since the last call: point at
        // them again.
        for i in 0..n {
            self.iov[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: self.bufs[i].len(),
            };
            // SAFETY: an all-zero mmsghdr is valid.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_name = (&mut self.from[i] as *mut libc::sockaddr_ll).cast();
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_hdr.msg_iov = &mut self.iov[i];
            m.msg_hdr.msg_iovlen = 1;
            self.msgs[i] = m;
        }
        // SAFETY: `msgs` holds `n` headers, each naming a live sockaddr_ll
        // and one iovec over a live buffer of its stated length, all owned
        // by `self` and unmoved during the call.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let r = (r as usize).min(n);
        for i in 0..r {
            self.got.push(Received {
                len: self.msgs[i].msg_len as usize,
                other_host: self.from[i].sll_pkttype == PACKET_OTHERHOST,
            });
        }
        Ok(r)
    }
}

/// Frames queued for one packet socket and sent with one `sendmmsg`: the
/// write side of [`RecvBatch`]. Frames are copied into one arena (only
/// small ones are queued: a super-frame's copy would cost more than the
/// call it saves).
pub struct SendBatch {
    fd: Option<RawFd>,
    arena: Vec<u8>,
    spans: Vec<(usize, usize)>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    frames: usize,
    frame_max: usize,
}

/// What a [`SendBatch::flush`] did not send, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendLoss {
    /// No room (`EAGAIN`, `ENOBUFS`): dropped as a full queue drops.
    pub dropped: usize,
    /// Other errors, with the first of them.
    pub failed: usize,
    pub errno: Option<i32>,
}

impl SendBatch {
    /// Up to `frames` frames of up to `frame_max` bytes each.
    pub fn new(frames: usize, frame_max: usize) -> Self {
        let frames = frames.max(1);
        SendBatch {
            fd: None,
            arena: Vec::with_capacity(frames * frame_max),
            spans: Vec::with_capacity(frames),
            iov: Vec::with_capacity(frames),
            msgs: Vec::with_capacity(frames),
            frames,
            frame_max,
        }
    }

    /// The largest frame [`SendBatch::queue`] takes.
    pub fn frame_max(&self) -> usize {
        self.frame_max
    }

    /// Whether a frame for `fd` would be queued behind the ones there
    /// (same socket, room left).
    pub fn fits(&self, fd: RawFd, len: usize) -> bool {
        self.fd.is_none_or(|f| f == fd) && self.spans.len() < self.frames && len <= self.frame_max()
    }

    /// Queue `frame` for `fd`; the caller flushes first unless
    /// [`SendBatch::fits`].
    pub fn queue(&mut self, fd: RawFd, frame: &[u8]) {
        self.fd = Some(fd);
        let at = self.arena.len();
        self.arena.extend_from_slice(frame);
        self.spans.push((at, frame.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Send what is queued, in order, without blocking; what could not go.
    pub fn flush(&mut self) -> SendLoss {
        let mut loss = SendLoss::default();
        let Some(fd) = self.fd.take() else {
            return loss;
        };
        self.iov.clear();
        for &(at, len) in &self.spans {
            self.iov.push(libc::iovec {
                iov_base: self.arena[at..].as_mut_ptr().cast(),
                iov_len: len,
            });
        }
        self.msgs.clear();
        for iov in self.iov.iter_mut() {
            // SAFETY: an all-zero mmsghdr is valid.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            self.msgs.push(m);
        }
        let mut sent = 0usize;
        while sent < self.msgs.len() {
            // SAFETY: `msgs[sent..]` are headers over live iovecs into
            // `arena`, none of which moves during the call.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.msgs[sent..].as_mut_ptr(),
                    (self.msgs.len() - sent) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            if r == 0 {
                // Not for a non-empty vector; never spin on it.
                loss.failed += self.msgs.len() - sent;
                loss.errno.get_or_insert(0);
                break;
            }
            // The frame at `sent` failed: count it and go on with the rest
            // (a frame too big for the link fails alone).
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => loss.dropped += 1,
                errno => {
                    loss.failed += 1;
                    loss.errno.get_or_insert(errno.unwrap_or(0));
                }
            }
            sent += 1;
        }
        self.spans.clear();
        self.arena.clear();
        loss
    }
}

/// Non-blocking write of one frame (TAP write or packet-socket send).
pub fn write_frame(fd: RawFd, frame: &[u8]) -> io::Result<()> {
    // SAFETY: writes frame.len() bytes from frame.
    let r = unsafe { libc::write(fd, frame.as_ptr().cast(), frame.len()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A datagram socket pair: `recvmmsg`/`sendmmsg` behave on it as on a
    /// packet socket (one message per frame, `MSG_TRUNC` lengths), with no
    /// link or address needed.
    fn pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: fills two fds on success.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair: {}", io::Error::last_os_error());
        // SAFETY: fresh fds we own.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_batch_goes_out_in_order_and_comes_in_by_the_buffer() {
        let (a, b) = pair();
        let mut tx = SendBatch::new(4, 100);
        assert_eq!(tx.frame_max(), 100);
        assert!(tx.is_empty());
        for (i, len) in [10usize, 100, 1].into_iter().enumerate() {
            assert!(tx.fits(a.as_raw_fd(), len));
            tx.queue(a.as_raw_fd(), &vec![i as u8 + 1; len]);
        }
        // Too big, or for another socket: flush first.
        assert!(!tx.fits(a.as_raw_fd(), 101));
        assert!(!tx.fits(b.as_raw_fd(), 1));
        assert_eq!(tx.flush(), SendLoss::default());
        assert!(tx.is_empty());

        let mut rx = RecvBatch::new(2, 64);
        assert_eq!(rx.recv(b.as_raw_fd()).expect("recv"), 2);
        assert_eq!(rx.got[0].len, 10);
        assert_eq!(&rx.bufs[0][..10], &[1u8; 10]);
        // Longer than its buffer: the real length, for the caller to drop.
        assert_eq!(rx.got[1].len, 100);
        assert_eq!(rx.recv(b.as_raw_fd()).expect("recv"), 1);
        assert_eq!((rx.got[0].len, rx.bufs[0][0]), (1, 3));
        // Nothing queued: no frame, no error, no wait.
        assert_eq!(rx.recv(b.as_raw_fd()).expect("recv"), 0);
        assert!(rx.got.is_empty());
    }

    #[test]
    fn buffers_swapped_between_reads_are_the_ones_read_into() {
        let (a, b) = pair();
        let mut rx = RecvBatch::new(1, 16);
        let mut mine = vec![0u8; 16];
        std::mem::swap(&mut mine, &mut rx.bufs[0]);
        write_frame(a.as_raw_fd(), b"swapped").expect("send");
        assert_eq!(rx.recv(b.as_raw_fd()).expect("recv"), 1);
        assert_eq!(&rx.bufs[0][..7], b"swapped");
        assert_eq!(&mine[..7], &[0u8; 7], "the old buffer is not written");
    }

    #[test]
    fn frames_that_cannot_go_are_counted_not_retried_forever() {
        let (a, b) = pair();
        drop(b);
        let mut tx = SendBatch::new(3, 8);
        for _ in 0..3 {
            tx.queue(a.as_raw_fd(), b"x");
        }
        let loss = tx.flush();
        assert_eq!(loss.dropped + loss.failed, 3, "{loss:?}");
        assert!(loss.failed == 0 || loss.errno.is_some());
        assert!(tx.is_empty());
        // A bad descriptor fails the read, it does not look empty.
        let mut rx = RecvBatch::new(1, 8);
        assert!(rx.recv(-1).is_err());
    }
}
