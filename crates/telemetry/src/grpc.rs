//! A minimal gRPC client for unary calls, by hand, over TCP or a unix socket: just enough to
//! ask the TPU runtime's metrics service (`TpuReader`) and the kubelet's pod-resources API
//! (`kubelet::list_pod_resources`) a few questions without a gRPC stack, an async runtime or a
//! protobuf compiler.
//!
//! HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3): the client preface, a SETTINGS frame, then
//! for each call one HEADERS frame (HPACK literals without indexing, no Huffman: RFC 7541 §6.2.2)
//! and one DATA frame carrying the gRPC length-prefixed message (gRPC's PROTOCOL-HTTP2.md). All
//! calls go out at once on streams 1, 3, 5..., on one connection, under one deadline. Answers
//! are read frame by frame: SETTINGS are acknowledged, PINGs answered, DATA reassembled per
//! stream, RST_STREAM / GOAWAY / END_STREAM end a stream. Header blocks are not decoded (no
//! HPACK decoder, no Huffman table): a stream that ends without a gRPC message is reported as
//! "no message" (the grpc-status in its trailers is not read).
//!
//! Everything a server sends is checked against bounds (frame size, message size, total bytes
//! read, the deadline) so a wrong or hostile peer gives an error, never a panic or a hang.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest gRPC message accepted (gRPC's own default receive limit is 4 MiB).
pub(crate) const MAX_MESSAGE: usize = 4 << 20;
/// The largest frame payload a server may send us: HTTP/2's default SETTINGS_MAX_FRAME_SIZE,
/// which we never raise.
const MAX_FRAME: usize = 16_384;
/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// Why a call brought no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// Nobody answered: the address does not resolve, the connection was refused, or the
    /// deadline passed. For the TPU runtime this is the normal state when no job runs.
    NoAnswer(String),
    /// Something answered, but not with a valid HTTP/2 / gRPC reply.
    Protocol(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NoAnswer(s) | CallError::Protocol(s) => f.write_str(s),
        }
    }
}

fn io_error(e: io::Error, what: &str) -> CallError {
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => {
            CallError::NoAnswer(format!("timed out {what}"))
        }
        ErrorKind::ConnectionRefused => CallError::NoAnswer("connection refused".to_string()),
        ErrorKind::UnexpectedEof => CallError::Protocol(format!(
            "connection closed {what} before the answer was complete"
        )),
        _ => CallError::Protocol(format!("{what}: {e}")),
    }
}

/// Where a gRPC server listens.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Endpoint<'a> {
    /// `host:port`.
    Tcp(&'a str),
    /// A unix socket (the kubelet's pod-resources API).
    #[cfg(unix)]
    Unix(&'a Path),
}

/// A connection the exchange runs over: a TCP stream or a unix socket, both with per-call
/// timeouts.
trait Conn: Read + Write {
    /// Both timeouts, to what is left of the deadline.
    fn set_timeouts(&self, left: Duration) -> io::Result<()>;
}

impl Conn for TcpStream {
    fn set_timeouts(&self, left: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(left))?;
        self.set_write_timeout(Some(left))
    }
}

#[cfg(unix)]
impl Conn for std::os::unix::net::UnixStream {
    fn set_timeouts(&self, left: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(left))?;
        self.set_write_timeout(Some(left))
    }
}

/// Makes `requests.len()` unary calls of `path` (`/package.Service/Method`) at `at`, each with
/// its serialized protobuf request, and returns each call's response message (or why that call
/// failed), in order. The whole exchange ends by `deadline`.
pub(crate) fn unary_calls(
    at: Endpoint<'_>,
    path: &str,
    requests: &[Vec<u8>],
    deadline: Instant,
) -> Result<Vec<Result<Vec<u8>, String>>, CallError> {
    match at {
        Endpoint::Tcp(addr) => {
            let mut s = connect(addr, deadline)?;
            exchange(&mut s, addr, path, requests, deadline)
        }
        #[cfg(unix)]
        Endpoint::Unix(socket) => {
            let mut s = connect_unix(socket, deadline)?;
            // gRPC's own clients send `localhost` as the authority of a unix socket.
            exchange(&mut s, "localhost", path, requests, deadline)
        }
    }
}

