//! `accel serve` with real parts: scraped over HTTP, checked by `promtool`, scraped by a real
//! Prometheus and read back through its query API, and put under load on loopback.
//! Prometheus and promtool come from Debian's `prometheus` package (scripts/test.sh installs
//! it); without them those parts print `skipped:` (and fail when ACCEL_TEST_REQUIRE names
//! `prometheus`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One test at a time: the load test and Prometheus must not share the two cores.
static ONE: Mutex<()> = Mutex::new(());

/// A child process killed when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `accel serve` on a free port; returns it with its address.
/// (`https://` servers print their address the same way.)
fn serve(interval: &str) -> (Proc, SocketAddr) {
    serve_with(interval, &[])
}

/// [`serve`] with more arguments (`--path.sysfs DIR`...).
fn serve_with(interval: &str, more: &[&str]) -> (Proc, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", interval])
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("accel runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .filter(|_| !line.contains("https://"))
        .or_else(|| line.split("https://").nth(1))
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (Proc(child), addr)
}

/// A minimal HTTP/1.1 client on one kept-alive connection.
struct Client {
    r: BufReader<TcpStream>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Client {
            r: BufReader::new(s),
        }
    }

    /// (status, content type, body).
    fn get(&mut self, path: &str) -> std::io::Result<(u32, String, String)> {
        self.get_with(path, "")
    }

    /// [`Client::get`] with more header lines (each ending in `\r\n`).
    fn get_with(&mut self, path: &str, headers: &str) -> std::io::Result<(u32, String, String)> {
        write!(
            self.r.get_mut(),
            "GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n"
        )?;
        let mut status = String::new();
        self.r.read_line(&mut status)?;
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {status:?}")))?;
        let (mut len, mut ctype) = (0usize, String::new());
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap_or((h, ""));
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "content-type" => ctype = v.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        self.r.read_exact(&mut body)?;
        Ok((code, ctype, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// The value of the first sample of `name` in exposition text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn tool(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let required = std::env::var("ACCEL_TEST_REQUIRE")
        .is_ok_and(|v| v.split(',').any(|b| b.trim() == "prometheus"));
    assert!(
        found || !required,
        "ACCEL_TEST_REQUIRE names prometheus but {name} is missing"
    );
    found
}

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
    assert_eq!(snap["schema_version"], 2);
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
    assert_eq!(ram as u64, accel::system::memory().unwrap().total_bytes);
    assert!(
        text.contains("accel_backend_available{backend=\"cpu\""),
        "{text}"
    );
    assert!(
        sample(&text, "accel_host_cpu_core_percent").is_some(),
        "{text}"
    );
    // Every vendor's reader answered; this machine has no accelerator its monitoring
    // interfaces show (XLA's CPU plugin and lavapipe are not hardware): no device series.
    for v in ["nvidia", "amd", "intel", "tpu"] {
        assert!(
            text.contains(&format!("accel_collector_success{{collector=\"{v}\"")),
            "{v}: {text}"
        );
    }
    assert!(!text.contains("accel_device_up{"), "{text}");
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
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.starts_with("error: 'not-an-address' is not an address"),
        "{e}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--interval", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A Prometheus scraping `target` every second, with its data under `dir`; returns it and a
/// query function (PromQL -> the API's JSON).
fn prometheus(
    dir: &std::path::Path,
    target: SocketAddr,
) -> (Proc, impl Fn(&str) -> Option<serde_json::Value>) {
    prometheus_with(
        dir,
        &format!("  - job_name: accel\n    static_configs:\n      - targets: ['{target}']\n"),
    )
}

/// [`prometheus`] with these `scrape_configs` entries (YAML, indented as list items).
fn prometheus_with(
    dir: &std::path::Path,
    jobs: &str,
) -> (Proc, impl Fn(&str) -> Option<serde_json::Value>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{jobs}"
        ),
    )
    .unwrap();
    let port = free_port();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let query = move |q: &str| -> Option<serde_json::Value> {
        let mut c = Client {
            r: BufReader::new(TcpStream::connect(("127.0.0.1", port)).ok()?),
        };
        let q: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (code, _, body) = c.get(&format!("/api/v1/query?query={q}")).ok()?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    };
    (Proc(prom), query)
}

/// Each result of a query as (labels, value).
fn results(v: &serde_json::Value) -> Vec<(serde_json::Value, f64)> {
    v["data"]["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| Some((r["metric"].clone(), r["value"][1].as_str()?.parse().ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `q` for up to `secs` until `ok` holds for its results.
fn wait_for(
    query: &impl Fn(&str) -> Option<serde_json::Value>,
    q: &str,
    secs: u64,
    ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
) -> Option<Vec<(serde_json::Value, f64)>> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Some(r) = query(q).as_ref().map(results) {
            if ok(&r) {
                return Some(r);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    None
}

/// `cp -a`: the fixtures' symlinks must stay symlinks.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
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
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../accel/tests/fixtures/telemetry");
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

/// The shared libraries a running process has mapped that belong to a compute stack.
fn compute_libraries(pid: u32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut found: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            let f = p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase();
            f.contains("pjrt")
                || f.starts_with("libvulkan")
                || f.starts_with("libcuda")
                || f.starts_with("libtpu")
                || f.contains("xla")
                || f.starts_with("libvulkan_lvp")
        })
        .map(String::from)
        .collect();
    found.dedup();
    found
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
        let t = Instant::now();
        let mut seen = Vec::new();
        while t.elapsed() < Duration::from_secs(20) && seen.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
            seen = compute_libraries(probe.0.id());
        }
        let _ = probe.0.kill();
        if accel::xla::devices().is_empty() {
            println!("skipped: xla: no PJRT plugin to show the maps check a positive case");
        } else {
            assert!(!seen.is_empty(), "a process using xla:0 maps no plugin?");
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    assert_eq!(ram as u64, accel::system::memory().unwrap().total_bytes);
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

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn ten_seconds_of_concurrent_scrapes() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (p, addr) = serve("1");
    let pid = p.0.id();
    // Warm: the first scrapes allocate the server's buffers.
    let mut c = Client::new(addr);
    for _ in 0..50 {
        c.get("/metrics").unwrap();
    }
    let rss_before = rss_kib(pid);
    let threads = 4;
    let (lat, wall, errors) = scrape_for(addr, threads, 10.0);
    let rss_after = rss_kib(pid);
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize] * 1e3;
    let rate = lat.len() as f64 / wall;
    println!(
        "{} scrapes in {wall:.1} s from {threads} connections: {rate:.0}/s, latency p50 {:.2} ms, \
         p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {errors} errors; RSS {} -> {} KiB",
        lat.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
        rss_before,
        rss_after
    );
    assert_eq!(errors, 0);
    assert!(rate >= 1000.0, "{rate:.0} scrapes/s");
    assert!(pct(0.99) < 10.0, "p99 {:.2} ms", pct(0.99));
    assert!(
        rss_after.saturating_sub(rss_before) < 5 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
}

/// Raises this process's open-file limit to its hard limit; returns the soft limit now.
fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write a struct on our stack.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur as u64
    }
}

