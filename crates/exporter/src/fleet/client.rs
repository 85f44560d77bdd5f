//! A small HTTP(S) GET for the fleet view: one request per connection, a deadline on the whole
//! exchange, a cap on the answer's size, basic authentication and TLS from Prometheus's
//! `http_config` shape (the client side of the exporter's web config):
//!
//! ```yaml
//! basic_auth:
//!   username: prometheus
//!   password_file: /etc/accel/password     # or password: ...
//! tls_config:
//!   ca_file: ca.crt
//!   cert_file: client.crt                  # optional: a client certificate
//!   key_file: client.key
//!   server_name: accel.example             # optional: the name to verify
//!   insecure_skip_verify: false
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio_rustls::rustls;

/// The most an answer may hold (a snapshot of a machine with many GPUs is tens of KiB).
const MAX_BODY: usize = 16 << 20;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HttpConfigFile {
    basic_auth: Option<BasicAuthFile>,
    tls_config: Option<TlsConfigFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BasicAuthFile {
    username: String,
    password: Option<String>,
    password_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TlsConfigFile {
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    server_name: Option<String>,
    #[serde(default)]
    insecure_skip_verify: bool,
}

/// How to reach the hosts: an `Authorization` header and a TLS client configuration.
#[derive(Clone)]
pub struct HttpConfig {
    auth: Option<HeaderValue>,
    tls: Arc<rustls::ClientConfig>,
    server_name: Option<String>,
}

impl HttpConfig {
    /// Reads a Prometheus `http_config` file; `None`: plain defaults (the system's roots are
    /// not used: give `tls_config.ca_file` for https hosts).
    pub fn load(path: Option<&Path>) -> anyhow::Result<HttpConfig> {
        let (file, dir) = match path {
            Some(p) => {
                let text = crate::input::read_config(p, "the http config file")?;
                let f: HttpConfigFile = if text.trim().is_empty() {
                    HttpConfigFile::default()
                } else {
                    crate::input::yaml(&text, p, "Prometheus http_config")?
                };
                (f, p.parent().unwrap_or(Path::new(".")).to_path_buf())
            }
            None => (HttpConfigFile::default(), PathBuf::from(".")),
        };
        let at = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };
        let auth = match file.basic_auth {
            None => None,
            Some(b) => {
                let password = match (b.password, b.password_file) {
                    (Some(p), None) => p,
                    (None, Some(f)) => crate::input::read_config(&at(&f), "password_file")?
                        .trim_end_matches(['\n', '\r'])
                        .to_string(),
                    (None, None) => String::new(),
                    (Some(_), Some(_)) => {
                        bail!("basic_auth: give password or password_file, not both")
                    }
                };
                let token = base64_encode(format!("{}:{password}", b.username).as_bytes());
                Some(
                    HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
                        anyhow!("basic_auth: the user name holds characters a header cannot")
                    })?,
                )
            }
        };
        let t = file.tls_config.unwrap_or_default();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow!("{e}"))?;
        let builder = if t.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        } else {
            use rustls_pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            let mut pinned = Vec::new();
            if let Some(ca) = &t.ca_file {
                let pem = crate::input::read_config(&at(ca), "ca_file")?.into_bytes();
                for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
                    let c = c.map_err(|e| anyhow!("ca_file: {e}"))?;
                    roots.add(c.clone()).map_err(|e| anyhow!("ca_file: {e}"))?;
                    pinned.push(c);
                }
            }
            if roots.is_empty() {
                builder.with_root_certificates(roots)
            } else {
                let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| anyhow!("ca_file: {e}"))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Pinned { inner, pinned }))
            }
        };
        let mut tls = match (&t.cert_file, &t.key_file) {
            (Some(c), Some(k)) => {
                use rustls_pki_types::pem::PemObject;
                let cert_pem = crate::input::read_config(&at(c), "cert_file")?;
                let key_pem = crate::input::read_config(&at(k), "key_file")?;
                let certs = rustls_pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow!("cert_file {}: {e}", c.display()))?;
                let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
                    .map_err(|e| anyhow!("key_file {}: {e}", k.display()))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| anyhow!("client certificate: {e}"))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => bail!("tls_config: cert_file and key_file go together"),
        };
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(HttpConfig {
            auth,
            tls: Arc::new(tls),
            server_name: t.server_name,
        })
    }
}

