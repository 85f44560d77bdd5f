//! `accel serve` with real parts: scraped over HTTP, checked by `promtool`, scraped by a real
//! Prometheus and read back through its query API, and put under load on loopback.
//! Prometheus and promtool come from Debian's `prometheus` package (scripts/test.sh installs
//! it); without them those parts print `skipped:` (and fail when ACCEL_TEST_REQUIRE names
//! `prometheus`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::serve_common::*;

#[test]
fn metrics_healthz_and_promtool() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (_p, addr) = serve("1");
    let mut c = Client::new(addr);
    // Content negotiation: OpenMetrics when asked for (as Prometheus asks), else the classic
    // text format 0.0.4, which has no `# EOF`.
    let (code, ctype, text) = c
        .get_with(
            "/metrics",
            "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3\r\n",
        )
        .unwrap();
    assert_eq!(code, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    let (code, ctype, plain) = c.get("/metrics").unwrap();
    assert_eq!(code, 200);
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    assert!(!plain.contains("# EOF"), "{plain}");
    assert!(
        plain.contains("# TYPE accel_host_cpu_percent gauge"),
        "{plain}"
    );
    // /snapshot is accel monitor --json's document.
    let (code, ctype, snap) = c.get("/snapshot").unwrap();
    assert_eq!((code, ctype.as_str()), (200, "application/json"));
    let snap: serde_json::Value = serde_json::from_str(&snap).unwrap();
    assert_eq!(snap["kind"], "monitor");
    assert_eq!(snap["schema_version"], 3);
    let monitor_schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../schemas/monitor.schema.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = jsonschema::validator_for(&monitor_schema)
        .unwrap()
        .iter_errors(&snap)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "/snapshot against monitor.schema.json: {errors:?}"
    );
    assert_eq!(c.get("/-/ready").unwrap().0, 200);
    let ram = sample(&text, "accel_host_memory_total_bytes").expect("RAM");
    assert_eq!(ram as u64, accelkit::system::memory().unwrap().total_bytes);
    assert!(
        text.contains("accel_backend_available{backend=\"cpu\""),
        "{text}"
    );
    assert!(
        sample(&text, "accel_host_cpu_core_percent").is_some(),
        "{text}"
    );
    // Every vendor's reader answered; the only accelerators its monitoring interfaces show
    // are this machine's NVIDIA GPUs, none on a machine without one (XLA's CPU plugin and
    // lavapipe are not hardware): a device series for each, and no other.
    for v in ["nvidia", "amd", "intel", "tpu"] {
        assert!(
            text.contains(&format!("accel_collector_success{{collector=\"{v}\"")),
            "{v}: {text}"
        );
    }
    let up: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("accel_device_up{"))
        .collect();
    let gpus = accelkit_testkit::nvidia_gpus();
    assert_eq!(up.len(), gpus.len(), "{text}");
    for (i, g) in gpus.iter().enumerate() {
        assert!(
            up.iter()
                .any(|l| l.contains(&format!("device=\"nvidia:{i}\""))
                    && l.contains(&format!("pci_bus_id=\"{g}\""))),
            "nvidia:{i} at {g}: {up:?}"
        );
    }
    assert_eq!(c.get("/healthz").unwrap().0, 200);
    assert_eq!(c.get("/nope").unwrap().0, 404);
    if tool("promtool") {
        let mut p = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let o = p.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    } else {
        println!("skipped: prometheus: promtool not installed (metrics_healthz_and_promtool)");
    }
}

