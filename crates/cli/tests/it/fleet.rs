//! `accel monitor --hosts/--prometheus`: the fleet view of three real `accel serve`
//! processes (one killed, one silent), as JSON, in tmux, and read back from a real
//! Prometheus.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::serve_common::*;

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

/// `accel monitor --hosts ... --serve` with a web config, on a free port: the process and its
/// address (from its banner).
fn serve_fleet(list: &str, web: &std::path::Path) -> (Proc, std::net::SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["monitor", "--hosts", list, "--serve", "127.0.0.1:0"])
        .args(["--interval", "0.5", "--timeout", "1", "--web.config.file"])
        .arg(web)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    announced(child)
}

#[test]
fn the_fleet_is_served_live_behind_basic_auth_and_printed_as_a_page() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut machines = three_machines();
    let dead = format!("127.0.0.1:{}", free_port());
    let list: Vec<String> = machines
        .iter()
        .map(|(_, a)| a.to_string())
        .chain([dead.clone()])
        .collect();
    let list = list.join(",");
    let dir = std::env::temp_dir().join(format!("accel-fleet-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let web = dir.join("web.yml");
    let hash = bcrypt::hash("pw", 4).unwrap();
    std::fs::write(&web, format!("basic_auth_users:\n  ops: '{hash}'\n")).unwrap();
    let (mut fleet, addr) = serve_fleet(&list, &web);
    // base64("ops:pw") and base64("ops:wrong").
    let good = "Authorization: Basic b3BzOnB3\r\n";
    let bad = "Authorization: Basic b3Bzondyb25n\r\n";
    let mut c = Client::new(addr);
    // Nothing without the password, the page with it.
    assert_eq!(c.get("/").unwrap().0, 401);
    assert_eq!(c.get_with("/", bad).unwrap().0, 401);
    let (code, ctype, page) = c.get_with("/", good).unwrap();
    assert_eq!((code, ctype.as_str()), (200, "text/html; charset=utf-8"));
    assert!(page.contains("<title>accel: fleet of 4</title>"), "{page}");
    assert!(page.contains("new EventSource('events')"), "{page}");
    assert!(page.contains("also /snapshot, /healthz</p>"), "{page}");
    for (_, a) in &machines {
        assert!(page.contains(&format!("<th>{a}")), "{a} missing: {page}");
    }
    // The round as JSON, the same document as --json prints; no metrics of its own.
    let (code, _, snap) = c.get_with("/snapshot", good).unwrap();
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&snap).unwrap();
    let errors: Vec<String> = fleet_schema()
        .iter_errors(&doc)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(doc["totals"]["hosts_up"], 3);
    let (code, _, body) = c.get_with("/metrics", good).unwrap();
    assert_eq!(code, 404, "{body}");
    let (code, _, health) = c.get_with("/healthz", good).unwrap();
    assert_eq!((code, health.as_str()), (200, "ok: 3 of 4 machines up\n"));
    // The stream: refused with a wrong password; with the right one an event per round,
    // with lines once there are two rounds, and a machine that stops shown down.
    assert_eq!(open_events(addr, bad).0, 401);
    let (code, ctype, mut r) = open_events(addr, good);
    assert_eq!((code, ctype.as_str()), (200, "text/event-stream"));
    let events = read_events(&mut r, 3, Duration::from_secs(10));
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[2].contains("<svg"), "{}", events[2]);
    assert!(events[2].contains("3 of 4 machines up"), "{}", events[2]);
    assert!(
        events[2].contains("<td class=\"st fail\">DOWN"),
        "{}",
        events[2]
    );
    let (_gone, gone_addr) = machines.pop().unwrap();
    drop(_gone);
    let t = Instant::now();
    loop {
        let e = read_events(&mut r, 1, Duration::from_secs(5));
        if e.iter().any(|e| e.contains("2 of 4 machines up")) {
            assert!(e[0].contains(&format!("<th>{gone_addr}")));
            break;
        }
        assert!(t.elapsed().as_secs() < 10, "{gone_addr} never shown down");
    }
    // SIGTERM: the stream ends and the server exits.
    assert!(sigterm_and_wait(&mut fleet).success());
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut r, &mut rest);
    // Printed once: two rounds, one page with lines.
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["monitor", "--hosts", &list, "--html", "--count", "2"])
        .args(["--interval", "0.5", "--timeout", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = String::from_utf8_lossy(&o.stdout);
    assert!(html.starts_with("<div class=\"accel-report\">"), "{html}");
    assert!(
        html.contains("<svg") && html.contains("machines up"),
        "{html}"
    );
    // --serve is for a fleet.
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["monitor", "--serve", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--serve serves the fleet view"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `accel ARGS` cost, from the kernel's accounting of the child (`wait4`'s rusage).
struct Cost {
    /// Peak resident memory, MiB.
    peak_mib: f64,
    /// CPU time, user and system, seconds.
    cpu_s: f64,
    code: Option<i32>,
    out: String,
    err: String,
}

// The child is reaped by wait4 below, which clippy does not see.
#[allow(clippy::zombie_processes)]
fn cost<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Cost {
    use std::io::Read;
    let child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (mut so, mut se) = (child.stdout.unwrap(), child.stderr.unwrap());
    let t = std::thread::spawn(move || {
        let mut e = String::new();
        let _ = se.read_to_string(&mut e);
        e
    });
    let mut out = String::new();
    let _ = so.read_to_string(&mut out);
    let err = t.join().unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain integers (all-zero valid); wait4 reaps our own child `pid`
    // (std's Child was taken apart above, so nothing else waits on it).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut ru) }, pid);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Cost {
        peak_mib: ru.ru_maxrss as f64 / 1024.0,
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        out,
        err,
    }
}

/// One member answering a list of zeros where devices go: 1 MB of it cost the viewer 1.0 GB
/// (2.9 GB with --html), 16 MiB aborted it ("memory allocation of 3 bytes failed"). Now the
/// row keeps 256 devices and counts the rest, so the viewer's memory does not grow with the
/// answer: at most 300 MB for 1 MB (the issue's bar), and a 16 MiB answer is a row too.
#[test]
fn a_member_answering_millions_of_devices_costs_the_viewer_little() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let zeros = |bytes: usize| {
        let mut b = br#"{"kind":"monitor","devices":["#.to_vec();
        while b.len() + 4 < bytes {
            b.extend_from_slice(b"0,");
        }
        b.extend_from_slice(b"0]}");
        b
    };
    // The body limit is 16 MiB: the largest answer a member may send.
    let sizes = [(1_000_000usize, "1 MB"), ((16 << 20) - 64, "16 MiB")];
    for (bytes, what) in sizes {
        let body = zeros(bytes);
        let sent = body.iter().filter(|&&c| c == b'0').count();
        let addr = member(move || body.clone());
        let list = format!("{addr}");
        for mode in ["--json", "--html"] {
            let args: Vec<String> = [
                "monitor",
                "--hosts",
                &list,
                mode,
                "--count",
                "1",
                "--timeout",
                "20",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let Cost {
                peak_mib: mib,
                code,
                out,
                err,
                ..
            } = cost(&args);
            println!("fleet member answering {what} of zeros, {mode}: peak {mib:.0} MiB");
            assert_eq!(code, Some(0), "{what} {mode}: {err}");
            assert!(
                mib < 300.0,
                "{what} {mode}: the viewer peaked at {mib:.0} MiB (bar: 300 MB)"
            );
            if mode == "--json" {
                let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
                let h = &v["hosts"][0];
                assert_eq!(h["state"], "up", "{h}");
                assert_eq!(h["device_rows"].as_array().unwrap().len(), 0, "{h}");
                assert_eq!(h["devices_not_shown"], sent, "{h}");
                assert!(fleet_schema().is_valid(&v), "{v}");
            } else {
                assert!(out.contains("more machines"), "{what}: {out:.300}");
            }
        }
    }
    // Objects count as devices up to the cap, the rest is counted.
    let mut b = br#"{"kind":"monitor","devices":["#.to_vec();
    for i in 0..1000 {
        b.extend_from_slice(
            format!(
                r#"{{"vendor":"amd","index":{i},"name":"{}","up":true}},"#,
                "x".repeat(1000)
            )
            .as_bytes(),
        );
    }
    b.extend_from_slice(br#"{"vendor":"amd","index":1000}]}"#);
    let addr = member(move || b.clone());
    let (code, docs, err) = fleet_json(&[
        "monitor",
        "--hosts",
        &addr.to_string(),
        "--json",
        "--count",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let h = &docs[0]["hosts"][0];
    assert_eq!(h["device_rows"].as_array().unwrap().len(), 256);
    assert_eq!(h["devices_not_shown"], 1001 - 256);
    assert_eq!(h["device_rows"][0]["name"].as_str().unwrap().len(), 256);
    let out = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["monitor", "--hosts", &addr.to_string(), "--count", "1"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("745 more devices in its answer not shown"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A stand-in for Prometheus's HTTP API (its query endpoint only): `answer(query)` gives the
/// result list of each instant query, after `delay`.
fn fake_prometheus(
    delay: Duration,
    answer: impl Fn(&str) -> String + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut first = String::new();
                let _ = r.read_line(&mut first);
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let query = first
                    .split("query=")
                    .nth(1)
                    .and_then(|q| q.split([' ', '&']).next())
                    .unwrap_or("")
                    .to_string();
                std::thread::sleep(delay);
                let body = format!(
                    r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
                    answer(&query)
                );
                let mut s = s;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

/// 8,000 GPUs read from Prometheus (dcgm-exporter's series, 1,000 machines of 8): every GPU
/// is a row, at a CPU cost that grows with the GPUs, not with their square (8.45 s of CPU a
/// round before; the bar here is 2 s for all of it, start-up included); and `--timeout`
/// bounds the whole round: 13 queries answered 0.4 s each (each within the timeout) end the
/// round at the 1.5 s asked for, not at 5.2 s.
#[test]
fn prometheus_with_eight_thousand_gpus_is_linear_and_bounded_by_the_timeout() {
    let series = |query: &str| -> String {
        if !query.starts_with("DCGM_FI_DEV_") && query != "up" {
            return String::new();
        }
        let mut v = Vec::with_capacity(8000);
        for host in 0..1000 {
            for gpu in 0..8 {
                let instance = format!("10.0.{}.{}:9400", host / 250, host % 250);
                let value = match query {
                    "up" if gpu == 0 => "1",
                    "up" => continue,
                    "DCGM_FI_DEV_FB_USED" => "1024",
                    "DCGM_FI_DEV_FB_FREE" => "3072",
                    _ => "50",
                };
                v.push(format!(
                    r#"{{"metric":{{"instance":"{instance}","gpu":"{gpu}","UUID":"GPU-{host}-{gpu}","modelName":"Tesla T4"}},"value":[1,"{value}"]}}"#
                ));
            }
        }
        v.join(",")
    };
    let addr = fake_prometheus(Duration::ZERO, series);
    let Cost {
        cpu_s: cpu,
        code,
        out,
        err,
        ..
    } = cost(&[
        "monitor",
        "--prometheus",
        &format!("http://{addr}"),
        "--json",
        "--count",
        "1",
        "--timeout",
        "30",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["totals"]["devices"], 8000, "{:.300}", out);
    assert_eq!(v["totals"]["hosts"], 1000);
    // The memory from dcgm's MiB: 1 GiB used of 4 GiB on every GPU.
    assert_eq!(v["totals"]["memory_total_bytes"], 8000u64 * (4 << 30));
    println!("monitor --prometheus over 8,000 GPUs: {cpu:.2} s of CPU");
    assert!(cpu < 2.0, "{cpu:.2} s of CPU for 8,000 GPUs");

    let slow = fake_prometheus(Duration::from_millis(400), |_| String::new());
    let t = Instant::now();
    let Cost { code, err, .. } = cost(&[
        "monitor",
        "--prometheus",
        &format!("http://{slow}"),
        "--json",
        "--count",
        "1",
        "--timeout",
        "1.5",
    ]);
    let took = t.elapsed().as_secs_f64();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("within --timeout 1.5 s"), "{err}");
    assert!(took < 3.0, "the round took {took:.1} s with --timeout 1.5");
}

/// A member whose clock is a day behind, but whose samples move, is up (with a note on its
/// clock); before, freshness was its own time against ours, so it was "stale" for good (and
/// one a day ahead could never be).
#[test]
fn a_member_with_a_skewed_clock_is_judged_by_whether_its_samples_move() {
    // Its sample time is now less a day, at every answer.
    let addr = member(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        format!(
            r#"{{"kind":"monitor","time_unix_s":{},"devices":[]}}"#,
            now - 86_400.0
        )
        .into_bytes()
    });
    let (code, docs, err) = fleet_json(&[
        "monitor",
        "--hosts",
        &addr.to_string(),
        "--json",
        "--count",
        "3",
        "--interval",
        "0.3",
    ]);
    assert_eq!(code, Some(0), "{err}");
    for d in &docs {
        let h = &d["hosts"][0];
        assert_eq!(h["state"], "up", "{h}");
        let note = h["error"].as_str().unwrap_or_default();
        assert!(note.contains("86400 s behind"), "{h}");
    }
}