/// webpki's check against `ca_file`, and, as Prometheus (Go) does, a server certificate that
/// is itself in `ca_file` (the self-signed one `openssl req -x509` makes, which webpki
/// refuses as a CA used as a server's own) while it is valid, for TLS servers and names the
/// host.
#[derive(Debug)]
struct Pinned {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<rustls_pki_types::CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        intermediates: &[rustls_pki_types::CertificateDer<'_>],
        name: &rustls_pki_types::ServerName<'_>,
        ocsp: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use crate::serve::webconfig as w;
        if !self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return self
                .inner
                .verify_server_cert(end_entity, intermediates, name, ocsp, now);
        }
        w::pinned_usable(end_entity.as_ref(), now.as_secs() as i64, w::SERVER_AUTH)
            .map_err(rustls::Error::InvalidCertificate)?;
        let host = name.to_str();
        let facts = w::cert_facts(end_entity.as_ref()).unwrap_or_default();
        if !w::names_host(&facts, &host) {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ));
        }
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A failed handshake in a sentence (rustls's errors read as Rust's debug text).
fn tls_failure(e: &std::io::Error, host: &str) -> String {
    use rustls::{AlertDescription as A, CertificateError as C};
    let Some(r) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return format!("TLS: {e}");
    };
    let why = match r {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "the server's certificate is not signed by a CA of tls_config.ca_file".to_string(),
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired".to_string(),
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet (is a clock wrong?)".to_string()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the server's certificate does not name {host} (tls_config.server_name sets the name to check)"
            ),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "the server's certificate is not one for TLS servers (its extended key usage)".to_string()
            }
            C::BadSignature => "the server's certificate has a bad signature".to_string(),
            C::BadEncoding => "the server's certificate does not parse".to_string(),
            C::UnsupportedSignatureAlgorithmContext { .. }
            | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
                "the server's certificate is signed with an algorithm rustls does not take".to_string()
            }
            C::Other(o) if o.to_string().contains("CaUsedAsEndEntity") => {
                "the server's certificate is a CA certificate (as `openssl req -x509` makes) that is not itself in tls_config.ca_file: give that certificate as ca_file, or serve one signed by the CA".to_string()
            }
            _ => "the server's certificate is refused".to_string(),
        },
        rustls::Error::AlertReceived(a) => match a {
            A::CertificateRequired => {
                "the server requires a client certificate (tls_config.cert_file and key_file)".to_string()
            }
            A::BadCertificate
            | A::UnknownCA
            | A::CertificateUnknown
            | A::CertificateExpired
            | A::UnsupportedCertificate
            | A::AccessDenied => "the server refused the client certificate".to_string(),
            A::HandshakeFailure | A::ProtocolVersion | A::InsufficientSecurity => {
                "the server and this client have no TLS version, cipher suite or curve in common".to_string()
            }
            other => format!("the server ended the handshake (TLS alert {})", u8::from(*other)),
        },
        rustls::Error::InvalidMessage(_) => {
            "the server does not speak TLS (is it http://?)".to_string()
        }
        other => format!("the handshake failed: {other}"),
    };
    format!("TLS: {why}")
}

