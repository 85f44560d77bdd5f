//! The exporter's HTTP server: hyper 1 on tokio, with the limits a server on a fleet's network
//! needs, so slow, oversized or hostile clients cannot stop it.
//!
//! - A request's head must arrive within `header_timeout` (10 s, from its first byte, or from
//!   the connection's start for the first request) and stay under `MAX_HEADER_BYTES` (larger:
//!   431); a keep-alive connection silent between requests is closed after `idle_timeout`
//!   (2 min), as Go's `ReadHeaderTimeout` and `IdleTimeout` do for node_exporter.
//! - At most `max_requests` (40, node_exporter's `--web.max-requests`) requests are served at
//!   once; more get 503. A live page's `/events` stream holds no request slot: streams have
//!   their own cap, half of `max_requests` and at least one ([`stream_cap`]), so open pages
//!   never leave a scrape without a slot (even at `--web.max-requests 1`). A stream whose
//!   client stopped reading is ended after [`MAX_UNREAD`] events its socket did not take.
//! - Connections are capped below the file-descriptor limit with a reserve. At the cap, the
//!   oldest connection not in the middle of a request is closed to make room (served before or
//!   not), so neither half-open connections nor a crowd of keep-alive scrapers can keep a new
//!   scraper out. Running out of descriptors slows accepting down; it never ends the accept
//!   loop (tiny_http's did, for good).
//! - TLS (rustls, ring) and basic authentication from the web config file. bcrypt checks run
//!   on a blocking pool of [`AUTH_THREADS`] threads with a queue of [`AUTH_QUEUE`]: a full queue
//!   answers 503 at once, and the server's own threads never wait on a hash.
//! - SIGTERM or SIGINT: stop accepting, let requests in flight finish (at most 3 s), exit 0,
//!   whatever a bcrypt check is doing.
//!
//! A request never waits on a collection: it copies the latest rendered text.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch, Semaphore};

use super::conns::{timed_out, Clock, Conns, Watched};
use super::webconfig::Live;

/// The largest request head accepted (request line and headers together).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Descriptors kept free for everything else the process opens (sysfs, procfs, NVML).
const FD_RESERVE: u64 = 64;
/// Threads that run bcrypt checks.
pub const AUTH_THREADS: usize = 2;
/// bcrypt checks running or waiting at once; one more is answered 503 at once.
pub const AUTH_QUEUE: usize = 8;
/// How long requests in flight may finish after SIGTERM.
const DRAIN: Duration = Duration::from_secs(3);

/// What the collector publishes and every request reads.
pub struct Published {
    /// OpenMetrics text (ends with `# EOF`); empty for the fleet's page, which has none.
    pub openmetrics: Bytes,
    /// The classic text format 0.0.4 (the same, without `# EOF`).
    pub text: Bytes,
    /// `accel monitor --json`'s document for the same sample (the fleet's round, for the
    /// fleet's page).
    pub snapshot: Bytes,
    /// `/healthz`'s text.
    pub health: String,
    /// When it was collected.
    pub at: Instant,
    /// The live page's body (`live::History::page`), rendered only while a page is open.
    pub page: Bytes,
    /// This collection's number.
    pub seq: u64,
    /// The machine's name.
    pub host: String,
}

/// What every answer's body is: one buffer, or the live page's stream of events.
type Body = BoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// Marks a response whose body streams on after `respond` returns (`/events`): its
/// connection stays busy until the stream ends.
#[derive(Clone, Copy)]
struct Streaming;

/// The body of `/events`: the events a task sends, until it stops (the server stops, the
/// client is gone or does not read).
struct Events(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// The server's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time for a request's head to arrive.
    pub header_timeout: Duration,
    /// Time an open connection may stay silent.
    pub idle_timeout: Duration,
    /// Requests served at once (more: 503).
    pub max_requests: usize,
    /// Open connections at once (more: the oldest not in a request is closed).
    pub max_connections: usize,
    /// A collection older than this makes `/healthz` 503.
    pub stale_after: Duration,
    /// Host names a request's Host header may name, lower case, without port or brackets
    /// (empty: any). Others get 421 (DNS rebinding).
    pub allowed_hosts: Vec<String>,
}

impl Limits {
    /// The defaults, with the connection cap below this process's descriptor limit.
    pub fn for_this_process(stale_after: Duration) -> Limits {
        let fds = super::conns::fd_limit();
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_requests: 40,
            max_connections: fds.saturating_sub(FD_RESERVE).clamp(16, 10_000) as usize,
            stale_after,
            allowed_hosts: Vec::new(),
        }
    }
}

