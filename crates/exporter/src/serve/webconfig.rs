//! Prometheus's web configuration file (`--web.config.file`), as exporter-toolkit reads it for
//! node_exporter and every exporter built on it: TLS (`tls_server_config`, built by `tls::server_config`),
//! basic authentication (`basic_auth_users`, bcrypt hashes), response headers
//! (`http_server_config.headers`) and a rate limit (`rate_limit`). The same file works for both.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional; NoClientCert by default
//!   client_ca_file: ca.crt                         # needed for the Verify types
//!   min_version: TLS12                             # optional: TLS12 (default) or TLS13
//!   cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # TLS 1.2's, Go's names
//!   curve_preferences: [X25519, CurveP256]
//! http_server_config:
//!   headers:
//!     X-Content-Type-Options: nosniff
//! basic_auth_users:
//!   prometheus: $2y$10$...                         # htpasswd -nBC 10 "" | tr -d ':\n'
//! rate_limit:
//!   interval: 100ms                                # one request per interval...
//!   burst: 20                                      # ...after a burst of 20
//! ```
//!
//! Relative paths are relative to the file's folder, as exporter-toolkit resolves them. An
//! unknown key is an error naming it (exporter-toolkit parses strictly too). The file and
//! every certificate, key and CA it names are watched ([`Live`]): a change (a renewed
//! certificate) or SIGHUP loads them again, on a thread of their own; a version that does not
//! load leaves the last good one serving and says why on stderr.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context};
use hyper::header::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::tls;
/// What the fleet's client shares with the server: a certificate trusted as itself.
pub use super::tls::{cert_facts, names_host, pinned_usable, SERVER_AUTH};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<tls::TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    http_server_config: Option<HttpFile>,
    rate_limit: Option<RateFile>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    /// exporter-toolkit's HTTP/2 switch: accel serves HTTP/1.1 (ALPN says so), but checks
    /// what Go's HTTP/2 needs of `cipher_suites` unless it is false, so that the file works
    /// for both.
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RateFile {
    interval: Option<String>,
    burst: Option<u32>,
}

/// The response headers exporter-toolkit lets a web config set, and the values it allows
/// (`None`: any).
const HEADERS: [(&str, Option<&[&str]>); 5] = [
    ("Content-Security-Policy", None),
    ("X-Frame-Options", Some(&["deny", "sameorigin"])),
    ("X-Content-Type-Options", Some(&["nosniff"])),
    ("X-XSS-Protection", None),
    ("Strict-Transport-Security", None),
];

/// A Go duration as the web config writes one (`100ms`, `1s`, `1m30s`, `0`).
pub fn go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let (mut total, mut rest) = (0f64, s);
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&i| i > 0)?;
        let v: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += v * unit;
        rest = &rest[u..];
    }
    (total.is_finite() && total <= 86_400.0).then(|| Duration::from_secs_f64(total))
}

/// The checked configuration: a TLS server configuration (when TLS is on), the users, the
/// headers added to every response and the rate limit.
pub struct WebConfig {
    /// rustls's server configuration, ready for an acceptor.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// What the serving certificate says of itself.
    pub cert: Option<tls::CertFacts>,
    /// Basic authentication, when users are configured.
    pub auth: Option<Arc<BasicAuth>>,
    /// `http_server_config.headers`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `rate_limit`: one request per interval after a burst.
    pub rate: Option<(Duration, u32)>,
    /// The files it was read from (itself, certificates, keys, CAs).
    sources: Vec<PathBuf>,
}

impl WebConfig {
    /// No TLS, no authentication (no `--web.config.file`).
    pub fn none() -> WebConfig {
        WebConfig {
            tls: None,
            cert: None,
            auth: None,
            headers: Vec::new(),
            rate: None,
            sources: Vec::new(),
        }
    }

