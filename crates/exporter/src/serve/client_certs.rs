//! Client certificates for `tls_server_config` (`client_auth_type`, `client_ca_file`,
//! `client_allowed_sans`), as exporter-toolkit asks Go's `crypto/tls` for them: which
//! certificates a server asks for and which it accepts (`client_verifier`), checked by
//! rustls's WebPKI verifier where a CA is given, by the machine's CA bundle for the Verify
//! types without one, and by the handshake's signature alone for `RequireAnyClientCert`.
//! Split from `tls` (the server configuration and the certificates' DER) by role.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use tokio_rustls::rustls;

use super::tls::*;

/// Go's `tls.ClientAuthType`, by exporter-toolkit's names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ClientAuth {
    No,
    Request,
    RequireAny,
    VerifyIfGiven,
    RequireAndVerify,
}

fn client_auth(s: Option<&str>) -> anyhow::Result<ClientAuth> {
    Ok(match s.unwrap_or("") {
        "" | "NoClientCert" => ClientAuth::No,
        "RequestClientCert" => ClientAuth::Request,
        // RequireClientCert: exporter-toolkit's older name.
        "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAny,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
        other => bail!(
            "client_auth_type '{other}' is not one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
        ),
    })
}

/// Where the system's CA bundle is (Go's list for Linux and the BSDs; `SSL_CERT_FILE` first).
const SYSTEM_BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// This machine's trusted CAs, as Go reads them when `ClientCAs` is not set.
fn system_roots() -> Option<rustls::RootCertStore> {
    use rustls_pki_types::pem::PemObject;
    let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    env.into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find_map(|p| {
            let pem = crate::input::read_file(&p, "the CA bundle", 16 << 20).ok()?;
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(
                rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()).flatten(),
            );
            (!roots.is_empty()).then_some(roots)
        })
}

/// The client-certificate check `t` asks for; `None`: no certificate is asked for.
///
/// As exporter-toolkit: `client_ca_file` (or `client_ca`) without a `client_auth_type` that
/// asks for certificates is an error (it would check nothing); the Verify types without a CA
/// verify against this machine's CA bundle, as Go does; RequestClientCert and
/// RequireAnyClientCert without a CA take any certificate whose key signs the handshake. A
/// CA file that cannot be read or holds no usable certificate is an error, never "no check".
/// Unlike exporter-toolkit, a given CA is checked whatever the type (Go checks it only for
/// the Verify types), and `client_allowed_sans` makes a certificate required.
pub(super) fn client_verifier(
    t: &TlsFile,
    dir: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>> {
    use rustls::server::WebPkiClientVerifier;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    let ca_pem = pem_text(dir, &t.client_ca_file, &t.client_ca, "client_ca_file")?;
    let kind = client_auth(t.client_auth_type.as_deref())?;
    let ca_name = || match &t.client_ca_file {
        Some(f) if !f.as_os_str().is_empty() => format!("client_ca_file {}", f.display()),
        _ => "client_ca".to_string(),
    };
    let ca: Option<Vec<CertificateDer<'static>>> = match &ca_pem {
        None => None,
        Some(pem) => {
            let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow!("{} is not PEM certificates: {e}", ca_name()))?;
            if certs.is_empty() {
                bail!(
                    "{} holds no PEM certificate, so no client certificate could be verified",
                    ca_name()
                );
            }
            Some(certs)
        }
    };
    if kind == ClientAuth::No {
        if ca.is_some() {
            bail!(
                "{} is set but client_auth_type is not (or is NoClientCert), so no client would be asked for a certificate: add client_auth_type: RequireAndVerifyClientCert (exporter-toolkit refuses this too)",
                ca_name()
            );
        }
        if t.client_allowed_sans.is_some() {
            bail!("client_allowed_sans is set but client_auth_type asks for no certificate, so no name would be checked: add client_auth_type: RequireAndVerifyClientCert and client_ca_file");
        }
        return Ok(None);
    }
    let sans = match &t.client_allowed_sans {
        Some(v) if v.is_empty() => {
            bail!("client_allowed_sans is empty, so no client certificate could ever be accepted")
        }
        other => other.clone(),
    };
    let (webpki, pinned, hints) = match ca {
        Some(certs) => {
            let mut roots = rustls::RootCertStore::empty();
            for (i, c) in certs.iter().enumerate() {
                roots.add(c.clone()).map_err(|e| {
                    anyhow!("{}: certificate {} cannot be a CA: {e}", ca_name(), i + 1)
                })?;
            }
            let hints = roots.subjects();
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| anyhow!("{}: {e}", ca_name()))?;
            (Some(v), certs, hints)
        }
        None if matches!(
            kind,
            ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify
        ) =>
        {
            let roots = system_roots().ok_or_else(|| {
                anyhow!(
                    "client_auth_type {} without client_ca_file verifies client certificates against this machine's CA bundle (as exporter-toolkit does), and none was found (SSL_CERT_FILE, {}): name the CA that signs the clients' certificates in client_ca_file",
                    t.client_auth_type.as_deref().unwrap_or_default(),
                    SYSTEM_BUNDLES.join(", ")
                )
            })?;
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .clear_root_hint_subjects()
                .build()
                .map_err(|e| anyhow!("the system's CA bundle: {e}"))?;
            (Some(v), Vec::new(), Vec::new())
        }
        None => (None, Vec::new(), Vec::new()),
    };
    let mandatory =
        sans.is_some() || matches!(kind, ClientAuth::RequireAny | ClientAuth::RequireAndVerify);
    Ok(Some(Arc::new(ClientCerts {
        webpki,
        pinned,
        allowed_sans: sans,
        mandatory,
        hints,
        provider,
    })))
}

/// The client-certificate check: a CA's (webpki's), or any certificate; a certificate of the
/// CA file presented as itself (a self-signed one, as `openssl req -x509` makes) is trusted as
/// Go trusts it; then `client_allowed_sans`. Handshake signatures are always checked.
#[derive(Debug)]
struct ClientCerts {
    webpki: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    pinned: Vec<rustls_pki_types::CertificateDer<'static>>,
    allowed_sans: Option<Vec<String>>,
    mandatory: bool,
    hints: Vec<rustls::DistinguishedName>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::server::danger::ClientCertVerifier for ClientCerts {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        intermediates: &[rustls_pki_types::CertificateDer<'_>],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            pinned_usable(end_entity.as_ref(), now.as_secs() as i64, CLIENT_AUTH)
                .map_err(rustls::Error::InvalidCertificate)?;
        } else if let Some(v) = &self.webpki {
            v.verify_client_cert(end_entity, intermediates, now)?;
        }
        if let Some(allowed) = &self.allowed_sans {
            let names = cert_sans(end_entity.as_ref()).unwrap_or_default();
            if !names.iter().any(|n| allowed.contains(n)) {
                return Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ));
            }
        }
        Ok(rustls::server::danger::ClientCertVerified::assertion())
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
