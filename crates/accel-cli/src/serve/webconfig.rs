//! Prometheus's web configuration file (`--web.config.file`), as exporter-toolkit reads it for
//! node_exporter and every exporter built on it: TLS (`tls_server_config`) and basic
//! authentication (`basic_auth_users`, bcrypt hashes). The same file works for both.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional; NoClientCert by default
//!   client_ca_file: ca.crt                         # needed for the Verify types
//!   min_version: TLS12                             # optional: TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...                         # htpasswd -nBC 10 "" | tr -d ':\n'
//! ```
//!
//! Relative paths are relative to the file's folder, as exporter-toolkit resolves them. An
//! unknown key is an error naming it (exporter-toolkit parses strictly too).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    /// exporter-toolkit's HTTP/2 switch and response headers: accepted, HTTP/1.1 is served.
    #[serde(rename = "http_server_config")]
    _http_server_config: Option<serde_yaml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    cert: Option<String>,
    key: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// The checked configuration: a TLS server configuration (when TLS is on) and the users.
pub struct WebConfig {
    /// rustls's server configuration, ready for an acceptor.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// Basic authentication, when users are configured.
    pub auth: Option<BasicAuth>,
}

impl WebConfig {
    /// No TLS, no authentication (no `--web.config.file`).
    pub fn none() -> WebConfig {
        WebConfig {
            tls: None,
            auth: None,
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
        let tls = match file.tls_server_config {
            Some(t) => {
                Some(Arc::new(tls_config(t, dir).with_context(|| {
                    format!("{}: tls_server_config", path.display())
                })?))
            }
            None => None,
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
                            "{}: basic_auth_users: the hash of '{user}' has cost {cost}; at most {MAX_COST} is accepted (each step doubles the time of every check: cost {cost} takes about {:.0} s here per request that is not remembered; 10 is usual)",
                            path.display(),
                            0.065 * f64::from(1u32 << (cost - 10).min(20))
                        );
                    }
                    max_cost = max_cost.max(cost);
                }
                Some(BasicAuth::new(users, max_cost)?)
            }
            _ => None,
        };
        Ok(WebConfig { tls, auth })
    }
}

fn resolve(dir: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

fn pem_text(
    dir: &Path,
    file: &Option<PathBuf>,
    inline: &Option<String>,
    what: &str,
) -> anyhow::Result<String> {
    match (file, inline) {
        (Some(f), None) => {
            let f = resolve(dir, f);
            crate::input::read_config(&f, what)
        }
        (None, Some(t)) => Ok(t.clone()),
        (Some(_), Some(_)) => bail!("give {what} as a file or inline, not both"),
        (None, None) => bail!("{what} is missing"),
    }
}

fn tls_config(t: TlsFile, dir: &Path) -> anyhow::Result<tokio_rustls::rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls::{self, server::WebPkiClientVerifier, RootCertStore};

    let certs_pem = pem_text(dir, &t.cert_file, &t.cert, "cert_file")?;
    let key_pem = pem_text(dir, &t.key_file, &t.key, "key_file")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(certs_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("cert_file: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        bail!("cert_file holds no certificate");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| anyhow!("key_file: no PEM private key: {e}"))?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = {
        let v = |s: &Option<String>, d: &str| -> anyhow::Result<u8> {
            match s.as_deref().unwrap_or(d) {
                "TLS12" => Ok(12),
                "TLS13" => Ok(13),
                "TLS10" | "TLS11" => {
                    bail!("TLS 1.0 and 1.1 are not offered (rustls); use TLS12 or TLS13")
                }
                other => bail!("'{other}' is not a TLS version (TLS12, TLS13)"),
            }
        };
        let (lo, hi) = (v(&t.min_version, "TLS12")?, v(&t.max_version, "TLS13")?);
        if lo > hi {
            bail!("min_version is above max_version");
        }
        let mut out = Vec::new();
        if lo <= 12 {
            out.push(&rustls::version::TLS12);
        }
        if hi >= 13 {
            out.push(&rustls::version::TLS13);
        }
        out
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| anyhow!("{e}"))?;
    let kind = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let verifier = match kind {
        "NoClientCert" => None,
        "RequireAnyClientCert" | "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert"
        | "RequestClientCert" => {
            let ca = t
                .client_ca_file
                .as_ref()
                .ok_or_else(|| anyhow!("client_auth_type {kind} needs client_ca_file"))?;
            let ca = resolve(dir, ca);
            let pem = crate::input::read_config(&ca, "client_ca_file")?.into_bytes();
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&pem) {
                roots
                    .add(c.map_err(|e| anyhow!("client_ca_file: {e}"))?)
                    .map_err(|e| anyhow!("client_ca_file: {e}"))?;
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let b = match kind {
                "VerifyClientCertIfGiven" | "RequestClientCert" => b.allow_unauthenticated(),
                _ => b,
            };
            Some(b.build().map_err(|e| anyhow!("client_ca_file: {e}"))?)
        }
        other => bail!(
            "client_auth_type '{other}' is not one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
        ),
    };
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| anyhow!("the certificate and key do not go together: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
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
            &h10.replace('.', "!"),
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
}
