//! The server's bookkeeping of its connections: the open ones oldest first (so the oldest idle
//! one can make room at the cap), and each one's clock of when bytes last moved and since when
//! a request head has been arriving, for the header and idle timeouts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// What the server knows of one open connection.
pub(super) struct Conn {
    /// Set while a request is being answered (a bcrypt check, the response).
    pub(super) busy: Arc<AtomicBool>,
    pub(super) kill: Option<oneshot::Sender<()>>,
}

/// Open connections, oldest first (ids grow).
#[derive(Default)]
pub(super) struct Conns {
    pub(super) map: Mutex<BTreeMap<u64, Conn>>,
    pub(super) next: AtomicU64,
}

impl Conns {
    pub(super) fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Closes the oldest connection that is not answering a request (idle between requests,
    /// or still sending its head: served before or not); false when every one is busy.
    pub(super) fn evict_oldest_idle(&self) -> bool {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let victim = m
            .iter()
            .find(|(_, c)| !c.busy.load(Ordering::Relaxed) && c.kill.is_some())
            .map(|(id, _)| *id);
        match victim
            .and_then(|id| m.get_mut(&id))
            .and_then(|c| c.kill.take())
        {
            Some(k) => {
                let _ = k.send(());
                true
            }
            None => false,
        }
    }

    pub(super) fn add(&self) -> (u64, Arc<AtomicBool>, oneshot::Receiver<()>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let busy = Arc::new(AtomicBool::new(false));
        self.map.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id,
            Conn {
                busy: busy.clone(),
                kill: Some(tx),
            },
        );
        (id, busy, rx)
    }

    pub(super) fn remove(&self, id: u64) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

/// When a connection last moved bytes, and since when a request head has been arriving, in
/// milliseconds since the connection began (`NO_HEAD`: none is).
pub(super) struct Clock {
    pub(super) t0: Instant,
    pub(super) last: AtomicU64,
    pub(super) head_since: AtomicU64,
    /// Bytes the socket has accepted from this connection (written to the kernel): what a
    /// live page's stream measures its client's reading by.
    pub(super) written: AtomicU64,
    /// The connection's socket (-1 where unknown), for a stream's socket options and for
    /// ending a connection whose client stopped reading.
    pub(super) fd: i32,
}

pub(super) const NO_HEAD: u64 = u64::MAX;

impl Clock {
    pub(super) fn now(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Bytes came in: a new request's head starts here unless one already has.
    pub(super) fn read(&self) {
        let now = self.now();
        self.last.store(now, Ordering::Relaxed);
        let _ =
            self.head_since
                .compare_exchange(NO_HEAD, now, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub(super) fn wrote(&self, n: usize) {
        self.last.store(self.now(), Ordering::Relaxed);
        self.written.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Ends the connection at once, in both directions (a client that stopped reading, or
    /// whose credentials were withdrawn): hyper then fails its next write or read and drops
    /// it. The descriptor stays open until then (shutdown(2) does not close it).
    pub(super) fn cut(&self) {
        #[cfg(unix)]
        if self.fd >= 0 {
            // SAFETY: `fd` is this connection's socket, owned by its stream, which is alive
            // while the connection's tasks hold this clock; shutdown only changes its state.
            unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
        }
    }

    /// Bytes the socket accepted that the client's program has not read yet, as the kernel
    /// sees them: those not yet acknowledged (`SIOCOUTQ`), and those sitting in the client's
    /// receive buffer, which its advertised window (`tcpi_snd_wnd`, Linux 6.2 and later) shows
    /// shrinking below the largest it has advertised (`max_window`, kept by the caller).
    /// `None` where the kernel does not say (then only what the socket accepted counts).
    pub(super) fn peer_unread(&self, max_window: &mut u32) -> Option<u64> {
        #[cfg(target_os = "linux")]
        {
            if self.fd < 0 {
                return None;
            }
            // SAFETY: tcp_info is a #[repr(C)] struct of integers, valid all zero; getsockopt
            // writes at most `len` bytes into it and sets `len` to what it wrote; ioctl writes
            // one c_int. `fd` is the connection's socket, alive (see `cut`).
            let (info, len, outq) = unsafe {
                let mut info: libc::tcp_info = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
                let r = libc::getsockopt(
                    self.fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_INFO,
                    (&mut info as *mut libc::tcp_info).cast(),
                    &mut len,
                );
                let mut outq: libc::c_int = 0;
                let q = libc::ioctl(self.fd, libc::TIOCOUTQ, &mut outq);
                if r != 0 || q != 0 {
                    return None;
                }
                (info, len as usize, outq.max(0) as u64)
            };
            // The field exists only where the kernel filled that far.
            let end = std::mem::offset_of!(libc::tcp_info, tcpi_snd_wnd) + 4;
            if len < end {
                return None;
            }
            *max_window = (*max_window).max(info.tcpi_snd_wnd);
            Some(outq + u64::from(*max_window - info.tcpi_snd_wnd))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = max_window;
            None
        }
    }

    /// Limits what the kernel accepts for this connection to `bytes` of send buffer (the
    /// kernel doubles it), so that a client that does not read stops taking events soon.
    pub(super) fn limit_send_buffer(&self, bytes: i32) {
        #[cfg(unix)]
        if self.fd >= 0 {
            // SAFETY: as in `cut`; the option value is a local c_int of the size given.
            unsafe {
                libc::setsockopt(
                    self.fd,
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (&bytes as *const i32).cast(),
                    std::mem::size_of::<i32>() as libc::socklen_t,
                )
            };
        }
    }

    /// A whole request head arrived.
    pub(super) fn head_done(&self) {
        self.head_since.store(NO_HEAD, Ordering::Relaxed);
    }
}

/// A stream that tells its [`Clock`] when bytes move, for the header and idle timeouts.
pub(super) struct Watched<S> {
    pub(super) inner: S,
    pub(super) clock: Arc<Clock>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = r {
            if n > 0 {
                self.clock.wrote(n);
            }
        }
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Returns when the connection should close: a request head took longer than `header`, or
/// the connection sat silent between requests for `idle` (a request being answered is
/// neither).
pub(super) async fn timed_out(
    clock: Arc<Clock>,
    busy: Arc<AtomicBool>,
    header: Duration,
    idle: Duration,
) {
    let (header, idle) = (header.as_millis() as u64, idle.as_millis() as u64);
    loop {
        let now = clock.now();
        let head = clock.head_since.load(Ordering::Relaxed);
        let wait = if busy.load(Ordering::Relaxed) {
            250
        } else if head != NO_HEAD {
            if now.saturating_sub(head) >= header {
                return;
            }
            header - now.saturating_sub(head)
        } else {
            let silent = now.saturating_sub(clock.last.load(Ordering::Relaxed));
            if silent >= idle {
                return;
            }
            idle - silent
        };
        tokio::time::sleep(Duration::from_millis(wait.clamp(1, 250))).await;
    }
}

/// The process's open-file limit, raised to its hard limit where the soft one is lower.
pub(super) fn fd_limit() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: getrlimit/setrlimit read and write the `rlimit` struct on our stack only.
        unsafe {
            let mut r: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
                return 1024;
            }
            if r.rlim_cur < r.rlim_max {
                let mut up = r;
                up.rlim_cur = r.rlim_max.min(65536);
                if up.rlim_cur > r.rlim_cur && libc::setrlimit(libc::RLIMIT_NOFILE, &up) == 0 {
                    r = up;
                }
            }
            r.rlim_cur as u64
        }
    }
    #[cfg(not(unix))]
    {
        1024
    }
}