struct App {
    latest: Arc<RwLock<Published>>,
    /// The web config in force (TLS, users, headers, rate limit), reloaded on change.
    web: Arc<Live>,
    /// Places for bcrypt checks, running or queued.
    auth_slots: Arc<Semaphore>,
    /// `rate_limit`'s token bucket: tokens, and when it was last filled.
    bucket: Mutex<(f64, Instant)>,
    requests: Arc<Semaphore>,
    /// Slots `/events` streams may take, [`stream_cap`] of them.
    streams: Arc<Semaphore>,
    limits: Limits,
    /// Open live pages (the collector renders the page only while there is one).
    watchers: super::live::Watchers,
    /// Set when the server stops: the live pages' streams end.
    stop: watch::Receiver<bool>,
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Whether the scraper asks for OpenMetrics (Prometheus sends
/// `application/openmetrics-text;version=1.0.0,...;q=0.5,text/plain;version=0.0.4;q=0.4,...`):
/// yes when an openmetrics entry has a q above every text/plain entry's.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(a) = accept else { return false };
    let (mut om, mut plain) = (-1.0f64, -1.0f64);
    for entry in a.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let kind = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .find_map(|p| p.strip_prefix("q="))
            .and_then(|q| q.parse::<f64>().ok())
            .unwrap_or(1.0);
        if kind == "application/openmetrics-text" {
            om = om.max(q);
        } else if kind == "text/plain" || kind == "*/*" {
            plain = plain.max(q);
        }
    }
    om > 0.0 && om >= plain
}