/// `accel serve` under `ulimit -n LIMIT` (soft and hard), as a server run by a service
/// manager with a small descriptor limit.
fn serve_limited(limit: u32, more: &str) -> (Proc, SocketAddr) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {limit} && exec '{}' serve --listen 127.0.0.1:0 --interval 1 {more}",
            env!("CARGO_BIN_EXE_accel")
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (Proc(child), addr)
}

/// Scrapes `/metrics` from `threads` keep-alive connections for `seconds`: each successful
/// scrape's latency in seconds (sorted), the wall time, and the errors.
fn scrape_for(addr: SocketAddr, threads: usize, seconds: f64) -> (Vec<f64>, f64, u32) {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::new(addr);
                let (mut lat, mut errors) = (Vec::new(), 0u32);
                while t0.elapsed().as_secs_f64() < seconds {
                    let s = Instant::now();
                    match c.get("/metrics") {
                        Ok((200, _, body)) if body.contains("accel_host_cpu_percent") => {
                            lat.push(s.elapsed().as_secs_f64())
                        }
                        _ => {
                            errors += 1;
                            c = Client::new(addr);
                        }
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let (mut lat, mut errors) = (Vec::new(), 0);
    for h in handles {
        let (l, e) = h.join().unwrap();
        lat.extend(l);
        errors += e;
    }
    lat.sort_by(f64::total_cmp);
    (lat, t0.elapsed().as_secs_f64(), errors)
}

/// [`scrape_for`] summed up: (scrapes per second, p99 ms, errors).
fn load(addr: SocketAddr, threads: usize, seconds: f64) -> (f64, f64, u32) {
    let (lat, wall, errors) = scrape_for(addr, threads, seconds);
    let p99 = lat
        .get(((lat.len().max(1) - 1) as f64 * 0.99) as usize)
        .copied()
        .unwrap_or(f64::NAN)
        * 1e3;
    (lat.len() as f64 / wall, p99, errors)
}

#[test]
fn two_thousand_half_open_connections_do_not_keep_a_scraper_out() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let have = raise_fd_limit();
    if have < 2300 {
        println!("skipped: this test process may open only {have} files (needs 2300)");
        return;
    }
    // The exporter may open 1024 files; 2,000 clients each send half a request and wait.
    let (p, addr) = serve_limited(1024, "");
    let pid = p.0.id();
    let mut c = Client::new(addr);
    assert_eq!(c.get("/metrics").unwrap().0, 200);
    drop(c);
    let rss_before = rss_kib(pid);
    let t0 = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..2000 {
        let mut s = TcpStream::connect(addr).expect("connect (the accept queue may be full)");
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
        slow.push(s);
    }
    println!(
        "2000 half-open connections opened in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    // A real scraper still gets in, each time within a second.
    let mut worst = 0.0f64;
    for _ in 0..20 {
        let s = Instant::now();
        let mut c = Client::new(addr);
        let (code, _, _) = c
            .get("/metrics")
            .expect("a scrape among 2,000 slow clients");
        assert_eq!(code, 200);
        worst = worst.max(s.elapsed().as_secs_f64());
    }
    assert!(worst < 1.0, "a scrape took {worst:.2} s");
    // And keeps its rate: the bar is 1,000 scrapes/s with p99 under 10 ms.
    let (rate, p99, errors) = load(addr, 4, 3.0);
    println!(
        "with 2000 slow clients: new scrapes within {:.1} ms worst; 4 keep-alive connections: {rate:.0} scrapes/s, p99 {p99:.2} ms, {errors} errors; RSS {} -> {} KiB",
        worst * 1e3,
        rss_before,
        rss_kib(pid)
    );
    assert_eq!(errors, 0);
    assert!(rate >= 1000.0, "{rate:.0} scrapes/s");
    assert!(p99 < 10.0, "p99 {p99:.2} ms");
    assert!(
        rss_kib(pid) < rss_before + 64 * 1024,
        "RSS {} KiB",
        rss_kib(pid)
    );
    // Gone: the server answers as before.
    drop(slow);
    std::thread::sleep(Duration::from_millis(300));
    let mut c = Client::new(addr);
    assert_eq!(c.get("/metrics").unwrap().0, 200);
    assert_eq!(c.get("/healthz").unwrap().0, 200);
}

#[test]
fn a_one_mebibyte_header_is_refused_without_growing_memory() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (p, addr) = serve("1");
    let pid = p.0.id();
    let mut c = Client::new(addr);
    assert_eq!(c.get("/metrics").unwrap().0, 200);
    let before = rss_kib(pid);
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 1 << 20));
        req.extend(b"\r\n\r\n");
        // The server may close before it has read it all: a failed write is a refusal too.
        let _ = s.write_all(&req);
        let mut answer = String::new();
        let _ = BufReader::new(&s).read_line(&mut answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "{answer:?}"
        );
    }
    let after = rss_kib(pid);
    println!("five 1 MiB headers refused; RSS {before} -> {after} KiB");
    assert!(after < before + 4 * 1024, "RSS {before} -> {after} KiB");
    assert_eq!(Client::new(addr).get("/metrics").unwrap().0, 200);
}

