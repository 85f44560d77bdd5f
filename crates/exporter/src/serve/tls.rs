//! The web config's `tls_server_config`, as exporter-toolkit reads it, made into rustls's
//! server configuration; and what the serving certificate says of itself (its validity and
//! names), read from its DER so the exporter can warn at start and export its expiry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use serde::Deserialize;
use tokio_rustls::rustls;

/// `tls_server_config`: every key exporter-toolkit documents.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    cert: Option<String>,
    key: Option<String>,
    pub(super) client_auth_type: Option<String>,
    pub(super) client_ca_file: Option<PathBuf>,
    pub(super) client_ca: Option<String>,
    pub(super) client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

/// The files a TLS configuration was read from (to notice a renewed certificate).
pub(super) fn files(t: &TlsFile, dir: &Path) -> Vec<PathBuf> {
    [&t.cert_file, &t.key_file, &t.client_ca_file]
        .into_iter()
        .flatten()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| resolve(dir, p))
        .collect()
}

pub(super) fn resolve(dir: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

pub(super) fn pem_text(
    dir: &Path,
    file: &Option<PathBuf>,
    inline: &Option<String>,
    what: &str,
) -> anyhow::Result<Option<String>> {
    // An empty value is no value, as exporter-toolkit reads it.
    let file = file.as_ref().filter(|f| !f.as_os_str().is_empty());
    let inline = inline.as_ref().filter(|t| !t.is_empty());
    match (file, inline) {
        (Some(f), None) => Ok(Some(crate::input::read_config(&resolve(dir, f), what)?)),
        (None, Some(t)) => Ok(Some(t.clone())),
        (Some(_), Some(_)) => bail!("give {what} as a file or inline, not both"),
        (None, None) => Ok(None),
    }
}

/// Go's name of a TLS 1.2 cipher suite against rustls's (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`;
/// Go also accepts the ChaCha20 ones without `_SHA256`).
fn suite_matches(go: &str, rustls_name: &str) -> bool {
    go == rustls_name || format!("{go}_SHA256") == rustls_name
}

/// Go's curve names (`crypto/tls.CurveID`) as rustls's key-exchange groups.
fn group_name(go: &str) -> anyhow::Result<&'static str> {
    Ok(match go {
        "X25519" => "X25519",
        "CurveP256" => "secp256r1",
        "CurveP384" => "secp384r1",
        "CurveP521" => bail!("curve_preferences: CurveP521 is not offered: rustls with ring has no P-521 key exchange (X25519, CurveP256 and CurveP384 are); leave it out"),
        other => bail!("curve_preferences: unknown curve '{other}' (exporter-toolkit's are X25519, CurveP256, CurveP384, CurveP521)"),
    })
}

/// What the serving certificate says of itself, for the start-up warnings and the expiry series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CertFacts {
    /// Validity, Unix seconds.
    pub not_before: Option<i64>,
    pub not_after: Option<i64>,
    /// Subject alternative names: DNS names and IP addresses.
    pub dns_names: Vec<String>,
    pub ips: Vec<std::net::IpAddr>,
}

/// Builds the client-certificate verifier a `tls_server_config` asks for
/// (`client_certs::client_verifier`; `None`: no client certificate asked).
pub(super) type ClientVerifier =
    fn(
        &TlsFile,
        &Path,
        Arc<rustls::crypto::CryptoProvider>,
    ) -> anyhow::Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>>;

