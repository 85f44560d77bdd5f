//! `accel monitor --hosts/--prometheus`: the fleet view of three real `accel serve`
//! processes (one killed, one silent), as JSON, in tmux, and read back from a real
//! Prometheus.

mod serve_common;

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_common::*;

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