/// Accepts any server certificate (`insecure_skip_verify: true`), still checking signatures.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &rustls_pki_types::CertificateDer<'_>,
        _: &[rustls_pki_types::CertificateDer<'_>],
        _: &rustls_pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Standard base64 with padding.
pub fn base64_encode(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Where a host is: `https://name:port`, `http://name:port` or `name:port` (http).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As the user wrote it (the row's name).
    pub label: String,
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// The path prefix (a Prometheus behind a path).
    pub base: String,
}

impl Target {
    /// Parses `[http[s]://]host[:port][/path]`; the port defaults to 9400 (accel serve), or
    /// `default_port`.
    pub fn parse(s: &str, default_port: u16) -> anyhow::Result<Target> {
        let t = s.trim();
        let (https, rest) = if let Some(r) = t.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = t.strip_prefix("http://") {
            (false, r)
        } else {
            (false, t)
        };
        let (hostport, base) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/').to_string()),
            None => (rest, String::new()),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                h.trim_start_matches('[').trim_end_matches(']').to_string(),
                p.parse::<u16>()
                    .map_err(|_| anyhow!("'{s}': '{p}' is not a port"))?,
            ),
            _ => (hostport.to_string(), default_port),
        };
        if host.is_empty() {
            bail!("'{s}' names no host (HOST:PORT, e.g. gpu-node-1:9400)");
        }
        Ok(Target {
            label: t.to_string(),
            https,
            host,
            port,
            base,
        })
    }
}

/// GETs `path` (with its query) from the target, all within `timeout`; the body when the
/// status is 200, else an error naming the status.
pub async fn get(
    cfg: &HttpConfig,
    t: &Target,
    path: &str,
    timeout: Duration,
) -> anyhow::Result<Bytes> {
    tokio::time::timeout(timeout, get_inner(cfg, t, path))
        .await
        .map_err(|_| anyhow!("no answer within {:.1} s", timeout.as_secs_f64()))?
}

async fn get_inner(cfg: &HttpConfig, t: &Target, path: &str) -> anyhow::Result<Bytes> {
    let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| anyhow!("cannot connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let uri = format!("{}{path}", t.base);
    let mut req = Request::get(&uri)
        // An IPv6 address goes in brackets (RFC 3986's IP-literal): `[::1]:9400`.
        .header(
            HOST,
            if t.host.contains(':') {
                format!("[{}]:{}", t.host, t.port)
            } else {
                format!("{}:{}", t.host, t.port)
            },
        )
        .header(ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())?;
    if let Some(a) = &cfg.auth {
        req.headers_mut().insert(AUTHORIZATION, a.clone());
    }
    if t.https {
        let checked = cfg.server_name.clone().unwrap_or_else(|| t.host.clone());
        let name = rustls_pki_types::ServerName::try_from(checked.clone())
            .map_err(|e| anyhow!("'{}' is not a TLS server name: {e}", t.host))?;
        let tls = tokio_rustls::TlsConnector::from(cfg.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| anyhow!("{}", tls_failure(&e, &checked)))?;
        send(TokioIo::new(tls), req).await
    } else {
        send(TokioIo::new(tcp), req).await
    }
}

async fn send<I>(io: I, req: Request<Empty<Bytes>>) -> anyhow::Result<Bytes>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| anyhow!("HTTP: {e}"))?;
    let driver = tokio::spawn(conn);
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| anyhow!("HTTP: {e}"))?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| anyhow!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    if status != hyper::StatusCode::OK {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)])
            .trim()
            .to_string();
        bail!(
            "HTTP {status}{}",
            if text.is_empty() {
                String::new()
            } else {
                format!(": {text}")
            }
        );
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_targets() {
        assert_eq!(base64_encode(b"prom:s3cret"), "cHJvbTpzM2NyZXQ=");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        let t = Target::parse("https://gpu-1:9500", 9400).unwrap();
        assert!(t.https && t.host == "gpu-1" && t.port == 9500 && t.base.is_empty());
        let t = Target::parse("gpu-2", 9400).unwrap();
        assert!(!t.https && t.port == 9400);
        let t = Target::parse("http://prom:9090/prometheus/", 9090).unwrap();
        assert_eq!((t.port, t.base.as_str()), (9090, "/prometheus"));
        let t = Target::parse("[::1]:9400", 9400).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 9400));
        assert!(Target::parse("gpu:notaport", 9400).is_err());
        assert!(Target::parse(":9400", 9400).is_err());
    }
}