/// Runs a command; its status and stdout.
fn sh(cmd: &str) -> (bool, String) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, made
/// with the openssl command (P-256 keys).
fn certificates(dir: &std::path::Path) -> bool {
    let d = dir.display();
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    let steps = [
        format!("openssl req -x509 {ec} -keyout {d}/ca.key -out {d}/ca.crt -days 2 -subj /CN=accel-test-ca"),
        format!("openssl req {ec} -keyout {d}/server.key -out {d}/server.csr -subj /CN=localhost"),
        format!("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > {d}/san.ext"),
        format!("openssl x509 -req -in {d}/server.csr -CA {d}/ca.crt -CAkey {d}/ca.key -CAcreateserial -out {d}/server.crt -days 2 -extfile {d}/san.ext"),
        format!("openssl req {ec} -keyout {d}/client.key -out {d}/client.csr -subj /CN=scraper"),
        // Extensions make it X.509 v3: webpki refuses v1 certificates.
        format!("printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > {d}/client.ext"),
        format!("openssl x509 -req -in {d}/client.csr -CA {d}/ca.crt -CAkey {d}/ca.key -CAcreateserial -out {d}/client.crt -days 2 -extfile {d}/client.ext"),
    ];
    steps.iter().all(|s| sh(&format!("{s} 2>/dev/null")).0)
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

/// A fixture machine's roots as `accel serve` arguments.
fn fixture_roots(name: &str, procfs: &str) -> Vec<String> {
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../accel/tests/fixtures/telemetry")
        .join(name);
    vec![
        "--path.sysfs".into(),
        f.join("sys").display().to_string(),
        "--path.procfs".into(),
        f.join(procfs).display().to_string(),
        "--tpu.metrics-address".into(),
        format!("127.0.0.1:{}", free_port()),
    ]
}

/// Three exporters over three fixture machines: an AMD and an Intel GPU, a TPU VM, an APU.
fn three_machines() -> Vec<(Proc, SocketAddr)> {
    [("mixed", "proc"), ("tpu-vm", "proc"), ("amd-apu", "proc")]
        .iter()
        .map(|(name, procfs)| {
            let args = fixture_roots(name, procfs);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            serve_with("0.5", &args)
        })
        .collect()
}

fn fleet_json(args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .unwrap();
    let docs = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (
        o.status.code(),
        docs,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn fleet_schema() -> jsonschema::Validator {
    let path = format!(
        "{}/../../schemas/fleet.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&v).unwrap()
}

#[test]
fn fleet_json_of_three_machines_a_dead_one_and_a_silent_one() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let machines = three_machines();
    // One that accepts connections and never answers, one where nothing listens.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let dead = format!("127.0.0.1:{}", free_port());
    let hosts: Vec<String> = machines
        .iter()
        .map(|(_, a)| a.to_string())
        .chain([silent_addr.to_string(), dead.clone()])
        .collect();
    let list = hosts.join(",");
    let t = Instant::now();
    let (code, docs, err) = fleet_json(&[
        "monitor",
        "--hosts",
        &list,
        "--json",
        "--count",
        "2",
        "--interval",
        "0.5",
        "--timeout",
        "1",
    ]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(docs.len(), 2);
    // Two rounds, each waiting at most the 1 s timeout on the silent host.
    assert!(took < 4.0, "two rounds took {took:.1} s");
    let schema = fleet_schema();
    for d in &docs {
        let errors: Vec<String> = schema
            .iter_errors(d)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    let rows = docs[1]["hosts"].as_array().unwrap();
    let row = |h: &str| {
        rows.iter()
            .find(|r| r["host"] == h)
            .unwrap_or_else(|| panic!("{h} missing"))
    };
    // The mixed machine: amd:0 42 % busy, 6 of 24 GiB; intel:1 12 GiB.
    let m = row(&hosts[0]);
    assert_eq!(m["state"], "up");
    assert_eq!(m["devices"], 2);
    assert_eq!(m["temperature_max_c"], 65.0);
    assert_eq!(m["memory_total_bytes"], 36u64 << 30);
    assert_eq!(m["device_rows"][0]["utilization_percent"], 42.0);
    let tpu = row(&hosts[1]);
    assert_eq!(
        (tpu["state"].as_str(), tpu["devices"].as_u64()),
        (Some("up"), Some(4))
    );
    assert_eq!(row(&hosts[2])["state"], "up");
    let s = row(&hosts[3]);
    assert_eq!(s["state"], "down");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("no answer within 1.0 s"),
        "{s}"
    );
    let d = row(&dead);
    assert_eq!(d["state"], "down");
    assert!(
        d["error"].as_str().unwrap().contains("cannot connect"),
        "{d}"
    );
    assert_eq!(docs[1]["totals"]["hosts_up"], 3);
    drop(silent);
}

/// A command in a detached tmux session on its own server socket.
struct Tmux(String);

impl Tmux {
    fn start(name: &str, cmd: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            println!("skipped: tmux: not installed ({name})");
            return None;
        }
        let sock = format!("accel-fleet-{name}-{}", std::process::id());
        let st = Command::new("tmux")
            .args([
                "-L",
                &sock,
                "new-session",
                "-d",
                "-x",
                "140",
                "-y",
                "30",
                cmd,
            ])
            .status()
            .unwrap();
        assert!(st.success());
        Some(Tmux(sock))
    }
    fn screen(&self) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.0, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    fn keys(&self, k: &str) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "send-keys", k])
            .status();
    }
    fn wait(&self, what: &str, secs: f64, ok: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                t.elapsed().as_secs_f64() < secs,
                "no {what} within {secs} s:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .status();
    }
}