    /// Reads and checks `path`: every file it names is read now, so a mistake is an error at
    /// start, not at the first scrape.
    pub fn load(path: &Path) -> anyhow::Result<WebConfig> {
        let text = crate::input::read_config(path, "the web config file")?;
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            crate::input::yaml(&text, path, "Prometheus web config file")?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut sources = vec![path.to_path_buf()];
        let http2 = file
            .http_server_config
            .as_ref()
            .and_then(|h| h.http2)
            .unwrap_or(true);
        let (tls, cert) = match file.tls_server_config {
            Some(t) => {
                sources.extend(tls::files(&t, dir));
                let lacks_h2 = tls::lacks_http2_suite(&t);
                let (cfg, facts) = tls::server_config(t, dir, super::client_certs::client_verifier)
                    .with_context(|| format!("{}: tls_server_config", path.display()))?;
                if http2 && lacks_h2 {
                    bail!(
                        "{}: tls_server_config: cipher_suites has neither TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 nor TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, which HTTP/2 requires with TLS 1.2: exporter-toolkit refuses such a file unless http_server_config.http2 is false, and so does accel (which serves HTTP/1.1) so that the file works for both",
                        path.display()
                    );
                }
                (Some(Arc::new(cfg)), Some(facts))
            }
            None => (None, None),
        };
        let mut headers = Vec::new();
        for (name, value) in file
            .http_server_config
            .and_then(|h| h.headers)
            .unwrap_or_default()
        {
            let Some((known, allowed)) =
                HEADERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(&name))
            else {
                bail!(
                    "{}: http_server_config.headers: '{}' cannot be set (exporter-toolkit's are {})",
                    path.display(),
                    crate::out::printable(&name),
                    HEADERS.map(|(h, _)| h).join(", ")
                );
            };
            if value.is_empty() {
                continue;
            }
            if let Some(allowed) = allowed {
                if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&value)) {
                    bail!(
                        "{}: http_server_config.headers: {known} takes {}, not '{}'",
                        path.display(),
                        allowed.join(" or "),
                        crate::out::printable(&value)
                    );
                }
            }
            let v = HeaderValue::from_str(&value).map_err(|_| {
                anyhow!(
                    "{}: http_server_config.headers: the value of {known} holds characters a header cannot",
                    path.display()
                )
            })?;
            headers.push((HeaderName::from_static(known_lower(known)), v));
        }
        let rate = match file.rate_limit {
            None => None,
            Some(r) => {
                let interval = match r.interval.as_deref() {
                    None => Duration::ZERO,
                    Some(i) => go_duration(i).ok_or_else(|| {
                        anyhow!(
                            "{}: rate_limit.interval: '{}' is not a duration (such as 100ms or 1s)",
                            path.display(),
                            crate::out::printable(i)
                        )
                    })?,
                };
                (!interval.is_zero()).then_some((interval, r.burst.unwrap_or(0).max(1)))
            }
        };
        let auth = match file.basic_auth_users {
            Some(users) if !users.is_empty() => {
                let mut max_cost = 0;
                for (user, hash) in &users {
                    let user = crate::out::printable(user);
                    if user.contains(':') {
                        bail!(
                            "{}: basic_auth_users: the user name '{user}' contains ':'",
                            path.display()
                        );
                    }
                    let cost = bcrypt_cost(hash).ok_or_else(|| {
                        anyhow!(
                            "{}: basic_auth_users: the password of '{user}' is not a bcrypt hash ($2y$10$ and 53 characters); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
                            path.display()
                        )
                    })?;
                    if cost > MAX_COST {
                        bail!(
                            "{}: basic_auth_users: the hash of '{user}' has cost {cost}; at most {MAX_COST} is accepted, accel's own limit (exporter-toolkit has none; each step doubles the time of every check: cost {cost} takes about {:.0} s here per request that is not remembered; 10 is usual)",
                            path.display(),
                            0.065 * f64::from(1u32 << (cost - 10).min(20))
                        );
                    }
                    max_cost = max_cost.max(cost);
                }
                Some(Arc::new(BasicAuth::new(users, max_cost)?))
            }
            _ => None,
        };
        Ok(WebConfig {
            tls,
            cert,
            auth,
            headers,
            rate,
            sources,
        })
    }
}

