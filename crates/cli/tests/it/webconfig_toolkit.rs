//! The web configuration files of Prometheus's exporter-toolkit (its `web/testdata`, with what
//! its `tls_config_test.go` expects of each), rewritten here with certificates made at run
//! time: each loads in `accel serve` as it does in exporter-toolkit, or is refused on purpose
//! with the reason in the one-line error (docs/serve.md lists those). Where the file is about
//! client certificates, handshakes with and without one check what it does, not only that
//! it loads. Then the reload test: a `client_ca_file` that goes missing (or is not usable,
//! or loses its `client_auth_type`) is refused on reload and the old configuration keeps
//! requiring client certificates.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::serve_common::*;

/// What exporter-toolkit does with a file, and what accel must do.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Loads (and serves).
    Loads,
    /// Refused at start, the error holding this text.
    Refused(&'static str),
}

/// A client for the handshake checks: no certificate, the CA-signed `client.crt`, or the
/// self-signed `self.crt` (`openssl req -x509`: CA:TRUE, extendedKeyUsage clientAuth, SAN
/// DNS:scraper-b).
#[derive(Debug, Clone, Copy)]
enum As {
    NoCert,
    Signed,
    SelfSigned,
}

struct Case {
    /// exporter-toolkit's file (or test) this stands for.
    name: &'static str,
    /// The web config; `KEY_PEM` and `CERT_PEM` stand for the server's key and certificate
    /// inline, `HASH(n)` for a bcrypt hash of cost n.
    yaml: &'static str,
    want: Want,
    /// Handshakes: who connects, and whether `/metrics` answers 200.
    shakes: &'static [(As, bool)],
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

/// The 41 files of exporter-toolkit's web/testdata (the names are its files').
fn toolkit_cases() -> Vec<Case> {
    use As::*;
    use Want::*;
    vec![
        Case {
            name: "tls_config_noAuth.requireandverifyclientcert.good.yml",
            // exporter-toolkit trusts its self-signed client certificate as the CA.
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: self.crt\n",
            want: Loads,
            shakes: &[(NoCert, false), (SelfSigned, true), (Signed, false)],
        },
        Case {
            name: "tls_config_noAuth.requireanyclientcert.good.yml",
            yaml: "TLS  client_auth_type: RequireAnyClientCert\n",
            want: Loads,
            shakes: &[(NoCert, false), (SelfSigned, true), (Signed, true)],
        },
        Case {
            name: "tls_config_noAuth.requireanyclientcertkeyinline.good.yml",
            yaml: "tls_server_config:\n  cert_file: server.crt\n  key: |\nKEY_PEM  client_auth_type: RequireAnyClientCert\n",
            want: Loads,
            shakes: &[(NoCert, false), (SelfSigned, true)],
        },
        Case {
            name: "web_config_auth_clientCAs_invalid.bad.yml",
            yaml: "TLS  client_ca_file: no-such-ca.crt\n",
            want: Refused("cannot read client_ca_file"),
            shakes: &[],
        },
        Case {
            // Not in exporter-toolkit's test tables; Go verifies against the system's CAs
            // (here SSL_CERT_FILE, our CA), as for ...good.blocking.yml, the same text.
            name: "web_config_auth_clientCAs_missing.bad.yml",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n",
            want: Loads,
            shakes: &[(NoCert, false), (Signed, true), (SelfSigned, false)],
        },
        Case {
            name: "web_config_auth_client_san.bad.yaml",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: self.crt\n  client_allowed_sans: [bad]\n",
            want: Loads,
            shakes: &[(SelfSigned, false), (NoCert, false)],
        },
        Case {
            name: "web_config_auth_client_san.good.yaml",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: self.crt\n  client_allowed_sans: [one, scraper-b, two]\n",
            want: Loads,
            shakes: &[(SelfSigned, true), (NoCert, false)],
        },
        Case {
            name: "web_config_auth_user_list_invalid.bad.yml",
            yaml: "TLSbasic_auth_users:\n  john: doe\n",
            want: Refused("is not a bcrypt hash"),
            shakes: &[],
        },
        Case {
            name: "web_config_empty.yml",
            yaml: "",
            want: Loads,
            shakes: &[],
        },
        Case {
            name: "web_config_headers.good.yml",
            yaml: "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000; includeSubDomains\n    X-Content-Type-Options: nosniff\n    X-XSS-Protection: 1\n    Content-Security-Policy: \"default-src 'self'\"\n",
            want: Loads,
            shakes: &[],
        },
        Case {
            name: "web_config_headers_content_type_options.bad.yml",
            yaml: "http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
            want: Refused("X-Content-Type-Options takes nosniff"),
            shakes: &[],
        },
        Case {
            name: "web_config_headers_extra_header.bad.yml",
            yaml: "http_server_config:\n  headers:\n    Content-Type: foo\n",
            want: Refused("'Content-Type' cannot be set"),
            shakes: &[],
        },
        Case {
            name: "web_config_headers_frame_options.bad.yml",
            yaml: "http_server_config:\n  headers:\n    X-Frame-Options: foo\n",
            want: Refused("X-Frame-Options takes deny or sameorigin"),
            shakes: &[],
        },
        Case {
            name: "web_config_junk.yml",
            yaml: "aG9tZQ1xJ2fWe3\nQ8vLp0sTzR4mKc\nYx7NbHd6uEoA1q\n",
            want: Refused("not a Prometheus web config file"),
            shakes: &[],
        },
        Case {
            name: "web_config_junk_key.yml",
            yaml: "tls_server_config:\n  cert_filse: server.crt\n",
            want: Refused("unknown field `cert_filse`"),
            shakes: &[],
        },
        Case {
            // Go: "client CA's have been configured without a Client Auth Policy" (after
            // reading /dev/null, which accel does not read: not a regular file).
            name: "web_config_noAuth.bad.yml",
            yaml: "TLS  client_ca_file: /dev/null\n",
            want: Refused("client_ca_file /dev/null"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth.good.blocking.yml",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n",
            want: Loads,
            shakes: &[(NoCert, false), (Signed, true)],
        },
        Case {
            name: "web_config_noAuth.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n",
            want: Loads,
            shakes: &[(NoCert, true), (Signed, true), (SelfSigned, false)],
        },
        Case {
            name: "web_config_noAuth_allCiphers.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites:\n  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n  - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256\n  - TLS_AES_128_GCM_SHA256\n  - TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA\n  - TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA\n",
            want: Refused("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA is not offered: rustls implements no CBC"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_allCurves.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  curve_preferences: [CurveP256, CurveP384, CurveP521, X25519]\n",
            want: Refused("CurveP521 is not offered: rustls with ring has no P-521"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_certPath_empty.bad.yml",
            yaml: "tls_server_config:\n  cert_file: \"\"\n  key_file: server.key\n",
            want: Refused("cert_file (or cert) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_certPath_invalid.bad.yml",
            yaml: "tls_server_config:\n  cert_file: no-such.crt\n  key_file: server.key\n",
            want: Refused("cannot read cert_file"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_certPath_keyPath_empty.bad.yml",
            yaml: "tls_server_config:\n  cert_file: \"\"\n  key_file: \"\"\n  client_auth_type: x\n",
            want: Refused("cert_file (or cert) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_certPath_keyPath_invalid.bad.yml",
            yaml: "tls_server_config:\n  cert_file: no-such.crt\n  key_file: no-such.key\n",
            want: Refused("cannot read cert_file"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_cert_empty.bad.yml",
            yaml: "tls_server_config:\n  cert: \"\"\n  key_file: server.key\n",
            want: Refused("cert_file (or cert) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_inventedCiphers.bad.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA4096]\n",
            want: Refused("unknown cipher 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA4096'"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_inventedCurves.bad.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  curve_preferences: [CurveP999]\n",
            want: Refused("unknown curve 'CurveP999'"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_keyPath_empty.bad.yml",
            yaml: "tls_server_config:\n  cert_file: server.crt\n  key_file: \"\"\n",
            want: Refused("key_file (or key) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_keyPath_invalid.bad.yml",
            yaml: "tls_server_config:\n  cert_file: server.cert\n  key_file: no-such.key\n",
            want: Refused("cannot read cert_file"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_key_empty.bad.yml",
            yaml: "tls_server_config:\n  cert_file: server.crt\n  key: \"\"\n",
            want: Refused("key_file (or key) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_noHTTP2.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n  max_version: TLS12\nhttp_server_config:\n  http2: false\n",
            want: Loads,
            shakes: &[(NoCert, true)],
        },
        Case {
            name: "web_config_noAuth_noHTTP2Cipher.bad.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n  max_version: TLS12\n",
            want: Refused("which HTTP/2 requires with TLS 1.2"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_someCiphers.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites:\n  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n  - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n  min_version: TLS12\n  max_version: TLS12\n",
            want: Loads,
            shakes: &[(NoCert, true)],
        },
        Case {
            name: "web_config_noAuth_someCiphers_noOrder.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  cipher_suites:\n  - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n  prefer_server_cipher_suites: false\n  min_version: TLS12\n  max_version: TLS12\n",
            want: Loads,
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_someCurves.good.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  min_version: TLS13\n  curve_preferences: [CurveP521]\n",
            want: Refused("CurveP521 is not offered"),
            shakes: &[],
        },
        Case {
            name: "web_config_noAuth_tlsInline.good.yml",
            yaml: "tls_server_config:\n  cert: |\nCERT_PEM  key: |\nKEY_PEM  client_auth_type: VerifyClientCertIfGiven\n",
            want: Loads,
            shakes: &[(NoCert, true)],
        },
        Case {
            name: "web_config_noAuth_wrongTLSVersion.bad.yml",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  min_version: TLS111\n",
            want: Refused("unknown TLS version 'TLS111'"),
            shakes: &[],
        },
        Case {
            name: "web_config_rate_limiter_nonblocking.yaml",
            yaml: "rate_limit:\n  interval: 0\n  burst: 0\n",
            want: Loads,
            shakes: &[],
        },
        Case {
            name: "web_config_rate_limiter_one_second.yaml",
            yaml: "rate_limit:\n  interval: 1s\n  burst: 0\n",
            want: Loads,
            shakes: &[],
        },
        Case {
            // One user's hash has cost 18: accel's limit is 14 (documented).
            name: "web_config_users.good.yml",
            yaml: "TLSbasic_auth_users:\n  alice: HASH(12)\n  bob: HASH(18)\n  carol: HASH(10)\n",
            want: Refused("has cost 18; at most 14 is accepted, accel's own limit"),
            shakes: &[],
        },
        Case {
            name: "web_config_users_noTLS.good.yml",
            yaml: "basic_auth_users:\n  alice: HASH(12)\n  bob: HASH(18)\n  dave: HASH(10)\n",
            want: Refused("has cost 18; at most 14 is accepted, accel's own limit"),
            shakes: &[],
        },
    ]
}

/// Four cases exporter-toolkit's tests write in code, and accel's own around client
/// certificates: never fail open.
fn own_cases() -> Vec<Case> {
    use As::*;
    use Want::*;
    vec![
        Case {
            // TestYAMLFiles: a config path that does not exist ("no such file").
            name: "(test) path to config yml invalid",
            yaml: "MISSING",
            want: Refused("No such file"),
            shakes: &[],
        },
        Case {
            // TestTLSConfigIsEnabled: a client CA alone turns TLS on, then lacks a certificate.
            name: "(test) only client CA file set",
            yaml: "tls_server_config:\n  client_ca_file: ca.crt\n",
            want: Refused("cert_file (or cert) is missing or empty"),
            shakes: &[],
        },
        Case {
            name: "(test) only client auth type set",
            yaml: "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
            want: Refused("cert_file (or cert) is missing or empty"),
            shakes: &[],
        },
        Case {
            // tls_config.go keeps RequireClientCert as RequireAnyClientCert's old name.
            name: "(tls_config.go) RequireClientCert",
            yaml: "TLS  client_auth_type: RequireClientCert\n",
            want: Loads,
            shakes: &[(NoCert, false), (SelfSigned, true)],
        },
        Case {
            name: "client_ca_file without client_auth_type",
            yaml: "TLS  client_ca_file: ca.crt\n",
            want: Refused("client_ca_file ca.crt is set but client_auth_type is not"),
            shakes: &[],
        },
        Case {
            name: "client_ca inline without client_auth_type",
            yaml: "TLS  client_ca: |\nCA_PEM",
            want: Refused("client_ca is set but client_auth_type is not"),
            shakes: &[],
        },
        Case {
            name: "client_ca_file that does not exist",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: no-such-ca.crt\n",
            want: Refused("cannot read client_ca_file"),
            shakes: &[],
        },
        Case {
            name: "client_ca_file holding no certificate",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.key\n",
            want: Refused("client_ca_file server.key holds no PEM certificate"),
            shakes: &[],
        },
        Case {
            name: "client_allowed_sans with no certificate asked for",
            yaml: "TLS  client_allowed_sans: [scraper-b]\n",
            want: Refused("client_allowed_sans is set but client_auth_type asks for no certificate"),
            shakes: &[],
        },
        Case {
            name: "client_allowed_sans empty",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  client_allowed_sans: []\n",
            want: Refused("client_allowed_sans is empty"),
            shakes: &[],
        },
        Case {
            name: "client_allowed_sans with an optional certificate",
            yaml: "TLS  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: self.crt\n  client_allowed_sans: [scraper-b]\n",
            want: Loads,
            shakes: &[(NoCert, false), (SelfSigned, true)],
        },
        Case {
            name: "RequireAnyClientCert with a CA: given certificates are verified",
            yaml: "TLS  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.crt\n",
            want: Loads,
            shakes: &[(NoCert, false), (Signed, true), (SelfSigned, false)],
        },
        Case {
            name: "RequestClientCert",
            yaml: "TLS  client_auth_type: RequestClientCert\n",
            want: Loads,
            shakes: &[(NoCert, true), (SelfSigned, true)],
        },
        Case {
            name: "RequireAndVerifyClientCert with the CA",
            yaml: "TLS  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
            want: Loads,
            shakes: &[(NoCert, false), (Signed, true), (SelfSigned, false)],
        },
        Case {
            name: "TLS 1.0 as min_version",
            yaml: "TLS  min_version: TLS10\n",
            want: Refused("TLS 1.0 and 1.1 are not offered"),
            shakes: &[],
        },
    ]
}

/// The CA, server and client certificates of `certificates()`, and a self-signed client one.
fn make_certificates(dir: &Path) -> bool {
    let d = dir.display();
    certificates(dir)
        && sh(&format!(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout {d}/self.key -out {d}/self.crt -days 2 -subj /CN=scraper-b -addext extendedKeyUsage=clientAuth -addext subjectAltName=DNS:scraper-b 2>/dev/null"
        ))
        .0
}

/// The case's text with its placeholders filled in.
fn render(yaml: &str, dir: &Path) -> String {
    let indent = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    let mut out = yaml.replacen("TLS", TLS, 1);
    if !yaml.starts_with("TLS") {
        out = yaml.to_string();
    }
    out = out
        .replace("KEY_PEM", &indent("server.key"))
        .replace("CERT_PEM", &indent("server.crt"))
        .replace("CA_PEM", &indent("ca.crt"));
    for cost in [10, 12, 18] {
        let h = bcrypt::hash("pw", 4)
            .unwrap()
            .replacen("$04$", &format!("${cost}$"), 1);
        out = out.replace(&format!("HASH({cost})"), &format!("'{h}'"));
    }
    out
}

/// `accel serve` on `file`; `Ok(child, address)` once it serves, or `Err((exit code, stderr))`.
fn start(
    file: &Path,
    dir: &Path,
) -> Result<(Proc, String, std::process::ChildStderr), (Option<i32>, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "0.5"])
        .arg("--web.config.file")
        .arg(file)
        // "This machine's CA bundle" for the Verify types without client_ca_file: ours.
        .env("SSL_CERT_FILE", dir.join("ca.crt"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("accel runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    if let Some(addr) = line.split("://").nth(1).and_then(|r| r.split('/').next()) {
        return Ok((Proc(child), addr.to_string(), stderr));
    }
    let status = child.wait().unwrap();
    let mut e = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut e).unwrap();
    Err((status.code(), e))
}

/// Whether `/metrics` answers 200 over TLS to this client.
fn shake(dir: &Path, addr: &str, who: As) -> bool {
    let d = dir.display();
    let cert = match who {
        As::NoCert => String::new(),
        As::Signed => format!("--cert {d}/client.crt --key {d}/client.key"),
        As::SelfSigned => format!("--cert {d}/self.crt --key {d}/self.key"),
    };
    let (_, code) = sh(&format!(
        "curl -s -m 5 -o /dev/null -w '%{{http_code}}' --cacert {d}/ca.crt {cert} https://{addr}/metrics"
    ));
    code == "200"
}

fn tools(dir: &Path) -> bool {
    let ok = Command::new("curl").arg("--version").output().is_ok() && make_certificates(dir);
    if !ok {
        println!("skipped: the openssl and curl commands are needed to make and use certificates");
    }
    ok
}

#[test]
fn exporter_toolkit_configs_load_or_are_refused_on_purpose() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("accel-tk-table-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if !tools(&dir) {
        return;
    }
    let toolkit = toolkit_cases();
    assert_eq!(toolkit.len(), 41);
    let mut failures = Vec::new();
    let (mut loads, mut refused, mut shakes) = (0, 0, 0);
    for (i, c) in toolkit.iter().chain(own_cases().iter()).enumerate() {
        let file = if c.yaml == "MISSING" {
            dir.join("no-such-web.yml")
        } else {
            let f = dir.join(format!("case{i}.yml"));
            std::fs::write(&f, render(c.yaml, &dir)).unwrap();
            f
        };
        match (start(&file, &dir), c.want) {
            (Ok((p, addr, _err)), Want::Loads) => {
                loads += 1;
                for &(who, ok) in c.shakes {
                    shakes += 1;
                    if shake(&dir, &addr, who) != ok {
                        failures.push(format!(
                            "{}: {who:?} was {}",
                            c.name,
                            if ok { "refused" } else { "served" }
                        ));
                    }
                }
                drop(p);
            }
            (Ok(_), Want::Refused(says)) => {
                failures.push(format!("{}: loads, expected refused with {says:?}", c.name))
            }
            (Err((code, e)), Want::Refused(says)) => {
                refused += 1;
                if code != Some(1) || !e.contains(says) || e.trim_end().lines().count() != 1 {
                    failures.push(format!(
                        "{}: exit {code:?}, expected one line with {says:?}: {e}",
                        c.name
                    ));
                }
            }
            (Err((code, e)), Want::Loads) => failures.push(format!(
                "{}: refused (exit {code:?}), expected to load: {e}",
                c.name
            )),
        }
    }
    println!(
        "{} cases ({} of exporter-toolkit): {loads} load, {refused} refused as expected, {shakes} handshakes checked",
        loads + refused,
        toolkit.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unusable_client_ca_on_reload_leaves_client_certificates_required() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("accel-tk-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if !tools(&dir) {
        return;
    }
    let web = dir.join("web.yml");
    let good =
        format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    std::fs::write(&web, &good).unwrap();
    let (p, addr, stderr) = start(&web, &dir).unwrap_or_else(|e| panic!("{e:?}"));
    let lines = {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let required = |why: &str| {
        assert!(
            !shake(&dir, &addr, As::NoCert),
            "{why}: served without a client certificate"
        );
        assert!(
            !shake(&dir, &addr, As::SelfSigned),
            "{why}: served a certificate of no CA"
        );
        assert!(
            shake(&dir, &addr, As::Signed),
            "{why}: refused the CA's client certificate"
        );
    };
    required("at start");
    // Three versions that must not load: the CA file gone, a CA file with no certificate,
    // and the CA without a client_auth_type (which would ask no one for a certificate).
    for (i, (text, says)) in [
        (
            format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: gone.crt\n"),
            "cannot read client_ca_file",
        ),
        (
            format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.key\n"),
            "holds no PEM certificate",
        ),
        (format!("{TLS}  client_ca_file: ca.crt\n"), "client_auth_type is not"),
        // An emptied file (or one caught half-written) would turn TLS off.
        (String::new(), "a reload cannot turn TLS off"),
    ]
    .into_iter()
    .enumerate()
    {
        let text = if text.is_empty() { " ".repeat(i + 1) } else { format!("{text}# version {i}\n") };
        std::fs::write(&web, text).unwrap();
        let t = Instant::now();
        let line = loop {
            let left = Duration::from_secs(10).saturating_sub(t.elapsed());
            match lines.recv_timeout(left) {
                Ok(l) if l.contains("does not load") => break l,
                Ok(_) => {}
                Err(_) => panic!("no refusal of version {i} on stderr within 10 s"),
            }
        };
        assert!(
            line.contains("the previous version stays in force") && line.contains(says),
            "{line}"
        );
        required(&format!("after version {i}"));
        let (_, plain) = sh(&format!("curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://{addr}/metrics"));
        assert_eq!(plain, "000", "after version {i}: plain HTTP answered");
    }
    // The reload failure is exported (at the next collection).
    let d = dir.display();
    let t = Instant::now();
    loop {
        let (_, body) = sh(&format!(
            "curl -s --cacert {d}/ca.crt --cert {d}/client.crt --key {d}/client.key https://{addr}/metrics"
        ));
        if sample(&body, "accel_exporter_web_config_last_reload_success") == Some(0.0) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Fixed again, it loads: the self-signed client becomes the one trusted.
    std::fs::write(
        &web,
        format!(
            "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: self.crt\n"
        ),
    )
    .unwrap();
    let t = Instant::now();
    while !shake(&dir, &addr, As::SelfSigned) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the fixed file was not loaded"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!shake(&dir, &addr, As::Signed));
    assert!(!shake(&dir, &addr, As::NoCert));
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}