impl App {
    /// Whether the request's credentials are good, the bcrypt check (when one is needed) run on
    /// the blocking pool; `Err` with the answer when it cannot be checked now.
    async fn authorized(
        &self,
        req: &Request<Incoming>,
        web: &super::webconfig::WebConfig,
    ) -> Result<bool, Response<Body>> {
        use super::webconfig::Check;
        let Some(auth) = &web.auth else {
            return Ok(true);
        };
        let verify = match auth.check(req.headers().get(AUTHORIZATION).map(|v| v.as_bytes())) {
            Check::Done(ok) => return Ok(ok),
            Check::Verify(v) => v,
        };
        let Ok(slot) = self.auth_slots.clone().try_acquire_owned() else {
            return Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many password checks at once; try again\n",
            ));
        };
        let auth = auth.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            verify.run(&auth)
        });
        Ok(checked.await.unwrap_or(false))
    }

    /// `rate_limit`: whether a request may go now (a token bucket of `burst` tokens, one
    /// more every `interval`).
    fn within_rate(&self, rate: Option<(Duration, u32)>) -> bool {
        let Some((interval, burst)) = rate else {
            return true;
        };
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.1).as_secs_f64() / interval.as_secs_f64();
        b.0 = (b.0 + refill).min(f64::from(burst));
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }

    /// The answer, with the web config's headers.
    async fn respond(&self, req: Request<Incoming>, busy: &Arc<AtomicBool>) -> Response<Body> {
        let web = self.web.get();
        let mut r = self.answer(req, &web, busy).await;
        for (k, v) in &web.headers {
            r.headers_mut().insert(k.clone(), v.clone());
        }
        r
    }

    async fn answer(
        &self,
        req: Request<Incoming>,
        web: &super::webconfig::WebConfig,
        busy: &Arc<AtomicBool>,
    ) -> Response<Body> {
        if !host_allowed(&self.limits.allowed_hosts, &req) {
            return text(
                StatusCode::MISDIRECTED_REQUEST,
                "this server answers only the hosts --web.allowed-hosts names\n",
            );
        }
        let Ok(permit) = self.requests.clone().try_acquire_owned() else {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many requests at once; try again\n",
            );
        };
        if !self.within_rate(web.rate) {
            return text(
                StatusCode::TOO_MANY_REQUESTS,
                "rate limit reached; try again\n",
            );
        }
        match self.authorized(&req, web).await {
            Ok(true) => {}
            Ok(false) => {
                self.web
                    .status
                    .auth_failures
                    .fetch_add(1, Ordering::Relaxed);
                let mut r = text(StatusCode::UNAUTHORIZED, "unauthorized\n");
                r.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"accel\""),
                );
                return r;
            }
            Err(busy) => return busy,
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let l = self.latest.read().unwrap_or_else(|e| e.into_inner());
        match req.uri().path() {
            "/metrics" if l.openmetrics.is_empty() => text(
                StatusCode::NOT_FOUND,
                "not found: the fleet view has no metrics of its own; scrape each machine's accel serve\n",
            ),
            "/metrics" => {
                let om = wants_openmetrics(req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()));
                let (body, ctype) = if om {
                    (
                        l.openmetrics.clone(),
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )
                } else {
                    (l.text.clone(), "text/plain; version=0.0.4; charset=utf-8")
                };
                let mut r = Response::new(full(body));
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
                r
            }
            "/snapshot" => {
                let mut r = Response::new(full(l.snapshot.clone()));
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r
            }
            "/healthz" | "/-/healthy" | "/-/ready" => {
                let age = l.at.elapsed();
                if age < self.limits.stale_after {
                    text(StatusCode::OK, l.health.clone())
                } else {
                    text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "stale: the last collection was {:.0} s ago\n",
                            age.as_secs_f64()
                        ),
                    )
                }
            }
            "/" => {
                let body = if l.page.is_empty() {
                    // No page open yet: the current snapshot, without lines.
                    accelkit_report::render(&String::from_utf8_lossy(&l.snapshot), "monitor")
                        .unwrap_or_default()
                } else {
                    String::from_utf8_lossy(&l.page).into_owned()
                };
                let also = if l.openmetrics.is_empty() {
                    "/snapshot, /healthz"
                } else {
                    "/metrics, /snapshot, /healthz"
                };
                let mut r = Response::new(full(super::live::page(&l.host, &body, also)));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                );
                r
            }
            "/events" => {
                drop(l);
                // A stream does not hold a request slot (with --web.max-requests 1 a page
                // once kept every scrape out): streams have their own cap.
                drop(permit);
                let Ok(stream) = self.streams.clone().try_acquire_owned() else {
                    return text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "too many live pages open ({}, half of --web.max-requests); close one\n",
                            stream_cap(self.limits.max_requests)
                        ),
                    );
                };
                let clock = req.extensions().get::<Arc<Clock>>().cloned();
                let credentials = req
                    .headers()
                    .get(AUTHORIZATION)
                    .map(|v| v.as_bytes().to_vec());
                self.events(stream, busy, clock, credentials)
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    /// `/events`: after every collection, the live page's new body as one server-sent event.
    /// The stream takes one of the streams' slots ([`stream_cap`]) and keeps its connection
    /// busy; it ends when the server stops, when its client has not read more than
    /// [`MAX_UNREAD`] events (the bytes its socket accepted, with a send buffer of
    /// [`STREAM_SEND_BUFFER`], less what `Clock::peer_unread` says the client has not read;
    /// before, a client that never read kept its slot for minutes while the kernels' buffers
    /// filled), or when the web config changes and its credentials no longer pass.
    fn events(
        &self,
        permit: tokio::sync::OwnedSemaphorePermit,
        busy: &Arc<AtomicBool>,
        clock: Option<Arc<Clock>>,
        credentials: Option<Vec<u8>>,
    ) -> Response<Body> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(EVENTS_QUEUE);
        let (latest, watching, mut stop) =
            (self.latest.clone(), self.watchers.join(), self.stop.clone());
        let busy = busy.clone();
        let web = self.web.clone();
        if let Some(c) = &clock {
            c.limit_send_buffer(STREAM_SEND_BUFFER);
        }
        tokio::spawn(async move {
            let (_permit, _watching) = (permit, watching);
            let mut seen = 0;
            // Where each event sent ends, in bytes of the stream, and the connection's count
            // of accepted bytes when the stream began.
            let base = clock
                .as_ref()
                .map_or(0, |c| c.written.load(Ordering::Relaxed));
            let mut sent: u64 = 0;
            let mut ends: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
            let mut config = web.get();
            let mut max_window = 0u32;
            let mut ended = false;
            // The first event at once (rendered here if the collector has not yet), then one
            // per collection.
            loop {
                let next = {
                    let l = latest.read().unwrap_or_else(|e| e.into_inner());
                    (l.seq != seen).then(|| {
                        seen = l.seq;
                        if l.page.is_empty() {
                            accelkit_report::render(
                                &String::from_utf8_lossy(&l.snapshot),
                                "monitor",
                            )
                            .unwrap_or_default()
                        } else {
                            String::from_utf8_lossy(&l.page).into_owned()
                        }
                    })
                };
                if let Some(html) = next {
                    let ev = super::live::event(&html);
                    sent += ev.len() as u64;
                    ends.push_back(sent);
                    if tx.try_send(ev).is_err() {
                        ended = true;
                        break;
                    }
                }
                if let Some(c) = &clock {
                    // What the client has read: what its socket took, less what the kernel
                    // says is still unacknowledged or waiting in the client's buffer.
                    let taken = c.written.load(Ordering::Relaxed).saturating_sub(base);
                    let taken = taken.saturating_sub(c.peer_unread(&mut max_window).unwrap_or(0));
                    while ends.front().is_some_and(|&e| e <= taken) {
                        ends.pop_front();
                    }
                    if ends.len() > MAX_UNREAD {
                        ended = true;
                        break;
                    }
                }
                // A new web config: the stream's credentials must still pass.
                let now = web.get();
                if !Arc::ptr_eq(&now, &config) {
                    config = now;
                    if !still_authorized(&config, credentials.as_deref()).await {
                        ended = true;
                        break;
                    }
                }
                if *stop.borrow() {
                    break;
                }
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
            }
            if ended {
                // The client does not read, or may no longer: the connection goes with the
                // stream, not after its idle timeout.
                if let Some(c) = &clock {
                    c.cut();
                }
            }
            busy.store(false, Ordering::Relaxed);
        });
        let mut r = Response::new(Events(rx).boxed());
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(
            hyper::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
        r.extensions_mut().insert(Streaming);
        r
    }
}