/// A header's name in lower case, as `HeaderName::from_static` wants it.
fn known_lower(h: &str) -> &'static str {
    match h {
        "Content-Security-Policy" => "content-security-policy",
        "X-Frame-Options" => "x-frame-options",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "strict-transport-security",
    }
}

/// What the exporter reports of its web config: requests refused for their credentials, the
/// last reload, and the certificate's expiry.
#[derive(Default)]
pub struct WebStatus {
    /// Requests refused for missing or wrong credentials.
    pub auth_failures: AtomicU64,
    /// Whether the last attempt to load the file (again) succeeded.
    pub reload_ok: AtomicBool,
    /// When the serving certificate expires (Unix seconds; 0: no TLS, or unknown).
    pub cert_not_after: AtomicI64,
    /// Whether basic authentication is on.
    pub auth_on: AtomicBool,
}

/// A file's identity and contents' version, to notice a change.
fn stamp(p: &Path) -> Option<(u64, SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok()?, ino))
}

/// How long a changed file must stay unchanged before it is read (a write in progress).
const SETTLE: Duration = Duration::from_millis(100);

/// The web config in force, loaded again when one of its files changes or on SIGHUP. TLS on
/// or off is chosen at start: a version that would switch it does not load.
pub struct Live {
    path: Option<PathBuf>,
    current: RwLock<Arc<WebConfig>>,
    /// The files' stamps when the current version (or the last failed one) was read.
    stamps: Mutex<Vec<Option<(u64, SystemTime, u64)>>>,
    /// Set by SIGHUP: load again now.
    pub reload_now: AtomicBool,
    pub status: Arc<WebStatus>,
}

impl Live {
    /// `cfg`, read from `path` (none: no web config, nothing to watch).
    pub fn new(path: Option<PathBuf>, cfg: WebConfig) -> Arc<Live> {
        let status = Arc::new(WebStatus::default());
        status.reload_ok.store(true, Ordering::Relaxed);
        let live = Arc::new(Live {
            stamps: Mutex::new(cfg.sources.iter().map(|p| stamp(p)).collect()),
            path,
            current: RwLock::new(Arc::new(WebConfig::none())),
            reload_now: AtomicBool::new(false),
            status,
        });
        live.install(cfg);
        live
    }

    fn install(&self, cfg: WebConfig) {
        let s = &self.status;
        s.cert_not_after.store(
            cfg.cert.as_ref().and_then(|c| c.not_after).unwrap_or(0),
            Ordering::Relaxed,
        );
        s.auth_on.store(cfg.auth.is_some(), Ordering::Relaxed);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(cfg);
    }

    /// The configuration in force now.
    pub fn get(&self) -> Arc<WebConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Loads the file again when it or a file it names changed, or SIGHUP asked; keeps the
    /// version in force when the new one does not load. Blocks (reads files, makes a bcrypt
    /// dummy hash): call it on a thread of its own. True when a new version is in force.
    pub fn check(&self) -> bool {
        let Some(path) = &self.path else { return false };
        let asked = self.reload_now.swap(false, Ordering::Relaxed);
        let sources = self.get().sources.clone();
        let now: Vec<_> = sources.iter().map(|p| stamp(p)).collect();
        {
            let last = self.stamps.lock().unwrap_or_else(|e| e.into_inner());
            if !asked && *last == now {
                return false;
            }
        }
        // A file being written is looked at again next round rather than read half-written.
        if !asked {
            std::thread::sleep(SETTLE);
            if sources.iter().map(|p| stamp(p)).collect::<Vec<_>>() != now {
                return false;
            }
        }
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = now;
        let was_tls = self.get().tls.is_some();
        let loaded = WebConfig::load(path).and_then(|cfg| match (was_tls, cfg.tls.is_some()) {
            (true, false) => Err(anyhow!(
                "{}: tls_server_config is gone (or the file is empty): a reload cannot turn TLS off, so the listener keeps serving TLS; restart accel serve to serve plain HTTP",
                path.display()
            )),
            (false, true) => Err(anyhow!(
                "{}: tls_server_config appeared: a reload cannot turn TLS on (the listener's protocol is chosen at start, as exporter-toolkit's); restart accel serve",
                path.display()
            )),
            _ => Ok(cfg),
        });
        match loaded {
            Ok(cfg) => {
                *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) =
                    cfg.sources.iter().map(|p| stamp(p)).collect();
                self.install(cfg);
                self.status.reload_ok.store(true, Ordering::Relaxed);
                eprintln!("accel serve: loaded {} again", path.display());
                true
            }
            Err(e) => {
                self.status.reload_ok.store(false, Ordering::Relaxed);
                eprintln!(
                    "accel serve: {} changed but does not load, so the previous version stays in force: {}",
                    path.display(),
                    crate::out::printable_lines(&format!("{e:#}"))
                );
                false
            }
        }
    }

    /// Watches the files every second (and answers SIGHUP at once), on a thread of its own.
    pub fn watch(self: &Arc<Self>) -> std::io::Result<()> {
        if self.path.is_none() {
            return Ok(());
        }
        let live = self.clone();
        std::thread::Builder::new()
            .name("accel-web-config".into())
            .spawn(move || loop {
                for _ in 0..20 {
                    if live.reload_now.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                live.check();
            })
            .map(|_| ())
    }
}