fn exchange(
    stream: &mut impl Conn,
    authority: &str,
    path: &str,
    requests: &[Vec<u8>],
    deadline: Instant,
) -> Result<Vec<Result<Vec<u8>, String>>, CallError> {
    let mut out = Vec::new();
    out.extend_from_slice(PREFACE);
    // Our SETTINGS: no server push, and a stream window large enough for a whole message so the
    // server never waits for a stream WINDOW_UPDATE from us.
    let window = (MAX_MESSAGE + 5 + 1024) as u32;
    let mut settings = Vec::new();
    settings.extend_from_slice(&0x2u16.to_be_bytes()); // SETTINGS_ENABLE_PUSH
    settings.extend_from_slice(&0u32.to_be_bytes());
    settings.extend_from_slice(&0x4u16.to_be_bytes()); // SETTINGS_INITIAL_WINDOW_SIZE
    settings.extend_from_slice(&window.to_be_bytes());
    frame(&mut out, SETTINGS, 0, 0, &settings);
    // The connection window (65,535 at first, RFC 9113 §6.9.2) grown to cover every answer.
    let conn = (window as u64 * requests.len().max(1) as u64).min(0x7fff_ffff - 65_535) as u32;
    frame(&mut out, 0x8, 0, 0, &conn.to_be_bytes());
    for (i, req) in requests.iter().enumerate() {
        let id = 1 + 2 * i as u32;
        let mut block = Vec::new();
        for (name, value) in [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] {
            hpack_literal(&mut block, name, value);
        }
        if block.len() > MAX_FRAME {
            return Err(CallError::Protocol("request headers too long".to_string()));
        }
        frame(&mut out, HEADERS, END_HEADERS, id, &block);
        let mut msg = Vec::with_capacity(req.len() + 5);
        msg.push(0);
        msg.extend_from_slice(&(req.len() as u32).to_be_bytes());
        msg.extend_from_slice(req);
        let chunks: Vec<&[u8]> = msg.chunks(MAX_FRAME).collect();
        for (k, chunk) in chunks.iter().enumerate() {
            let last = k + 1 == chunks.len();
            frame(&mut out, DATA, if last { END_STREAM } else { 0 }, id, chunk);
        }
    }
    write_all(stream, &out, deadline)?;
    read_answers(stream, requests.len(), deadline)
}

fn connect(addr: &str, deadline: Instant) -> Result<TcpStream, CallError> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| CallError::NoAnswer(format!("cannot resolve {addr}: {e}")))?
        .collect();
    let mut last = CallError::NoAnswer(format!("{addr} resolves to no address"));
    for a in addrs {
        let left = remaining(deadline)?;
        match TcpStream::connect_timeout(&a, left) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = io_error(e, "connecting"),
        }
    }
    Err(last)
}

/// Connects to a unix socket. `connect` on a unix socket does not wait for a listener's
/// backlog the way TCP's handshake does: it succeeds, or fails at once (no such file,
/// permission denied, nobody listening).
#[cfg(unix)]
fn connect_unix(
    socket: &Path,
    deadline: Instant,
) -> Result<std::os::unix::net::UnixStream, CallError> {
    remaining(deadline)?;
    std::os::unix::net::UnixStream::connect(socket).map_err(|e| match e.kind() {
        ErrorKind::NotFound => CallError::NoAnswer(format!("{} does not exist", socket.display())),
        ErrorKind::PermissionDenied => CallError::NoAnswer(format!(
            "permission denied on {} (the kubelet's socket is root's)",
            socket.display()
        )),
        _ => io_error(e, "connecting"),
    })
}

fn remaining(deadline: Instant) -> Result<Duration, CallError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left < Duration::from_millis(1) {
        Err(CallError::NoAnswer("timed out".to_string()))
    } else {
        Ok(left)
    }
}

fn write_all(s: &mut impl Conn, bytes: &[u8], deadline: Instant) -> Result<(), CallError> {
    s.set_timeouts(remaining(deadline)?)
        .map_err(|e| io_error(e, "sending"))?;
    s.write_all(bytes).map_err(|e| io_error(e, "sending"))
}

fn read_exact(s: &mut impl Conn, buf: &mut [u8], deadline: Instant) -> Result<(), CallError> {
    let mut got = 0;
    while got < buf.len() {
        s.set_timeouts(remaining(deadline)?)
            .map_err(|e| io_error(e, "reading"))?;
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(CallError::Protocol(
                    "the server closed the connection before the answer was complete".to_string(),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, "waiting for the answer")),
        }
    }
    Ok(())
}