#[test]
fn fleet_view_in_tmux_shows_a_killed_machine_down_and_drills_down() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut machines = three_machines();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let hosts: Vec<String> = machines
        .iter()
        .map(|(_, a)| a.to_string())
        .chain([silent.local_addr().unwrap().to_string()])
        .collect();
    let Some(t) = Tmux::start(
        "view",
        &format!(
            "{} monitor --hosts {} --interval 0.5 --timeout 1",
            env!("CARGO_BIN_EXE_accel"),
            hosts.join(",")
        ),
    ) else {
        return;
    };
    let up_rows = |s: &str, n: usize| s.lines().filter(|l| l.contains(" up ")).count() == n;
    let s = t.wait("three machines up", 15.0, |s| {
        up_rows(s, 3) && s.contains("fleet: 3/4 hosts up")
    });
    assert!(
        s.lines()
            .any(|l| l.starts_with(&hosts[3]) && l.contains("down")),
        "{s}"
    );
    // One machine dies: down within two rounds (each at most 0.5 s + the 1 s timeout).
    let (mut victim, _) = machines.remove(1);
    let _ = victim.0.kill();
    let _ = victim.0.wait();
    let t0 = Instant::now();
    let s = t.wait("the killed machine down", 5.0, |s| {
        s.lines()
            .any(|l| l.starts_with(&hosts[1]) && l.contains("down"))
    });
    println!(
        "a killed exporter showed down {:.1} s later",
        t0.elapsed().as_secs_f64()
    );
    assert!(up_rows(&s, 2), "{s}");
    // The others keep updating while the silent and the dead host time out.
    let round = |s: &str| -> u64 {
        s.split("round ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let r0 = round(&s);
    let s = t.wait("two more rounds", 6.0, |s| round(s) >= r0 + 2);
    assert!(up_rows(&s, 2), "{s}");
    // Drill-down into the first machine: its devices.
    t.keys("Enter");
    let s = t.wait("the first machine's devices", 5.0, |s| {
        s.contains("amd:0") && s.contains("intel:1")
    });
    assert!(s.contains("AMD GPU 0x744c"), "{s}");
    t.keys("Escape");
    t.wait("the table again", 5.0, |s| s.contains("device memory"));
    t.keys("q");
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(5)
        && Command::new("tmux")
            .args(["-L", &t.0, "has-session"])
            .status()
            .is_ok_and(|s| s.success())
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(silent);
}

#[test]
fn fleet_view_read_from_prometheus() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if !tool("prometheus") {
        println!("skipped: prometheus: not installed (fleet_view_read_from_prometheus)");
        return;
    }
    let machines = three_machines();
    let targets: Vec<String> = machines.iter().map(|(_, a)| format!("'{a}'")).collect();
    let dir = std::env::temp_dir().join(format!("accel-fleet-prom-{}", std::process::id()));
    let (prom, query) = prometheus_with(
        &dir,
        &format!(
            "  - job_name: accel\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    );
    wait_for(&query, "accel_host_cpu_percent", 60, |r| r.len() == 3)
        .expect("Prometheus stored the three machines");
    wait_for(&query, "accel_device_utilization_percent", 10, |r| {
        !r.is_empty()
    })
    .expect("device series");
    let url = {
        let log = std::fs::read_to_string(dir.join("prometheus.yml")).unwrap();
        assert!(log.contains("job_name: accel"));
        // The port prometheus_with chose is in its command line; ask the query closure's
        // server through the same port by reading it back from /proc.
        let cmdline = std::fs::read_to_string(format!("/proc/{}/cmdline", prom.0.id())).unwrap();
        let listen = cmdline
            .split('\0')
            .find_map(|a| a.strip_prefix("--web.listen-address="))
            .unwrap()
            .to_string();
        format!("http://{listen}")
    };
    let (code, docs, err) =
        fleet_json(&["monitor", "--prometheus", &url, "--json", "--count", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let d = &docs[0];
    assert!(fleet_schema().is_valid(d), "{d}");
    assert_eq!(d["source"], "prometheus");
    let rows = d["hosts"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{d}");
    let mixed = rows
        .iter()
        .find(|r| r["host"] == machines[0].1.to_string())
        .expect("the mixed machine");
    assert_eq!(mixed["state"], "up");
    assert_eq!(mixed["devices"], 2);
    let amd = mixed["device_rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["device"] == "amd:0")
        .unwrap();
    assert_eq!(amd["utilization_percent"], 42.0);
    assert_eq!(amd["memory_total_bytes"], 24u64 << 30);
    let tpu = rows
        .iter()
        .find(|r| r["host"] == machines[1].1.to_string())
        .unwrap();
    assert_eq!(tpu["devices"], 4);
    // Prometheus stopped: the view says so and exits 1.
    drop(prom);
    let (code, _, err) = fleet_json(&[
        "monitor",
        "--prometheus",
        &url,
        "--json",
        "--count",
        "1",
        "--timeout",
        "1",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error: cannot query Prometheus at "),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_stops_the_exporter_cleanly() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (mut p, addr) = serve("1");
    let mut c = Client::new(addr);
    assert_eq!(c.get("/metrics").unwrap().0, 200);
    // SAFETY: kill sends a signal to our own child's pid.
    unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGTERM) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "still running 8 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening after it exited"
    );
}