/// The highest bcrypt cost accepted: cost 14 takes about a second per check on a server core
/// (cost 10, htpasswd's usual, 65 ms; each step doubles it). Higher costs let a few requests
/// occupy the checking threads for minutes.
pub const MAX_COST: u32 = 14;

/// The cost of a bcrypt hash (`$2y$10$` and 53 characters of bcrypt's base64); `None` when
/// it is not one.
pub fn bcrypt_cost(hash: &str) -> Option<u32> {
    let rest = hash
        .strip_prefix("$2a$")
        .or_else(|| hash.strip_prefix("$2b$"))
        .or_else(|| hash.strip_prefix("$2y$"))?;
    let (cost, body) = rest.split_once('$')?;
    let ok = cost.len() == 2
        && body.len() == 53
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'/');
    let cost: u32 = cost.parse().ok()?;
    (ok && (4..=31).contains(&cost)).then_some(cost)
}

/// Basic authentication against bcrypt hashes. A bcrypt check costs milliseconds on purpose,
/// so it never runs on the server's threads ([`BasicAuth::check`] says when one is needed and
/// [`Verify::run`] does it on the blocking pool); a verified password is remembered (by the
/// SHA-256 of user and password, never the password itself) so a scrape every few seconds
/// does not pay it each time. An unknown user is checked against a dummy hash of the highest
/// cost configured, as exporter-toolkit does, so the time of a refusal does not tell which
/// user names exist.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    dummy: String,
    verified: Mutex<HashMap<[u8; 32], ()>>,
}

/// What a request's credentials need: nothing more (accepted from memory, or refused because
/// they are malformed), or a bcrypt check.
pub enum Check {
    /// Decided without a bcrypt check.
    Done(bool),
    /// A bcrypt check to run off the server's threads.
    Verify(Verify),
}

/// One bcrypt check of a password against a user's hash (or the dummy one).
pub struct Verify {
    key: [u8; 32],
    password: Vec<u8>,
    hash: String,
    known: bool,
}

impl Verify {
    /// Runs the check (milliseconds to a second: call it where blocking is allowed).
    pub fn run(self, auth: &BasicAuth) -> bool {
        let ok = bcrypt::verify(&self.password, &self.hash).unwrap_or(false) && self.known;
        if ok {
            let mut cache = auth.verified.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(self.key, ());
        }
        ok
    }
}

/// The most verified credentials remembered: more are forgotten (all at once) rather than
/// let a client grow the cache.
const CACHE_MAX: usize = 1024;