/// Whether the request's Host header (or its URI's authority) names an allowed host: the
/// name without its port, IPv6 brackets removed, compared without case. Any host when the
/// list is empty.
fn host_allowed(allowed: &[String], req: &Request<Incoming>) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let Some(host) = host else { return false };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// Whether `credentials` (a request's `Authorization` header) pass `web`'s users; the bcrypt
/// check, when one is needed, on the blocking pool.
async fn still_authorized(web: &super::webconfig::WebConfig, credentials: Option<&[u8]>) -> bool {
    use super::webconfig::Check;
    let Some(auth) = &web.auth else {
        return true;
    };
    match auth.check(credentials) {
        Check::Done(ok) => ok,
        Check::Verify(v) => {
            let auth = auth.clone();
            tokio::task::spawn_blocking(move || v.run(&auth))
                .await
                .unwrap_or(false)
        }
    }
}

/// Events a live page's client may leave unread (sent, and not accepted by its socket or
/// still waiting in the client's kernel) before its stream is ended.
pub const MAX_UNREAD: usize = 8;

/// A live page's socket send buffer (the kernel doubles it): what the kernel takes for a
/// client that does not read, where its window cannot be seen (before Linux 6.2).
const STREAM_SEND_BUFFER: i32 = 8 * 1024;

/// Events a live page's stream may have waiting in accel (not yet handed to hyper) before it
/// is ended.
const EVENTS_QUEUE: usize = 4;

/// How many live pages' streams may be open at once: half of `max_requests` (at least one),
/// beside the request slots.
pub fn stream_cap(max_requests: usize) -> usize {
    (max_requests / 2).max(1)
}

/// Serves until SIGTERM or SIGINT. `auth_failures` counts requests refused for their
/// credentials.
pub fn serve(
    listener: std::net::TcpListener,
    latest: Arc<RwLock<Published>>,
    web: Arc<Live>,
    limits: Limits,
    watchers: super::live::Watchers,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(AUTH_THREADS)
        .thread_name("accel-http")
        .enable_all()
        .build()?;
    let r = rt.block_on(run(listener, latest, web, limits, watchers));
    // A bcrypt check still running is not waited for: the process is ending.
    rt.shutdown_timeout(Duration::from_millis(500));
    r
}