/// Appends one frame: 24-bit length, type, flags, 31-bit stream id, payload.
fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1), the prefix's other bits `high`.
fn hpack_int(out: &mut Vec<u8>, high: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(high | v as u8);
        return;
    }
    out.push(high | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// "Literal Header Field without Indexing — New Name" (RFC 7541 §6.2.2), strings without
/// Huffman coding.
fn hpack_literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    hpack_int(out, 0x00, 7, name.len());
    out.extend_from_slice(name.as_bytes());
    hpack_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

#[derive(Default)]
struct StreamState {
    body: Vec<u8>,
    done: Option<Result<Vec<u8>, String>>,
}

fn read_answers(
    s: &mut impl Conn,
    calls: usize,
    deadline: Instant,
) -> Result<Vec<Result<Vec<u8>, String>>, CallError> {
    let mut streams: Vec<StreamState> = (0..calls).map(|_| StreamState::default()).collect();
    // Bound on everything read, whatever the frames: the answers plus generous room for
    // control frames.
    let budget = calls.saturating_mul(MAX_MESSAGE + 5 + MAX_FRAME) + (1 << 20);
    let mut total = 0usize;
    // The stream whose header block is being continued (CONTINUATION frames), if any.
    let mut continuing: Option<u32> = None;
    let mut head = [0u8; 9];
    let mut payload = vec![0u8; MAX_FRAME];
    let mut seen_any = false;
    while streams.iter().any(|st| st.done.is_none()) {
        match read_exact(s, &mut head, deadline) {
            Ok(()) => {}
            // A server that accepted the connection and said nothing at all: no answer.
            Err(CallError::Protocol(m)) if !seen_any => {
                return Err(CallError::Protocol(format!("not an HTTP/2 server ({m})")))
            }
            Err(e) => return Err(e),
        }
        seen_any = true;
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let (kind, flags) = (head[3], head[4]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if len > MAX_FRAME {
            return Err(CallError::Protocol(format!(
                "frame of {len} bytes, over the {MAX_FRAME}-byte limit (not an HTTP/2 server?)"
            )));
        }
        total += 9 + len;
        if total > budget {
            return Err(CallError::Protocol("the answer is too large".to_string()));
        }
        let body = &mut payload[..len];
        read_exact(s, body, deadline)?;
        if let Some(c) = continuing {
            if kind != CONTINUATION || id != c {
                return Err(CallError::Protocol(
                    "header block interrupted by another frame".to_string(),
                ));
            }
        }
        // Our streams are 1, 3, 5...: the index of stream `id`, if it is one of ours.
        let ours = if id % 2 == 1 && ((id - 1) / 2) < calls as u32 {
            Some(((id - 1) / 2) as usize)
        } else {
            None
        };
        match kind {
            DATA => {
                let data = unpad(body, flags)?;
                if let Some(i) = ours {
                    let st = &mut streams[i];
                    if st.done.is_none() {
                        st.body.extend_from_slice(data);
                        // Checked as soon as the 5-byte prefix is in, so a body never grows
                        // past one frame beyond its announced length.
                        if let Some(&[_, a, b, c, d]) = st.body.get(..5) {
                            let n = u32::from_be_bytes([a, b, c, d]) as usize;
                            if n > MAX_MESSAGE {
                                st.done = Some(Err(format!(
                                    "message of {n} bytes, over the {} MiB limit",
                                    MAX_MESSAGE >> 20
                                )));
                            } else if st.body.len() > 5 + n {
                                st.done = Some(Err(
                                    "more than one message in a unary answer".to_string()
                                ));
                            }
                        }
                    }
                }
                if flags & END_STREAM != 0 {
                    finish(&mut streams, ours);
                }
            }
            HEADERS => {
                // Header contents are not decoded; only the framing is checked.
                let _ = unpad(body, flags)?;
                if flags & END_HEADERS == 0 {
                    continuing = Some(id);
                }
                if flags & END_STREAM != 0 {
                    finish(&mut streams, ours);
                }
            }
            CONTINUATION if flags & END_HEADERS != 0 => continuing = None,
            RST_STREAM => {
                let code = if len == 4 {
                    u32::from_be_bytes([body[0], body[1], body[2], body[3]])
                } else {
                    return Err(CallError::Protocol("malformed RST_STREAM".to_string()));
                };
                if let Some(i) = ours {
                    if streams[i].done.is_none() {
                        streams[i].done = Some(Err(format!(
                            "the server reset the call (HTTP/2 error {code})"
                        )));
                    }
                }
            }
            SETTINGS => {
                if id != 0 || !len.is_multiple_of(6) {
                    return Err(CallError::Protocol("malformed SETTINGS".to_string()));
                }
                if flags & ACK == 0 {
                    let mut ack = Vec::new();
                    frame(&mut ack, SETTINGS, ACK, 0, &[]);
                    write_all(s, &ack, deadline)?;
                }
            }
            PING => {
                if id != 0 || len != 8 {
                    return Err(CallError::Protocol("malformed PING".to_string()));
                }
                if flags & ACK == 0 {
                    let mut pong = Vec::new();
                    frame(&mut pong, PING, ACK, 0, body);
                    write_all(s, &pong, deadline)?;
                }
            }
            GOAWAY => {
                if len < 8 {
                    return Err(CallError::Protocol("malformed GOAWAY".to_string()));
                }
                let last = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
                let code = u32::from_be_bytes([body[4], body[5], body[6], body[7]]);
                // Streams above `last` will not be processed (RFC 9113 §6.8).
                for (i, st) in streams.iter_mut().enumerate() {
                    if st.done.is_none() && 1 + 2 * i as u32 > last {
                        st.done = Some(Err(format!(
                            "the server closed the connection (GOAWAY, HTTP/2 error {code})"
                        )));
                    }
                }
            }
            PUSH_PROMISE => {
                return Err(CallError::Protocol(
                    "PUSH_PROMISE although push was disabled".to_string(),
                ))
            }
            // WINDOW_UPDATE (our requests are far below any window), PRIORITY, unknown types
            // (which RFC 9113 §4.1 says to ignore).
            _ => {}
        }
    }
    Ok(streams
        .into_iter()
        .map(|st| st.done.unwrap_or_else(|| Err("no answer".to_string())))
        .collect())
}

/// The end of stream `ours`: its gRPC message (a 1-byte compressed flag, a 4-byte big-endian
/// length, the message), or why there is none.
fn finish(streams: &mut [StreamState], ours: Option<usize>) {
    let Some(i) = ours else { return };
    let st = &mut streams[i];
    if st.done.is_some() {
        return;
    }
    let body = std::mem::take(&mut st.body);
    st.done = Some(grpc_message(&body));
}

fn grpc_message(body: &[u8]) -> Result<Vec<u8>, String> {
    if body.is_empty() {
        return Err("no message (the call failed; grpc-status is not decoded)".to_string());
    }
    if body.len() < 5 {
        return Err("truncated gRPC message".to_string());
    }
    if body[0] != 0 {
        return Err("compressed gRPC message (no compression was offered)".to_string());
    }
    let n = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if n > MAX_MESSAGE {
        return Err(format!("message over the {} MiB limit", MAX_MESSAGE >> 20));
    }
    match body.get(5..5 + n) {
        Some(m) => Ok(m.to_vec()),
        None => Err("truncated gRPC message".to_string()),
    }
}

/// A DATA or HEADERS payload without its padding (and, for HEADERS, the bytes of the PRIORITY
/// flag are part of the returned slice, which is never decoded).
fn unpad(body: &[u8], flags: u8) -> Result<&[u8], CallError> {
    if flags & PADDED == 0 {
        return Ok(body);
    }
    let Some((&pad, rest)) = body.split_first() else {
        return Err(CallError::Protocol("malformed padded frame".to_string()));
    };
    let pad = pad as usize;
    if pad > rest.len() {
        return Err(CallError::Protocol(
            "padding longer than the frame".to_string(),
        ));
    }
    Ok(&rest[..rest.len() - pad])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc7541() {
        // RFC 7541 C.1.1 and C.1.2: 10 and 1337 with a 5-bit prefix.
        let mut v = Vec::new();
        hpack_int(&mut v, 0, 5, 10);
        assert_eq!(v, [0x0a]);
        v.clear();
        hpack_int(&mut v, 0, 5, 1337);
        assert_eq!(v, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn grpc_message_checks_its_prefix() {
        assert!(grpc_message(&[]).is_err());
        assert!(grpc_message(&[0, 0, 0]).is_err());
        assert!(grpc_message(&[1, 0, 0, 0, 0]).is_err());
        assert!(grpc_message(&[0, 0, 0, 0, 9, 1]).is_err());
        assert!(grpc_message(&[0, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert_eq!(grpc_message(&[0, 0, 0, 0, 2, 7, 8, 9]), Ok(vec![7, 8]));
    }

    #[test]
    fn unpad_refuses_padding_past_the_end() {
        assert!(unpad(&[], PADDED).is_err());
        assert!(unpad(&[5, 1, 2], PADDED).is_err());
        assert_eq!(unpad(&[1, 7, 0], PADDED).ok(), Some(&[7u8][..]));
    }
}
