//! What the `accel serve` and fleet tests share: starting `accel serve`, a minimal HTTP
//! client, Prometheus and promtool, fixture trees, one test at a time.
#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One test at a time: the load test and Prometheus must not share the two cores.
pub static ONE: Mutex<()> = Mutex::new(());

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `accel serve` on a free port; returns it with its address.
/// (`https://` servers print their address the same way.)
pub fn serve(interval: &str) -> (Proc, SocketAddr) {
    serve_with(interval, &[])
}

/// [`serve`] with more arguments (`--path.sysfs DIR`...).
pub fn serve_with(interval: &str, more: &[&str]) -> (Proc, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", interval])
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("accel runs");
    announced(child)
}

/// A server started with its stdout piped, and the address its banner's first line names
/// (`http://` or `https://`).
pub fn announced(mut child: std::process::Child) -> (Proc, SocketAddr) {
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
pub struct Client {
    pub r: BufReader<TcpStream>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Client {
            r: BufReader::new(s),
        }
    }

    /// (status, content type, body).
    pub fn get(&mut self, path: &str) -> std::io::Result<(u32, String, String)> {
        self.get_with(path, "")
    }

    /// [`Client::get`] with more header lines (each ending in `\r\n`).
    pub fn get_with(
        &mut self,
        path: &str,
        headers: &str,
    ) -> std::io::Result<(u32, String, String)> {
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
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

pub fn tool(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let required = accelkit_testkit::is_required("prometheus");
    assert!(
        found || !required,
        "ACCEL_TEST_REQUIRE names prometheus but {name} is missing"
    );
    found
}

/// A Prometheus scraping `target` every second, with its data under `dir`; returns it and a
/// query function (PromQL -> the API's JSON).
pub fn prometheus(
    dir: &std::path::Path,
    target: SocketAddr,
) -> (Proc, impl Fn(&str) -> Option<serde_json::Value>) {
    prometheus_with(
        dir,
        &format!("  - job_name: accel\n    static_configs:\n      - targets: ['{target}']\n"),
    )
}

/// [`prometheus`] with these `scrape_configs` entries (YAML, indented as list items).
pub fn prometheus_with(
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
pub fn results(v: &serde_json::Value) -> Vec<(serde_json::Value, f64)> {
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
pub fn wait_for(
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
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// The shared libraries a running process has mapped that belong to a compute stack.
pub fn compute_libraries(pid: u32) -> Vec<String> {
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

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn rss_kib(pid: u32) -> u64 {
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

/// Raises this process's open-file limit to its hard limit; returns the soft limit now.
pub fn raise_fd_limit() -> u64 {
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
pub fn serve_limited(limit: u32, more: &str) -> (Proc, SocketAddr) {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {limit} && exec '{}' serve --listen 127.0.0.1:0 --interval 1 {more}",
            env!("CARGO_BIN_EXE_accel")
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs");
    announced(child)
}

/// Scrapes `/metrics` from `threads` keep-alive connections for `seconds`: each successful
/// scrape's latency in seconds (sorted), the wall time, and the errors.
pub fn scrape_for(addr: SocketAddr, threads: usize, seconds: f64) -> (Vec<f64>, f64, u32) {
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
pub fn load(addr: SocketAddr, threads: usize, seconds: f64) -> (f64, f64, u32) {
    let (lat, wall, errors) = scrape_for(addr, threads, seconds);
    let p99 = lat
        .get(((lat.len().max(1) - 1) as f64 * 0.99) as usize)
        .copied()
        .unwrap_or(f64::NAN)
        * 1e3;
    (lat.len() as f64 / wall, p99, errors)
}

/// Runs a command; its status and stdout.
pub fn sh(cmd: &str) -> (bool, String) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, made
/// with the openssl command (P-256 keys).
pub fn certificates(dir: &std::path::Path) -> bool {
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

/// A fixture machine's roots as `accel serve` arguments.
pub fn fixture_roots(name: &str, procfs: &str) -> Vec<String> {
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../telemetry/tests/fixtures/telemetry")
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
pub fn three_machines() -> Vec<(Proc, SocketAddr)> {
    [("mixed", "proc"), ("tpu-vm", "proc"), ("amd-apu", "proc")]
        .iter()
        .map(|(name, procfs)| {
            let args = fixture_roots(name, procfs);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            serve_with("0.5", &args)
        })
        .collect()
}

pub fn fleet_json(args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>, String) {
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

pub fn fleet_schema() -> jsonschema::Validator {
    let path = format!(
        "{}/../../schemas/fleet.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&v).unwrap()
}

/// A command in a detached tmux session on its own server socket.
pub struct Tmux(pub String);

impl Tmux {
    pub fn start(name: &str, cmd: &str) -> Option<Tmux> {
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
    pub fn screen(&self) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.0, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    pub fn keys(&self, k: &str) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "send-keys", k])
            .status();
    }
    pub fn wait(&self, what: &str, secs: f64, ok: impl Fn(&str) -> bool) -> String {
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

/// Sends SIGTERM to the server and waits for it to exit (at most 8 s).
pub fn sigterm_and_wait(p: &mut Proc) -> std::process::ExitStatus {
    // SAFETY: kill sends a signal to our own child's pid.
    unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGTERM) };
    let t = Instant::now();
    loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "still running 8 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads server-sent events from `r` until `n` have come (each: its `data:` lines joined), or
/// `limit` passes.
pub fn read_events(r: &mut BufReader<TcpStream>, n: usize, limit: Duration) -> Vec<String> {
    let t = Instant::now();
    let (mut events, mut cur) = (Vec::new(), Vec::<String>::new());
    while events.len() < n && t.elapsed() < limit {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(d) = line.strip_prefix("data: ") {
            cur.push(d.to_string());
        } else if line.is_empty() && !cur.is_empty() {
            events.push(cur.join("\n"));
            cur.clear();
        }
    }
    events
}

/// Opens `/events` (with more header lines, each ending in `\r\n`) and returns the reader after the response head (chunked: the chunk-size
/// lines read as lines without `data:`, which `read_events` skips).
pub fn open_events(addr: SocketAddr, headers: &str) -> (u32, String, BufReader<TcpStream>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut ctype = String::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h.trim_end().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-type:") {
            ctype = v.trim().to_string();
        }
    }
    (code, ctype, r)
}

/// A fleet member on loopback that answers every request with the body `answer` makes for it
/// (HTTP/1.1 200, JSON, then closes), on a thread that stops with the test process.
pub fn member(answer: impl Fn() -> Vec<u8> + Send + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut req = [0u8; 4096];
            let _ = s.read(&mut req);
            let body = answer();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    addr
}