impl BasicAuth {
    fn new(users: BTreeMap<String, String>, cost: u32) -> anyhow::Result<BasicAuth> {
        // A password no one sends; only the cost of checking it matters.
        let dummy = bcrypt::hash("accel: the dummy hash for unknown users", cost.max(4))
            .map_err(|e| anyhow!("cannot make the dummy bcrypt hash: {e}"))?;
        Ok(BasicAuth {
            users,
            dummy,
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// What an `Authorization` header value needs: `Done(false)` when it is missing or not
    /// Basic credentials (the scheme name in any case, RFC 7617), `Done(true)` when these
    /// credentials were verified before, else the bcrypt check to run.
    pub fn check(&self, header: Option<&[u8]>) -> Check {
        let Some(h) = header else {
            return Check::Done(false);
        };
        let h = h.trim_ascii();
        let Some((scheme, b64)) = h
            .iter()
            .position(|&b| b == b' ')
            .map(|i| (&h[..i], &h[i + 1..]))
        else {
            return Check::Done(false);
        };
        if !scheme.eq_ignore_ascii_case(b"basic") {
            return Check::Done(false);
        }
        let Some(raw) = base64_decode(b64.trim_ascii()) else {
            return Check::Done(false);
        };
        let Some(colon) = raw.iter().position(|&b| b == b':') else {
            return Check::Done(false);
        };
        let (user, pass) = (&raw[..colon], &raw[colon + 1..]);
        let known = std::str::from_utf8(user)
            .ok()
            .and_then(|u| self.users.get(u));
        let key: [u8; 32] = {
            let d = ring::digest::digest(&ring::digest::SHA256, &raw);
            let mut k = [0u8; 32];
            k.copy_from_slice(d.as_ref());
            k
        };
        if known.is_some()
            && self
                .verified
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&key)
        {
            return Check::Done(true);
        }
        Check::Verify(Verify {
            key,
            password: pass.to_vec(),
            hash: known.unwrap_or(&self.dummy).clone(),
            known: known.is_some(),
        })
    }

    /// [`BasicAuth::check`] and the bcrypt check, here (for tests).
    #[cfg(test)]
    fn check_now(&self, header: Option<&[u8]>) -> bool {
        match self.check(header) {
            Check::Done(ok) => ok,
            Check::Verify(v) => v.run(self),
        }
    }
}

/// Standard base64 (RFC 4648, with padding optional); `None` for anything else.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = match s.iter().position(|&c| c == b'=') {
        Some(p) if s[p..].iter().all(|&c| c == b'=') && s[p..].len() <= 2 => &s[..p],
        Some(_) => return None,
        None => s,
    };
    if s.len() % 4 == 1 || s.len() > 8192 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c)? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_known_values() {
        // RFC 4648, section 10.
        for (enc, dec) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYg==", "foob"),
            ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
            ("Zm9vYmFy", "foobar"),
        ] {
            assert_eq!(
                base64_decode(enc.as_bytes()).unwrap(),
                dec.as_bytes(),
                "{enc}"
            );
        }
        assert_eq!(base64_decode(b"Zm9vYg").unwrap(), b"foob");
        assert_eq!(base64_decode(b"Z"), None);
        assert_eq!(base64_decode(b"Zm9v!"), None);
        assert_eq!(base64_decode(b"Zg=x"), None);
    }

    #[test]
    fn basic_auth_checks_bcrypt_and_remembers() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let a = BasicAuth::new([("prom".to_string(), hash)].into(), 4).unwrap();
        // "prom:s3cret" and "prom:wrong" in base64.
        assert!(a.check_now(Some(b"Basic cHJvbTpzM2NyZXQ=")));
        assert!(matches!(
            a.check(Some(b"Basic cHJvbTpzM2NyZXQ=")),
            Check::Done(true)
        ));
        assert_eq!(a.verified.lock().unwrap().len(), 1);
        // The scheme's name in any case (RFC 7617 section 2).
        assert!(a.check_now(Some(b"BASIC cHJvbTpzM2NyZXQ=")));
        assert!(a.check_now(Some(b"bAsIc   cHJvbTpzM2NyZXQ=")));
        assert!(!a.check_now(Some(b"Basic cHJvbTp3cm9uZw==")));
        assert!(!a.check_now(None));
        assert!(!a.check_now(Some(b"Bearer x")));
        assert!(!a.check_now(Some(b"Basic !!!")));
        assert!(!a.check_now(Some(b"Basicx cHJvbTpzM2NyZXQ=")));
        // "nobody:s3cret": an unknown user goes through a bcrypt check too (the dummy hash),
        // and is refused even with a password that matched someone else's.
        assert!(matches!(
            a.check(Some(b"Basic bm9ib2R5OnMzY3JldA==")),
            Check::Verify(_)
        ));
        assert!(!a.check_now(Some(b"Basic bm9ib2R5OnMzY3JldA==")));
    }

    #[test]
    fn hashes_are_checked_when_the_file_is_read() {
        let h10 = bcrypt::hash("x", 4).unwrap().replacen("$04$", "$10$", 1);
        assert_eq!(bcrypt_cost(&h10), Some(10));
        assert_eq!(bcrypt_cost(&h10.replacen("$2b$", "$2y$", 1)), Some(10));
        assert_eq!(bcrypt_cost(&h10.replacen("$10$", "$15$", 1)), Some(15));
        for bad in [
            "$2y$10$short",
            "plain",
            "$2y$1$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0",
            &h10.replacen("$10$", "$03$", 1),
            &format!("{h10}x"),
            &format!("{}!", &h10[..h10.len() - 1]),
        ] {
            assert_eq!(bcrypt_cost(bad), None, "{bad}");
        }
        let dir = std::env::temp_dir().join(format!("accel-webcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("web.yml");
        let costly = h10.replacen("$10$", "$16$", 1);
        std::fs::write(&p, format!("basic_auth_users:\n  prom: '{costly}'\n")).unwrap();
        let e = WebConfig::load(&p).err().unwrap().to_string();
        assert!(e.contains("cost 16; at most 14"), "{e}");
        std::fs::write(&p, "basic_auth_users:\n  prom: '$2y$10$nope'\n").unwrap();
        let e = WebConfig::load(&p).err().unwrap().to_string();
        assert!(e.contains("is not a bcrypt hash"), "{e}");
    }

    /// A seeded random walk over mutations of real web configs (cargo-fuzz cannot reach this
    /// binary-only crate): every input loads or is refused with an error, never a panic.
    #[test]
    fn random_web_configs_load_or_are_refused() {
        let dir = std::env::temp_dir().join(format!("accel-webcfg-rand-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hash = bcrypt::hash("pw", 4).unwrap();
        let seeds = [
            format!("basic_auth_users:\n  prom: '{hash}'\n"),
            "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
                .to_string(),
            "rate_limit:\n  interval: 1m30s\n  burst: 3\n".to_string(),
            "tls_server_config:\n  cert: x\n  key: y\n  min_version: TLS13\n  cipher_suites: [a]\n"
                .to_string(),
        ];
        let tokens: [&str; 16] = [
            ":", " ", "\n", "  ", "- ", "[", "]", "{", "}", "'", "\"", "&a", "*a", "!!binary", "~",
            "$2y$",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let p = dir.join("web.yml");
        for case in 0..1500 {
            let mut t = seeds[case % seeds.len()].clone().into_bytes();
            for _ in 0..(1 + next() % 6) {
                let at = (next() as usize) % (t.len() + 1);
                match next() % 3 {
                    0 => {
                        let tok = tokens[(next() as usize) % tokens.len()];
                        t.splice(at..at, tok.bytes());
                    }
                    1 if at < t.len() => {
                        t.remove(at);
                    }
                    _ if at < t.len() => t[at] = (next() % 256) as u8,
                    _ => {}
                }
            }
            std::fs::write(&p, &t).unwrap();
            let _ = WebConfig::load(&p);
        }
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("100ms"), Some(Duration::from_millis(100)));
        assert_eq!(go_duration("1.5h"), Some(Duration::from_secs(5400)));
        for bad in ["", "1", "ms", "1x", "-1s", "1e400s", "99999999h"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
