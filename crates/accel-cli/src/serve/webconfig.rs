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
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the web config file {}", path.display()))?;
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_yaml::from_str(&text)
                .map_err(|e| anyhow!("{}: not a Prometheus web config file: {e}", path.display()))?
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
                for (user, hash) in &users {
                    if user.contains(':') {
                        bail!(
                            "{}: basic_auth_users: the user name '{user}' contains ':'",
                            path.display()
                        );
                    }
                    if !(hash.starts_with("$2a$")
                        || hash.starts_with("$2b$")
                        || hash.starts_with("$2y$"))
                    {
                        bail!(
                            "{}: basic_auth_users: the password of '{user}' is not a bcrypt hash ($2y$...); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
                            path.display()
                        );
                    }
                }
                Some(BasicAuth::new(users))
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
            std::fs::read_to_string(&f)
                .with_context(|| format!("cannot read {what} {}", f.display()))
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
            let pem = std::fs::read(&ca).with_context(|| format!("cannot read client_ca_file {}", ca.display()))?;
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

/// Basic authentication against bcrypt hashes. A bcrypt check costs milliseconds on purpose;
/// a verified password is remembered (by the SHA-256 of user and password, never the
/// password itself) so a scrape every few seconds does not pay it each time.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    verified: Mutex<HashMap<[u8; 32], ()>>,
}

/// The most verified credentials remembered: more are forgotten (all at once) rather than
/// let a client grow the cache.
const CACHE_MAX: usize = 1024;

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> BasicAuth {
        BasicAuth {
            users,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an `Authorization` header value names a user with the right password.
    pub fn check(&self, header: Option<&[u8]>) -> bool {
        let Some(h) = header else { return false };
        let Some(b64) = h
            .strip_prefix(b"Basic ")
            .or_else(|| h.strip_prefix(b"basic "))
        else {
            return false;
        };
        let Some(raw) = base64_decode(b64.trim_ascii()) else {
            return false;
        };
        let Some(colon) = raw.iter().position(|&b| b == b':') else {
            return false;
        };
        let (user, pass) = (&raw[..colon], &raw[colon + 1..]);
        let Ok(user) = std::str::from_utf8(user) else {
            return false;
        };
        let Some(hash) = self.users.get(user) else {
            return false;
        };
        let key: [u8; 32] = {
            let d = ring::digest::digest(&ring::digest::SHA256, &raw);
            let mut k = [0u8; 32];
            k.copy_from_slice(d.as_ref());
            k
        };
        let mut cache = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if cache.contains_key(&key) {
            return true;
        }
        drop(cache);
        let ok = bcrypt::verify(pass, hash).unwrap_or(false);
        if ok {
            cache = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(key, ());
        }
        ok
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
        let a = BasicAuth::new([("prom".to_string(), hash)].into());
        // "prom:s3cret" and "prom:wrong" in base64.
        assert!(a.check(Some(b"Basic cHJvbTpzM2NyZXQ=")));
        assert!(a.check(Some(b"Basic cHJvbTpzM2NyZXQ=")));
        assert_eq!(a.verified.lock().unwrap().len(), 1);
        assert!(!a.check(Some(b"Basic cHJvbTp3cm9uZw==")));
        assert!(!a.check(None));
        assert!(!a.check(Some(b"Bearer x")));
        assert!(!a.check(Some(b"Basic !!!")));
        // "nobody:s3cret"
        assert!(!a.check(Some(b"Basic bm9ib2R5OnMzY3JldA==")));
    }
}