async fn run(
    listener: std::net::TcpListener,
    latest: Arc<RwLock<Published>>,
    web: Arc<Live>,
    limits: Limits,
    watchers: super::live::Watchers,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let app = Arc::new(App {
        latest,
        web: web.clone(),
        auth_slots: Arc::new(Semaphore::new(AUTH_QUEUE)),
        bucket: Mutex::new((f64::from(u32::MAX), Instant::now())),
        requests: Arc::new(Semaphore::new(limits.max_requests)),
        streams: Arc::new(Semaphore::new(stream_cap(limits.max_requests))),
        limits: limits.clone(),
        watchers,
        stop: stop_rx.clone(),
    });
    let conns = Arc::new(Conns::default());
    let mut stop = std::pin::pin!(stop_signal());
    reload_on_sighup(web.clone());
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors (EMFILE, ENFILE) or memory: make room if a half-open
                // connection can go, and slow down; never leave the loop.
                let room = conns.evict_oldest_idle();
                let pause = if room { 5 } else { 50 };
                if !matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                    eprintln!("accel serve: accept: {e}");
                }
                tokio::time::sleep(Duration::from_millis(pause)).await;
                continue;
            }
        };
        if conns.len() >= limits.max_connections && !conns.evict_oldest_idle() {
            // Every connection is in the middle of a request: this one waits its turn by
            // being refused (closed) now.
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let (id, busy, kill) = conns.add();
        let conns = conns.clone();
        let app = app.clone();
        // The TLS configuration in force now: a renewed certificate serves the next handshake.
        let tls = web.get().tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let stop_rx = stop_rx.clone();
        tokio::spawn(async move {
            connection(stream, tls, app, busy, kill, stop_rx).await;
            conns.remove(id);
        });
    }
    // Graceful shutdown: no new connections; those open finish their request (DRAIN at most).
    drop(listener);
    let _ = stop_tx.send(true);
    let t0 = Instant::now();
    while conns.len() > 0 && t0.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// SIGHUP loads the web config again (node_exporter's habit; without a handler it ended the
/// process).
fn reload_on_sighup(web: Arc<Live>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    web.reload_now.store(true, Ordering::Relaxed);
                }
            });
        }
    }
    #[cfg(not(unix))]
    let _ = web;
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut t), Ok(mut i)) => {
                tokio::select! {
                    _ = t.recv() => {}
                    _ = i.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Arc<App>,
    busy: Arc<AtomicBool>,
    mut kill: oneshot::Receiver<()>,
    mut stop: watch::Receiver<bool>,
) {
    // The first request's head is timed from the connection's start.
    #[cfg(unix)]
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    #[cfg(not(unix))]
    let fd = -1;
    let clock = Arc::new(Clock {
        t0: Instant::now(),
        last: AtomicU64::new(0),
        head_since: AtomicU64::new(0),
        written: AtomicU64::new(0),
        fd,
    });
    let io = Watched {
        inner: stream,
        clock: clock.clone(),
    };
    let header_timeout = app.limits.header_timeout;
    match tls {
        None => http(io, app, busy, &mut kill, &mut stop, clock).await,
        Some(acceptor) => {
            // The handshake counts as sending the request head: it gets the same time.
            let hs = tokio::select! {
                r = tokio::time::timeout(header_timeout, acceptor.accept(io)) => r,
                _ = &mut kill => return,
            };
            if let Ok(Ok(s)) = hs {
                http(s, app, busy, &mut kill, &mut stop, clock).await
            }
        }
    }
}

async fn http<S>(
    io: S,
    app: Arc<App>,
    busy: Arc<AtomicBool>,
    kill: &mut oneshot::Receiver<()>,
    stop: &mut watch::Receiver<bool>,
    clock: Arc<Clock>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (header, idle) = (app.limits.header_timeout, app.limits.idle_timeout);
    let svc = {
        let (busy, clock) = (busy.clone(), clock.clone());
        hyper::service::service_fn(move |mut req: Request<Incoming>| {
            clock.head_done();
            // A live page's stream reads its connection's clock (bytes the socket took).
            req.extensions_mut().insert(clock.clone());
            busy.store(true, Ordering::Relaxed);
            let (app, busy) = (app.clone(), busy.clone());
            async move {
                let r = app.respond(req, &busy).await;
                // A stream's task marks its connection idle when it ends.
                if r.extensions().get::<Streaming>().is_none() {
                    busy.store(false, Ordering::Relaxed);
                }
                Ok::<_, Infallible>(r)
            }
        })
    };
    // hyper's own header timer is not used: it also runs while a keep-alive connection waits
    // for its next request, which made the idle timeout the header timeout (10 s).
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .max_buf_size(64 * 1024)
        .max_headers(100)
        .keep_alive(true);
    builder.max_header_size(MAX_HEADER_BYTES);
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = kill => {}
        _ = timed_out(clock, busy, header, idle) => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        // Prometheus 2.x/3.x's scrape Accept header.
        let prom = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(wants_openmetrics(Some(prom)));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some(
            "text/plain;q=0.9,application/openmetrics-text;q=0.5"
        )));
        assert!(wants_openmetrics(Some("application/openmetrics-text")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
    }
}