#[test]
fn a_bad_address_is_an_error_not_a_panic() {
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--listen", "not-an-address"])
        .output()
        .unwrap();
    // A usage error (exit 2), named by clap with the forms that work.
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("'not-an-address' is not an address to listen on"),
        "{e}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--interval", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn fixture_gpus_and_tpus_are_stored_and_a_removed_card_goes_down() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if !tool("prometheus") {
        println!("skipped: prometheus: not installed (fixture_gpus_and_tpus_are_stored_and_a_removed_card_goes_down)");
        return;
    }
    // One machine made of two fixtures: an AMD discrete GPU and an Intel xe GPU (with two
    // processes' fdinfo), and a TPU VM's four chips.
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../telemetry/tests/fixtures/telemetry");
    let dir = std::env::temp_dir().join(format!("accel-fixture-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("root");
    copy_tree(&fixtures.join("mixed"), &root);
    copy_tree(&fixtures.join("tpu-vm/sys"), &root.join("sys"));
    let sys = root.join("sys");
    let proc_ = root.join("proc");
    let (_p, addr) = serve_with(
        "1",
        &[
            "--path.sysfs",
            sys.to_str().unwrap(),
            "--path.procfs",
            proc_.to_str().unwrap(),
            "--tpu.metrics-address",
            &format!("127.0.0.1:{}", free_port()),
        ],
    );
    let (_prom, query) = prometheus(&dir.join("prom"), addr);
    let up = |vendor: &str| format!("accel_device_up{{vendor=\"{vendor}\"}}");
    let all_up = |n: usize| {
        move |r: &[(serde_json::Value, f64)]| r.len() == n && r.iter().all(|(_, v)| *v == 1.0)
    };
    let log = || std::fs::read_to_string(dir.join("prom/prometheus.log")).unwrap_or_default();
    wait_for(&query, &up("amd"), 60, all_up(1))
        .unwrap_or_else(|| panic!("the AMD GPU was not stored as up within 60 s:\n{}", log()));
    wait_for(&query, &up("intel"), 10, all_up(1)).expect("the Intel GPU, up");
    wait_for(&query, &up("tpu"), 10, all_up(4)).expect("four TPU chips, up");
    // The fixture's own numbers, stored by Prometheus.
    let value = |q: &str| -> Option<f64> { query(q).as_ref().map(results)?.first().map(|r| r.1) };
    // gpu_busy_percent is 42; mem_info_vram_total 25769803776 (24 GiB).
    assert_eq!(
        value("accel_device_utilization_percent{vendor=\"amd\"}"),
        Some(42.0)
    );
    assert_eq!(
        value("accel_device_memory_total_bytes{vendor=\"amd\"}"),
        Some(25_769_803_776.0)
    );
    // The xe card: tile0/physical_vram_size_bytes 12884901888 (12 GiB), act_freq 2850 MHz.
    assert_eq!(
        value("accel_device_memory_total_bytes{vendor=\"intel\"}"),
        Some(12_884_901_888.0)
    );
    assert_eq!(
        value("accel_device_clock_core_hertz{vendor=\"intel\"}"),
        Some(2.85e9)
    );
    // pid 1234 (python3) holds drm-memory-vram 1048576 KiB on the AMD card; pid 6000
    // (llama-server) 2 GiB on the xe card.
    assert_eq!(
        value(
            "accel_device_process_memory_bytes{pid=\"1234\",command=\"python3\",device=\"amd:0\"}"
        ),
        Some(1_073_741_824.0)
    );
    assert_eq!(
        value("accel_device_process_memory_bytes{pid=\"6000\",device=\"intel:1\"}"),
        Some(2_147_483_648.0)
    );
    // A process named `evil"na\me` (fixture pid 7000, 4096 KiB): its label was escaped, so
    // the scrape was accepted and the name stored as it is.
    let evil = query("accel_device_process_memory_bytes{pid=\"7000\"}")
        .as_ref()
        .map(results)
        .unwrap_or_default();
    assert_eq!(evil.len(), 1, "{evil:?}");
    assert_eq!(evil[0].0["command"], "evil\"na\\me");
    assert_eq!(evil[0].1, 4096.0 * 1024.0);
    // The host, from the fixture's procfs: MemTotal 65536000 kB, MemAvailable 49152000 kB,
    // 2048000 kB of swap in use, load 3.50 / 2.25 / 1.00, four cores.
    assert_eq!(
        value("accel_host_memory_total_bytes"),
        Some(65_536_000.0 * 1024.0)
    );
    assert_eq!(
        value("accel_host_memory_used_bytes"),
        Some(16_384_000.0 * 1024.0)
    );
    assert_eq!(
        value("accel_host_swap_used_bytes"),
        Some(2_048_000.0 * 1024.0)
    );
    assert_eq!(value("accel_host_load_average{window=\"1m\"}"), Some(3.5));
    assert_eq!(
        query("count(accel_host_cpu_core_percent)")
            .as_ref()
            .map(results)
            .and_then(|r| r.first().map(|r| r.1)),
        Some(4.0)
    );
    assert_eq!(
        value("accel_collector_success{collector=\"tpu\"}"),
        Some(1.0),
        "no TPU runtime answering is 'not reporting', not a failed collector"
    );
    // The AMD card is unplugged (its class link and its PCI device disappear): within 10 s
    // its row is down, not gone.
    std::fs::remove_file(sys.join("class/drm/card0")).unwrap();
    let t = Instant::now();
    wait_for(&query, &up("amd"), 12, |r| r.len() == 1 && r[0].1 == 0.0).unwrap_or_else(|| {
        panic!(
            "accel_device_up of the removed AMD card did not drop to 0: {:?}",
            query(&up("amd"))
        )
    });
    println!(
        "the removed AMD card was stored as down {:.1} s after it went",
        t.elapsed().as_secs_f64()
    );
    assert!(t.elapsed() < Duration::from_secs(12));
    // The others stay up.
    assert_eq!(value(&up("intel")), Some(1.0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_and_monitor_load_no_compute_library() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    // The test command sets VIRTUAL_ENV to an environment holding XLA's CPU plugin, and
    // lavapipe is installed: a monitor that probed the backends would map both.
    let (p, addr) = serve("0.2");
    let mut c = Client::new(addr);
    for _ in 0..3 {
        assert_eq!(c.get("/metrics").unwrap().0, 200);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        compute_libraries(p.0.id()),
        Vec::<String>::new(),
        "accel serve"
    );
    let mut m = Proc(
        Command::new(env!("CARGO_BIN_EXE_accel"))
            .args(["monitor", "--json", "--interval", "0.2", "--count", "50"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    let mut out = BufReader::new(m.0.stdout.take().unwrap());
    for _ in 0..3 {
        line.clear();
        out.read_line(&mut line).unwrap();
        assert!(line.contains("\"kind\":\"monitor\""), "{line}");
    }
    assert_eq!(
        compute_libraries(m.0.id()),
        Vec::<String>::new(),
        "accel monitor"
    );
    // The check itself sees libraries: a process that does load the plugin shows it.
    if std::env::var_os("VIRTUAL_ENV").is_some() {
        let mut probe = Proc(
            Command::new(env!("CARGO_BIN_EXE_accel"))
                .args([
                    "bench", "matmul", "--device", "xla:0", "--size", "64", "--iters", "100000",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Until it maps one: a GPU plugin (JAX's CUDA plugin on a GPU machine) starts in a
        // probe helper first, then here, each start initialising CUDA.
        let t = Instant::now();
        let mut seen = Vec::new();
        let mut exited = None;
        while t.elapsed() < Duration::from_secs(60) && seen.is_empty() && exited.is_none() {
            std::thread::sleep(Duration::from_millis(200));
            seen = compute_libraries(probe.0.id());
            exited = probe.0.try_wait().ok().flatten();
        }
        let _ = probe.0.kill();
        if accelkit::xla::devices().is_empty() {
            println!("skipped: xla: no PJRT plugin to show the maps check a positive case");
        } else {
            assert!(
                !seen.is_empty(),
                "a process using xla:0 maps no plugin after {:.0} s? (exited: {exited:?})",
                t.elapsed().as_secs_f64()
            );
        }
    }
}

#[test]
fn a_real_prometheus_scrapes_and_stores_the_series() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if !tool("prometheus") {
        println!(
            "skipped: prometheus: not installed (a_real_prometheus_scrapes_and_stores_the_series)"
        );
        return;
    }
    let (_p, addr) = serve("1");
    let dir = std::env::temp_dir().join(format!("accel-prom-{}", std::process::id()));
    let (_prom, query) = prometheus(&dir, addr);
    let value = |v: &serde_json::Value| -> Option<f64> {
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let t0 = Instant::now();
    let mut got = None;
    while t0.elapsed() < Duration::from_secs(60) {
        if let Some(v) = query("accel_host_memory_total_bytes")
            .as_ref()
            .and_then(value)
        {
            got = Some(v);
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let ram =
        got.unwrap_or_else(|| panic!("Prometheus stored no accel series within 60 s:\n{log}"));
    assert_eq!(ram as u64, accelkit::system::memory().unwrap().total_bytes);
    let up = query("up{job=\"accel\"}").as_ref().and_then(value);
    assert_eq!(up, Some(1.0));
    let cpu = query("accel_backend_available{backend=\"cpu\"}")
        .as_ref()
        .and_then(value);
    assert_eq!(cpu, Some(1.0));
    println!(
        "Prometheus stored accel's series {:.1} s after it started",
        t0.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tls_and_basic_auth_from_a_web_config_file_with_a_real_prometheus() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let curl_ok = Command::new("curl").arg("--version").output().is_ok();
    let dir = std::env::temp_dir().join(format!("accel-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if !curl_ok || !certificates(&dir) {
        println!(
            "skipped: tls: the openssl and curl commands are needed to make and use certificates"
        );
        return;
    }
    let hash = bcrypt::hash("s3cret-pw", 6).unwrap();
    std::fs::write(
        dir.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prom: {hash}\n"
        ),
    )
    .unwrap();
    let web = dir.join("web.yml");
    let (_p, addr) = serve_with("1", &["--web.config.file", web.to_str().unwrap()]);
    let d = dir.display();
    let curl = |args: &str| {
        sh(&format!(
            "curl -s -o {d}/body -w '%{{http_code}}' {args} https://{addr}/metrics"
        ))
    };
    // Right password, the CA given: 200.
    let (ok, code) = curl(&format!("--cacert {d}/ca.crt -u prom:s3cret-pw"));
    assert!(ok && code == "200", "{code}");
    let body = std::fs::read_to_string(dir.join("body")).unwrap();
    assert!(body.contains("accel_host_cpu_percent"), "{body}");
    // Wrong password: 401 with WWW-Authenticate.
    let (_, code) = curl(&format!("--cacert {d}/ca.crt -u prom:wrong"));
    assert_eq!(code, "401");
    let (_, headers) = sh(&format!(
        "curl -s -D - -o /dev/null --cacert {d}/ca.crt https://{addr}/metrics"
    ));
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"accel\""),
        "{headers}"
    );
    // Without the CA the client refuses the certificate (curl's exit 60).
    let o = Command::new("curl")
        .args([
            "-s",
            "-u",
            "prom:s3cret-pw",
            &format!("https://{addr}/metrics"),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(60), "{o:?}");
    // Plain HTTP to the TLS port gets nothing useful.
    let (_, code) = sh(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' http://{addr}/metrics"
    ));
    assert_ne!(code, "200");

    if tool("prometheus") {
        let jobs = format!(
            "  - job_name: accel\n    scheme: https\n    tls_config:\n      ca_file: {d}/ca.crt\n    basic_auth:\n      username: prom\n      password: s3cret-pw\n    static_configs:\n      - targets: ['{addr}']\n  - job_name: wrongpw\n    scheme: https\n    tls_config:\n      ca_file: {d}/ca.crt\n    basic_auth:\n      username: prom\n      password: nope\n    static_configs:\n      - targets: ['{addr}']\n"
        );
        let (_prom, query) = prometheus_with(&dir.join("prom"), &jobs);
        let value =
            |q: &str| -> Option<f64> { query(q).as_ref().map(results)?.first().map(|r| r.1) };
        let got = wait_for(
            &query,
            "accel_host_memory_total_bytes{job=\"accel\"}",
            60,
            |r| !r.is_empty(),
        );
        let log = std::fs::read_to_string(dir.join("prom/prometheus.log")).unwrap_or_default();
        assert!(
            got.is_some(),
            "Prometheus stored nothing over TLS with basic auth:\n{log}"
        );
        assert_eq!(value("up{job=\"accel\"}"), Some(1.0));
        wait_for(&query, "up{job=\"wrongpw\"}", 20, |r| !r.is_empty())
            .expect("the wrong-password job was scraped");
        assert_eq!(
            value("up{job=\"wrongpw\"}"),
            Some(0.0),
            "a wrong password must fail the scrape"
        );
    } else {
        println!("skipped: prometheus: not installed (the TLS scrape part)");
    }

    // The fleet view reaches it over TLS with the credentials in Prometheus's http_config
    // shape (a password file, the CA); without them the host is down with the reason.
    std::fs::write(dir.join("password"), "s3cret-pw\n").unwrap();
    std::fs::write(
        dir.join("http.yml"),
        "basic_auth:\n  username: prom\n  password_file: password\ntls_config:\n  ca_file: ca.crt\n",
    )
    .unwrap();
    let host = format!("https://{addr}");
    let http = dir.join("http.yml");
    let (code, docs, err) = fleet_json(&[
        "monitor",
        "--hosts",
        &host,
        "--http-config",
        http.to_str().unwrap(),
        "--json",
        "--count",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(docs[0]["hosts"][0]["state"], "up", "{}", docs[0]);
    let (_, docs, _) = fleet_json(&["monitor", "--hosts", &host, "--json", "--count", "1"]);
    assert_eq!(docs[0]["hosts"][0]["state"], "down");
    assert!(
        docs[0]["hosts"][0]["error"]
            .as_str()
            .unwrap()
            .contains("TLS"),
        "{}",
        docs[0]
    );

    // A client certificate required: without one the handshake fails; with one it works.
    std::fs::write(
        dir.join("mtls.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    .unwrap();
    let mtls = dir.join("mtls.yml");
    let (_m, maddr) = serve_with("1", &["--web.config.file", mtls.to_str().unwrap()]);
    let (ok, _) = sh(&format!(
        "curl -s -o /dev/null --cacert {d}/ca.crt https://{maddr}/metrics"
    ));
    assert!(!ok, "a handshake without a client certificate succeeded");
    let (ok, code) = sh(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' --cacert {d}/ca.crt --cert {d}/client.crt --key {d}/client.key https://{maddr}/metrics"
    ));
    assert!(ok && code == "200", "{code}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exporter_toolkit_keys_reload_and_the_certificate_expiry() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let curl_ok = Command::new("curl").arg("--version").output().is_ok();
    let dir = std::env::temp_dir().join(format!("accel-tk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if !curl_ok || !certificates(&dir) {
        println!("skipped: tls: the openssl and curl commands are needed (exporter_toolkit_keys_reload_and_the_certificate_expiry)");
        return;
    }
    let d = dir.display();
    let config = |user: &str, extra: &str| {
        let hash = bcrypt::hash("pw", 4).unwrap();
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  prefer_server_cipher_suites: true\n  curve_preferences: [CurveP256, X25519]\nhttp_server_config:\n  http2: true\n  headers:\n    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\nbasic_auth_users:\n  {user}: '{hash}'\n{extra}"
        )
    };
    let web = dir.join("web.yml");
    std::fs::write(&web, config("prom", "")).unwrap();
    let (p, addr) = serve_with("0.5", &["--web.config.file", web.to_str().unwrap()]);
    let code = |args: &str| {
        sh(&format!(
            "curl -s -o {d}/body -w '%{{http_code}}' --cacert {d}/ca.crt {args} https://{addr}/metrics"
        ))
        .1
    };
    assert_eq!(code("-u prom:pw"), "200");
    // The headers asked for are on every answer, a refusal too.
    let (_, h) = sh(&format!(
        "curl -s -D - -o /dev/null --cacert {d}/ca.crt https://{addr}/metrics"
    ));
    let h = h.to_ascii_lowercase();
    assert!(h.starts_with("http/1.1 401"), "{h}");
    assert!(
        h.contains("x-content-type-options: nosniff") && h.contains("x-frame-options: deny"),
        "{h}"
    );
    // TLS 1.2 offers only the suite listed; TLS 1.3 is untouched.
    assert_eq!(
        code("-u prom:pw --tls-max 1.2 --ciphers ECDHE-ECDSA-AES128-GCM-SHA256"),
        "200"
    );
    assert_eq!(
        code("-u prom:pw --tls-max 1.2 --ciphers ECDHE-ECDSA-AES256-GCM-SHA384"),
        "000"
    );
    assert_eq!(code("-u prom:pw --tlsv1.3"), "200");
    // The certificate's expiry, against what openssl reads from the same file.
    let (_, end) = sh(&format!(
        "date -u -d \"$(openssl x509 -noout -enddate -in {d}/server.crt | cut -d= -f2)\" +%s"
    ));
    let body = std::fs::read_to_string(dir.join("body")).unwrap();
    assert_eq!(
        sample(
            &body,
            "accel_exporter_tls_certificate_expiry_timestamp_seconds"
        ),
        Some(end.trim().parse::<f64>().unwrap()),
        "{body}"
    );
    assert_eq!(
        sample(&body, "accel_exporter_web_config_last_reload_success"),
        Some(1.0)
    );
    // A changed file is served without a restart: another user.
    std::fs::write(&web, config("other", "")).unwrap();
    let t = std::time::Instant::now();
    while code("-u other:pw") != "200" {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the new config was not loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(code("-u prom:pw"), "401");
    // A change that does not load leaves the last good one serving, and says so.
    std::fs::write(&web, config("third", "bogus_key: 1\n")).unwrap();
    let t = std::time::Instant::now();
    loop {
        assert_eq!(code("-u other:pw"), "200");
        let body = std::fs::read_to_string(dir.join("body")).unwrap();
        if sample(&body, "accel_exporter_web_config_last_reload_success") == Some(0.0) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the failed reload is not reported"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // SIGHUP loads it again (it ended the process before), and a rate limit applies.
    std::fs::write(
        &web,
        config("other", "rate_limit:\n  interval: 10s\n  burst: 2\n"),
    )
    .unwrap();
    // SAFETY: kill sends a signal to our own child's pid.
    unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(1500));
    let mut p = p;
    assert!(p.0.try_wait().unwrap().is_none(), "SIGHUP ended it");
    let codes: Vec<String> = (0..4).map(|_| code("-u other:pw")).collect();
    assert!(codes.contains(&"429".to_string()), "{codes:?}");
    // What rustls cannot do is refused at start, naming the key.
    for (bad, says) in [
        (
            "  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
            "cipher_suites: TLS_RSA_WITH_AES_128_CBC_SHA is not offered",
        ),
        (
            "  curve_preferences: [CurveP521]\n",
            "curve_preferences: CurveP521 is not offered",
        ),
    ] {
        let f = dir.join("bad.yml");
        std::fs::write(
            &f,
            format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{bad}"),
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_accel"))
            .args(["serve", "--listen", "127.0.0.1:0", "--web.config.file"])
            .arg(&f)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains(says), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_web_config_is_an_error_at_start() {
    let dir = std::env::temp_dir().join(format!("accel-webcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (yaml, says) in [
        (
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
            "cannot read cert_file",
        ),
        (
            "basic_auth_users:\n  prom: plaintext\n",
            "is not a bcrypt hash",
        ),
        ("bogus_key: 1\n", "unknown field `bogus_key`"),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n",
            "cannot read cert_file",
        ),
        (
            "tls_server_config:\n  cert: x\n  key: y\n  client_allowed_sans: [a]\n",
            "cert_file holds no certificate",
        ),
        (
            "http_server_config:\n  headers:\n    Server: evil\n",
            "'Server' cannot be set",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "X-Frame-Options takes deny or sameorigin",
        ),
        ("rate_limit:\n  interval: soon\n", "is not a duration"),
    ] {
        let f = dir.join("web.yml");
        std::fs::write(&f, yaml).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_accel"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--web.config.file",
                f.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{yaml}: {e}");
        assert!(e.contains(says), "{yaml}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_stops_the_exporter_cleanly() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut p, addr) = serve("1");
    let mut c = Client::new(addr);
    assert_eq!(c.get("/metrics").unwrap().0, 200);
    let status = sigterm_and_wait(&mut p);
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening after it exited"
    );
}

#[test]
fn the_live_page_updates_in_place_from_its_event_stream() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut args = fixture_roots("mixed", "proc");
    args.push("--web.max-requests=2".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mut p, addr) = serve_with("0.3", &args);
    // `/`: one page with the machine now and its script; nothing from the network.
    let (code, ctype, page) = Client::new(addr).get("/").unwrap();
    assert_eq!((code, ctype.as_str()), (200, "text/html; charset=utf-8"));
    for want in [
        "<div id=\"live\">",
        "amd:0",
        "intel:1",
        "new EventSource('events')",
        "245 / 355 W",
    ] {
        assert!(page.contains(want), "{want} not in {page}");
    }
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "{page}"
    );
    // `/events`: an event at once, then one per collection; by the third, each row has its
    // lines over the samples so far.
    let (code, ctype, mut r) = open_events(addr, "");
    assert_eq!((code, ctype.as_str()), (200, "text/event-stream"));
    let events = read_events(&mut r, 3, Duration::from_secs(10));
    assert_eq!(events.len(), 3, "{events:?}");
    for e in &events {
        assert!(
            e.starts_with("<div class=\"accel-report\">") && e.contains("amd:0"),
            "{e}"
        );
    }
    assert!(events[2].contains("<svg"), "{}", events[2]);
    // Streams may hold half of the --web.max-requests=2 slots: a second page is refused
    // (and says why), and a scrape still has its slot.
    let (code, _, mut r2) = open_events(addr, "");
    assert_eq!(code, 503, "a second stream with --web.max-requests=2");
    let mut why = String::new();
    let _ = r2.read_line(&mut why);
    assert!(why.contains("too many live pages open (1"), "{why}");
    let (code, _, _) = Client::new(addr).get("/metrics").unwrap();
    assert_eq!(code, 200, "a stream open: the scrape keeps its slot");
    // A closed stream gives its slot back by the next collection (its next event fails).
    drop(r);
    let t = Instant::now();
    let mut r = loop {
        let (code, _, again) = open_events(addr, "");
        if code == 200 {
            break again;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the stream's slot never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(read_events(&mut r, 1, Duration::from_secs(5)).len(), 1);
    // SIGTERM with a stream open: the stream ends and the exporter exits 0 within the drain.
    let status = sigterm_and_wait(&mut p);
    assert!(status.success(), "{status:?}");
    // The first stream was closed by the server (end of file), not left hanging (the read
    // would time out after 10 s).
    let mut rest = String::new();
    let ended = std::io::Read::read_to_string(&mut r, &mut rest);
    assert!(ended.is_ok(), "{ended:?} after {rest:?}");
}