/// rustls's server configuration from `t` (files relative to `dir`), with the client
/// certificates `verifier` asks for, and the leaf certificate's facts.
pub(super) fn server_config(
    t: TlsFile,
    dir: &Path,
    verifier: ClientVerifier,
) -> anyhow::Result<(rustls::ServerConfig, CertFacts)> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let certs_pem = pem_text(dir, &t.cert_file, &t.cert, "cert_file")?
        .ok_or_else(|| anyhow!("cert_file (or cert) is missing or empty"))?;
    let key_pem = pem_text(dir, &t.key_file, &t.key, "key_file")?
        .ok_or_else(|| anyhow!("key_file (or key) is missing or empty"))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(certs_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("cert_file: not PEM certificates: {e}"))?;
    let Some(leaf) = certs.first() else {
        bail!("cert_file holds no certificate");
    };
    let facts = cert_facts(leaf.as_ref()).unwrap_or_default();
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
                other => bail!("unknown TLS version '{other}' (TLS12 or TLS13)"),
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
    let mut provider = rustls::crypto::ring::default_provider();
    // cipher_suites, as Go's: the TLS 1.2 suites, in the server's order of preference; TLS
    // 1.3's are not configurable (Go's neither) and stay.
    if let Some(names) = &t.cipher_suites {
        let mut kept = Vec::new();
        for go in names {
            let found = provider
                .cipher_suites
                .iter()
                .find(|s| suite_matches(go, &format!("{:?}", s.suite())));
            match found {
                Some(s) if s.tls13().is_none() => kept.push(*s),
                Some(_) => {}
                None if go.starts_with("TLS_AES_") || go.starts_with("TLS_CHACHA20_") => {}
                None if go_only_suite(go) => bail!(
                    "cipher_suites: {go} is not offered: rustls implements no CBC and no RSA-key-exchange suite (no forward secrecy, padding-oracle attacks); leave it out, the others serve every current client ({})",
                    tls12_names(&provider)
                ),
                None => bail!(
                    "cipher_suites: unknown cipher '{go}' (Go's names; rustls offers {})",
                    tls12_names(&provider)
                ),
            }
        }
        if kept.is_empty() && lo_is_12(&versions) && !versions.contains(&&rustls::version::TLS13) {
            bail!("cipher_suites leaves no TLS 1.2 suite and TLS 1.3 is off");
        }
        let tls13: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some())
            .copied()
            .collect();
        provider.cipher_suites = tls13.into_iter().chain(kept).collect();
    }
    if let Some(curves) = &t.curve_preferences {
        let mut groups = Vec::new();
        for go in curves {
            let name = group_name(go)?;
            if let Some(g) = provider
                .kx_groups
                .iter()
                .find(|g| format!("{:?}", g.name()) == name)
            {
                groups.push(*g);
            }
        }
        if groups.is_empty() {
            bail!("curve_preferences leaves no curve");
        }
        provider.kx_groups = groups;
    }
    let provider = Arc::new(provider);
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| anyhow!("{e}"))?;
    let builder = match verifier(&t, dir, provider)? {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| anyhow!("the certificate and key do not go together: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // exporter-toolkit's default is the server's order.
    cfg.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    Ok((cfg, facts))
}

/// Whether `cipher_suites` lacks the suite HTTP/2 requires of TLS 1.2 (Go's http2 package
/// refuses to start without TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or its ECDSA twin when a
/// list is given and TLS 1.2 is allowed).
pub(super) fn lacks_http2_suite(t: &TlsFile) -> bool {
    let Some(names) = t.cipher_suites.as_ref().filter(|n| !n.is_empty()) else {
        return false;
    };
    t.min_version.as_deref() != Some("TLS13")
        && !names.iter().any(|n| {
            n == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
                || n == "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        })
}

/// Go's TLS 1.2 suites that rustls does not implement (CBC, RSA key exchange, 3DES, RC4).
fn go_only_suite(go: &str) -> bool {
    go.starts_with("TLS_")
        && (go.contains("_CBC_")
            || go.starts_with("TLS_RSA_WITH_")
            || go.contains("_RC4_")
            || go.contains("_3DES_"))
}

fn tls12_names(p: &rustls::crypto::CryptoProvider) -> String {
    p.cipher_suites
        .iter()
        .filter(|s| s.tls13().is_none())
        .map(|s| format!("{:?}", s.suite()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// id-kp-clientAuth (1.3.6.1.5.5.7.3.2), DER.
pub const CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
/// id-kp-serverAuth (1.3.6.1.5.5.7.3.1), DER.
pub const SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];

/// Whether a certificate trusted as itself (listed in a CA file and presented as the peer's
/// own, as Go accepts a self-signed certificate) may be used now for `purpose`: within its
/// validity, and its extended key usage (when it has one) allows it.
pub fn pinned_usable(
    cert: &[u8],
    now: i64,
    purpose: &[u8],
) -> Result<(), rustls::CertificateError> {
    let facts = cert_facts(cert).ok_or(rustls::CertificateError::BadEncoding)?;
    if facts.not_before.is_none_or(|t| t > now) {
        return Err(rustls::CertificateError::NotValidYet);
    }
    if facts.not_after.is_none_or(|t| t < now) {
        return Err(rustls::CertificateError::Expired);
    }
    let mut eku = None;
    for (oid, value) in extensions(cert).unwrap_or_default() {
        // extKeyUsage, 2.5.29.37: a SEQUENCE of OIDs.
        if oid == [0x55, 0x1d, 0x25] {
            let (_, mut list, _) = der(value).ok_or(rustls::CertificateError::BadEncoding)?;
            let mut found = Vec::new();
            while let Some((_, o, r)) = der(list) {
                list = r;
                found.push(o);
            }
            eku = Some(found);
        }
    }
    let any = [0x55, 0x1d, 0x25, 0x00];
    match eku {
        Some(list) if !list.iter().any(|o| *o == purpose || *o == any) => {
            Err(rustls::CertificateError::InvalidPurpose)
        }
        _ => Ok(()),
    }
}

/// The certificate's subject alternative names as Go's `client_allowed_sans` compares them:
/// DNS names, e-mail addresses, IP addresses (Go's text form) and URIs.
pub fn cert_sans(cert: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for (oid, value) in extensions(cert)? {
        if oid != [0x55, 0x1d, 0x11] {
            continue;
        }
        let (_, mut names, _) = der(value)?;
        while let Some((tag, v, r)) = der(names) {
            names = r;
            match tag {
                // dNSName, rfc822Name, uniformResourceIdentifier
                0x82 | 0x81 | 0x86 => out.push(String::from_utf8_lossy(v).into_owned()),
                0x87 if v.len() == 4 => {
                    out.push(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?).to_string())
                }
                0x87 if v.len() == 16 => {
                    let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?);
                    // Go writes an IPv4-mapped address as IPv4.
                    out.push(match ip.to_ipv4_mapped() {
                        Some(v4) => v4.to_string(),
                        None => ip.to_string(),
                    });
                }
                _ => {}
            }
        }
    }
    Some(out)
}

/// Whether the certificate's names cover `host`, a DNS name or an IP address (for a
/// certificate trusted as itself, whose name webpki did not check).
pub fn names_host(f: &CertFacts, host: &str) -> bool {
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        Ok(ip) => f.ips.contains(&ip),
        Err(_) => f.dns_names.iter().any(|p| name_covers(p, host)),
    }
}

fn lo_is_12(v: &[&'static rustls::SupportedProtocolVersion]) -> bool {
    v.contains(&&rustls::version::TLS12)
}

/// One DER element: its tag, its contents, and what follows it.
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&l0, rest) = rest.split_first()?;
    let (len, rest) = if l0 < 0x80 {
        (usize::from(l0), rest)
    } else {
        let n = usize::from(l0 & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, &x| (a << 8) | usize::from(x));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An X.509 time (UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ`) in Unix seconds.
fn x509_time(tag: u8, v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 if s.len() == 12 => {
            let yy: i64 = s[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &s[2..])
        }
        0x18 if s.len() == 14 => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    let n = |i: usize| rest.get(i..i + 2)?.parse::<i64>().ok();
    let (mo, d, h, mi, se) = (n(0)?, n(2)?, n(4)?, n(6)?, n(8)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(year, mo, d) * 86_400 + h * 3600 + mi * 60 + se)
}

/// What follows the first `fields` fields of a DER certificate's TBSCertificate (after its
/// optional `[0]` version); `None` when it does not parse.
fn tbs_after(cert: &[u8], fields: usize) -> Option<&[u8]> {
    let (_, cert, _) = der(cert)?;
    let (_, mut rest, _) = der(cert)?;
    if rest.first() == Some(&0xa0) {
        rest = der(rest)?.2;
    }
    for _ in 0..fields {
        rest = der(rest)?.2;
    }
    Some(rest)
}

/// The validity and subject alternative names of a DER certificate; `None` when it does not
/// parse (rustls has already accepted it by then, so that is only a missing warning).
pub fn cert_facts(cert: &[u8]) -> Option<CertFacts> {
    // After serialNumber, signature and issuer.
    let (_, validity, _) = der(tbs_after(cert, 3)?)?;
    let (t1, v1, r) = der(validity)?;
    let (t2, v2, _) = der(r)?;
    let mut facts = CertFacts {
        not_before: x509_time(t1, v1),
        not_after: x509_time(t2, v2),
        ..CertFacts::default()
    };
    // The subjectAltName extension (2.5.29.17): its DNS names and IP addresses.
    for (oid, value) in extensions(cert)? {
        if oid != [0x55, 0x1d, 0x11] {
            continue;
        }
        let (_, mut names, _) = der(value)?;
        while let Some((tag, v, r)) = der(names) {
            names = r;
            match tag {
                0x82 => facts
                    .dns_names
                    .push(String::from_utf8_lossy(v).to_ascii_lowercase()),
                0x87 if v.len() == 4 => facts
                    .ips
                    .push(std::net::IpAddr::from(<[u8; 4]>::try_from(v).ok()?)),
                0x87 if v.len() == 16 => facts
                    .ips
                    .push(std::net::IpAddr::from(<[u8; 16]>::try_from(v).ok()?)),
                _ => {}
            }
        }
    }
    Some(facts)
}

/// A DER certificate's extensions: each one's OID and the contents of its value (the
/// OCTET STRING's); `None` when it does not parse.
fn extensions(cert: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    // After serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
    let mut rest = tbs_after(cert, 6)?;
    let mut out = Vec::new();
    while let Some((tag, v, r)) = der(rest) {
        rest = r;
        if tag != 0xa3 {
            continue;
        }
        let (_, mut exts, _) = der(v)?;
        while let Some((_, ext, r)) = der(exts) {
            exts = r;
            let (_, oid, mut r) = der(ext)?;
            if r.first() == Some(&0x01) {
                r = der(r)?.2; // critical
            }
            let (_, octets, _) = der(r)?;
            out.push((oid, octets));
        }
    }
    Some(out)
}

/// Whether a DNS name of the certificate covers `host` (one leading `*.` label allowed).
fn name_covers(pattern: &str, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(base) => host
            .split_once('.')
            .is_some_and(|(first, rest)| !first.is_empty() && rest == base),
        None => pattern == host,
    }
}

/// What is wrong with the certificate for a server listening on `listen` on a machine named
/// `hostname`, at Unix time `now`: one line each (empty when nothing is).
pub fn cert_warnings(
    f: &CertFacts,
    listen: &std::net::SocketAddr,
    hostname: &str,
    now: i64,
) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(t) = f.not_after.filter(|t| *t <= now) {
        w.push(format!(
            "the certificate expired {} day(s) ago: scrapers that verify it will fail",
            (now - t) / 86_400
        ));
    } else if let Some(t) = f.not_after.filter(|t| *t - now < 14 * 86_400) {
        w.push(format!(
            "the certificate expires in {} day(s): renew it (the file is re-read when it changes)",
            (t - now) / 86_400
        ));
    }
    if let Some(t) = f.not_before.filter(|t| *t > now) {
        w.push(format!(
            "the certificate is not valid for another {} s (is this machine's clock right?)",
            t - now
        ));
    }
    let ip = listen.ip();
    let named = if ip.is_unspecified() {
        f.dns_names.iter().any(|p| name_covers(p, hostname))
            || f.dns_names.iter().any(|p| name_covers(p, "localhost"))
            || !f.ips.is_empty()
    } else {
        f.ips.contains(&ip) || f.dns_names.iter().any(|p| name_covers(p, hostname))
    };
    let names_something = !(f.dns_names.is_empty() && f.ips.is_empty());
    if names_something && !named {
        w.push(format!(
            "the certificate names {} but not this machine ({hostname}) or {ip}: scrapers that verify the name will fail",
            f.dns_names
                .iter()
                .cloned()
                .chain(f.ips.iter().map(|i| i.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x509_times_and_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        // `date -u -d 2026-12-03T07:00:00Z +%s`
        assert_eq!(x509_time(0x17, b"261203070000Z"), Some(1_796_281_200));
        assert_eq!(x509_time(0x18, b"20261203070000Z"), Some(1_796_281_200));
        assert_eq!(x509_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(x509_time(0x17, b"500101000000Z"), Some(-631_152_000));
        assert_eq!(x509_time(0x17, b"261303070000Z"), None);
        assert_eq!(x509_time(0x17, b"2612030700Z"), None);
    }

    #[test]
    fn names_cover_hosts() {
        assert!(name_covers("*.example.com", "a.example.com"));
        assert!(!name_covers("*.example.com", "a.b.example.com"));
        assert!(!name_covers("*.example.com", "example.com"));
        assert!(name_covers("gpu1", "GPU1"));
    }

    #[test]
    fn certificate_warnings() {
        let day = 86_400;
        let f = CertFacts {
            not_before: Some(1000 * day),
            not_after: Some(1100 * day),
            dns_names: vec!["gpu1.example.com".into(), "*.pods.example.com".into()],
            ips: vec!["10.0.0.5".parse().unwrap()],
        };
        let any: std::net::SocketAddr = "0.0.0.0:9400".parse().unwrap();
        let ip: std::net::SocketAddr = "10.0.0.5:9400".parse().unwrap();
        let other: std::net::SocketAddr = "10.0.0.6:9400".parse().unwrap();
        assert!(cert_warnings(&f, &ip, "x", 1050 * day).is_empty());
        assert!(cert_warnings(&f, &any, "gpu1.example.com", 1050 * day).is_empty());
        let w = cert_warnings(&f, &other, "gpu2.example.com", 1050 * day);
        assert!(
            w[0].contains("not this machine (gpu2.example.com) or 10.0.0.6"),
            "{w:?}"
        );
        let w = cert_warnings(&f, &ip, "x", 1102 * day);
        assert!(
            w[0].starts_with("the certificate expired 2 day(s) ago"),
            "{w:?}"
        );
        let w = cert_warnings(&f, &ip, "x", 1090 * day);
        assert!(
            w[0].starts_with("the certificate expires in 10 day(s)"),
            "{w:?}"
        );
        let w = cert_warnings(&f, &ip, "x", 999 * day);
        assert!(w[0].contains("not valid for another 86400 s"), "{w:?}");
    }

    #[test]
    fn go_names_of_suites_and_curves() {
        assert!(suite_matches(
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        ));
        assert!(suite_matches(
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        ));
        assert_eq!(group_name("CurveP256").unwrap(), "secp256r1");
        assert!(group_name("CurveP521")
            .unwrap_err()
            .to_string()
            .contains("not offered"));
    }
}
