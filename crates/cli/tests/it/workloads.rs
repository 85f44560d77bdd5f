//! Whose work is on the GPU: the `workloads` fixture (four DRM clients of one AMD GPU, in two
//! Kubernetes pods, a Slurm job and a login session; its README lists each cgroup line and the
//! workload it names, worked out by hand) through `accel mem`, `accel monitor` and
//! `accel serve --collector.process.labels`.

use std::process::Command;

use crate::serve_common::*;

const POD_A: &str = "3f2a6b1c-7d8e-4f90-a1b2-c3d4e5f60718";
const POD_B: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const CTR_A: &str = "9c1e0f7d3b2a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5";
const CTR_B: &str = "1f2e3d4c5b6a79880716253443526170a1b2c3d4e5f60718293a4b5c6d7e8f90";

fn roots() -> Vec<String> {
    let f = format!(
        "{}/../telemetry/tests/fixtures/telemetry/workloads",
        env!("CARGO_MANIFEST_DIR")
    );
    vec![
        "--path.sysfs".into(),
        format!("{f}/sys"),
        "--path.procfs".into(),
        format!("{f}/proc"),
    ]
}

fn accel(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .args(roots())
        .output()
        .unwrap()
}

#[test]
fn mem_json_names_each_process_s_workload() {
    let o = accel(&["mem", "--json", "--interval", "0.05"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 3);
    let procs = v["devices"][0]["processes"].as_array().unwrap();
    let by_pid = |pid: u64| {
        procs
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("no pid {pid} in {procs:?}"))["workload"]
            .clone()
    };
    let a = by_pid(3001);
    assert_eq!(a["pod_uid"], POD_A);
    assert_eq!(a["qos_class"], "burstable");
    assert_eq!(a["container_id"], CTR_A);
    assert_eq!(a["runtime"], "containerd");
    let b = by_pid(3002);
    assert_eq!(b["pod_uid"], POD_B);
    assert_eq!(b["qos_class"], "guaranteed");
    assert_eq!(b["container_id"], CTR_B);
    let job = by_pid(3003);
    assert_eq!(job["slurm_job"], 4242);
    assert_eq!(job["slurm_step"], "0");
    assert_eq!(job["pod_uid"], serde_json::Value::Null);
    let session = by_pid(3004);
    assert_eq!(session["unit"], "session-3.scope");
    assert_eq!(session["container_id"], serde_json::Value::Null);
    // And in the text: one short name per row.
    let o = accel(&["mem", "--interval", "0.05"]);
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "pid 3001 python3 (root) [pod 3f2a6b1c/9c1e0f7d3b2a]",
        "pid 3002 python3 (root) [pod 0a1b2c3d/1f2e3d4c5b6a]",
        "[job 4242.0]",
        "[session-3.scope]",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

/// The series of one scrape of `accel serve` over the fixture, with `more` arguments.
fn scrape(more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = roots();
    args.extend([
        "--tpu.metrics-address".to_string(),
        format!("127.0.0.1:{}", free_port()),
    ]);
    args.extend(more.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_p, addr) = serve_with("60", &args);
    let (code, _, body) = Client::new(addr).get("/metrics").unwrap();
    assert_eq!(code, 200);
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn serve_labels_processes_with_their_workloads_only_when_asked() {
    let off = scrape(&[]);
    let on = scrape(&["--collector.process.labels=pod_uid,container_id,qos_class,hpc_job"]);
    // Off: no workload label and no workload series.
    assert!(off.iter().all(|l| !l.contains("pod_uid=")
        && !l.contains("hpc_job=")
        && !l.starts_with("accel_device_workload_info")));
    // On: the same series (the per-process ones with more labels), plus one info series per
    // workload with a process on the device (both pods and the job; the session has none of
    // these labels).
    let name = |l: &String| l.split(['{', ' ']).next().unwrap().to_string();
    let info: Vec<&String> = on
        .iter()
        .filter(|l| l.starts_with("accel_device_workload_info"))
        .collect();
    assert_eq!(info.len(), 3, "{info:#?}");
    let rest: Vec<String> = on
        .iter()
        .filter(|l| !l.starts_with("accel_device_workload_info"))
        .map(name)
        .collect();
    let mut rest_sorted = rest.clone();
    rest_sorted.sort();
    let mut off_names: Vec<String> = off.iter().map(name).collect();
    off_names.sort();
    // Values such as scrape durations change between the two servers; the series do not.
    assert_eq!(rest_sorted, off_names);
    let mem_a = on
        .iter()
        .find(|l| l.starts_with("accel_device_process_memory_bytes") && l.contains("pid=\"3001\""))
        .unwrap();
    for want in [
        format!("pod_uid=\"{POD_A}\""),
        format!("container_id=\"{CTR_A}\""),
        "qos_class=\"burstable\"".to_string(),
        "hpc_job=\"\"".to_string(),
    ] {
        assert!(mem_a.contains(&want), "{want} not in {mem_a}");
    }
    assert!(info
        .iter()
        .any(|l| l.contains(&format!("pod_uid=\"{POD_B}\""))
            && l.contains("qos_class=\"guaranteed\"")));
    assert!(info.iter().any(|l| l.contains("hpc_job=\"4242.0\"")));
}

#[test]
fn unknown_labels_are_refused_with_the_names_there_are() {
    let o = accel(&["serve", "--collector.process.labels=job"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("hpc_job") && e.contains("namespace, pod, container"),
        "{e}"
    );
    let o = accel(&["serve", "--collector.process.labels=bogus"]);
    assert_eq!(o.status.code(), Some(2));
}

// ---- the kubelet's pod-resources API, served for real ---------------------------------------

/// Python with grpcio and grpcio-tools, or why not.
fn grpc_python() -> Result<std::path::PathBuf, String> {
    let python = match std::env::var_os("VIRTUAL_ENV") {
        Some(v) if std::path::Path::new(&v).join("bin/python").exists() => {
            std::path::Path::new(&v).join("bin/python")
        }
        _ => "python3".into(),
    };
    let out = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools.protoc"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import grpc and grpc_tools (pip install grpcio grpcio-tools)",
            python.display()
        ));
    }
    Ok(python)
}

/// A fake kubelet (grpcio, the kubelet's own proto file in
/// accelkit-telemetry/tests/fixtures/telemetry/pod-resources/) on a unix socket in `dir`, serving
/// `pods` (the JSON the fake kubelet's docstring describes). `None` with the skip line printed
/// when grpc is not there.
fn kubelet(dir: &std::path::Path, pods: &str) -> Option<(Proc, String)> {
    let python = match grpc_python() {
        Ok(p) => p,
        Err(why) => {
            accelkit_testkit::skip("grpc", &why.to_string(), "workloads");
            return None;
        }
    };
    let protos = format!(
        "{}/../telemetry/tests/fixtures/telemetry/pod-resources",
        env!("CARGO_MANIFEST_DIR")
    );
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new(&python)
        .args(["-m", "grpc_tools.protoc", &format!("-I{protos}")])
        .arg(format!("--python_out={}", dir.display()))
        .arg(format!("--grpc_python_out={}", dir.display()))
        .arg("api.proto")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let socket = dir.join("kubelet.sock");
    let mut child = Command::new(&python)
        .arg(format!("{protos}/fake_kubelet.py"))
        .arg(&socket)
        .arg(pods)
        .env("PYTHONPATH", dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    Some((Proc(child), socket.display().to_string()))
}

/// Two pods on the fixture's one AMD GPU (0000:03:00.0, card0), and one on an NVIDIA GPU this
/// machine does not have.
const TWO_PODS: &str = r#"[
  {"namespace": "ml", "name": "trainer-a", "containers": [
     {"name": "main", "devices": [["amd.com/gpu", ["0000:03:00.0"]]]},
     {"name": "logs", "devices": []}]},
  {"namespace": "research", "name": "notebook-b", "containers": [
     {"name": "jupyter", "devices": [["amd.com/gpu", ["0000:03:00.0"]]]}]},
  {"namespace": "ml", "name": "elsewhere", "containers": [
     {"name": "main", "devices": [["nvidia.com/gpu", ["GPU-5a2f0c1e-0000-1111-2222-333344445555"]]]}]}
]"#;

#[test]
fn the_kubelet_names_the_pods_that_hold_the_gpu() {
    let dir = std::env::temp_dir().join(format!("accel-kubelet-{}", std::process::id()));
    let Some((_k, socket)) = kubelet(&dir, TWO_PODS) else {
        return;
    };
    let sock = ["--kubelet.pod-resources-socket", socket.as_str()];
    // mem --json: both containers own the device; the processes of the two pods keep their
    // UIDs (the kubelet names none), with the reason.
    let mut args = vec!["mem", "--json", "--interval", "0.05"];
    args.extend(sock);
    let o = accel(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["devices"][0];
    let owners: Vec<String> = d["owners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}/{} ({}) {}",
                o["namespace"], o["pod"], o["container"], o["resource"]
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            r#""ml"/"trainer-a" ("main") "amd.com/gpu""#,
            r#""research"/"notebook-b" ("jupyter") "amd.com/gpu""#
        ]
    );
    let p3001 = d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 3001)
        .unwrap();
    assert_eq!(p3001["workload"]["pod"], serde_json::Value::Null);
    assert!(p3001["note"]
        .as_str()
        .unwrap()
        .contains("2 container(s) hold amd:0"));
    let kubelet = v["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collector"] == "kubelet")
        .expect("a kubelet collector");
    assert_eq!(kubelet["success"], true, "{kubelet}");
    let mut args = vec!["mem", "--interval", "0.05"];
    args.extend(sock);
    let text = String::from_utf8_lossy(&accel(&args).stdout).into_owned();
    assert!(
        text.contains("held by ml/trainer-a (main), research/notebook-b (jupyter)")
            && text.contains("pid 3001 python3 (root) [pod 3f2a6b1c/9c1e0f7d3b2a]"),
        "{text}"
    );

    // /metrics: with the kubelet's labels on, one owner series per container holding the GPU,
    // both pods named, and the Slurm job on its process's series; off, not one series more
    // than without a kubelet (it is not even asked).
    let mut on_args = vec!["--collector.process.labels=namespace,pod,container,hpc_job"];
    on_args.extend(sock);
    let on = scrape(&on_args);
    let owner: Vec<&String> = on
        .iter()
        .filter(|l| l.starts_with("accel_device_owner_info"))
        .collect();
    assert_eq!(owner.len(), 2, "{owner:#?}");
    for (ns, pod, ctr) in [
        ("ml", "trainer-a", "main"),
        ("research", "notebook-b", "jupyter"),
    ] {
        assert!(
            owner.iter().any(|l| l.contains(&format!(
                "device=\"amd:0\",namespace=\"{ns}\",pod=\"{pod}\",container=\"{ctr}\""
            ))),
            "{ns}/{pod} not in {owner:#?}"
        );
    }
    assert!(on
        .iter()
        .any(|l| l.starts_with("accel_device_process_memory_bytes")
            && l.contains("pid=\"3003\"")
            && l.contains("hpc_job=\"4242.0\"")));
    let name = |l: &String| l.split(['{', ' ']).next().unwrap().to_string();
    let series = |v: &[String]| {
        let mut n: Vec<String> = v
            .iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect();
        n.retain(|l| !l.contains("duration_seconds") && !l.contains("scrape"));
        n.sort();
        n
    };
    let mut off_args = vec![];
    off_args.extend(sock);
    let off = scrape(&off_args);
    let plain = scrape(&[]);
    assert!(off
        .iter()
        .all(|l| !l.contains("kubelet") && !l.contains("owner")));
    assert_eq!(
        off.iter()
            .map(name)
            .collect::<std::collections::BTreeSet<_>>(),
        plain
            .iter()
            .map(name)
            .collect::<std::collections::BTreeSet<_>>()
    );
    assert_eq!(series(&off).len(), series(&plain).len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_gets_the_names_of_the_one_pod_that_holds_its_gpu() {
    let dir = std::env::temp_dir().join(format!("accel-kubelet1-{}", std::process::id()));
    let Some((_k, socket)) = kubelet(
        &dir,
        r#"[{"namespace": "ml", "name": "trainer-a", "containers": [
              {"name": "main", "devices": [["amd.com/gpu", ["card0"]]]}]}]"#,
    ) else {
        return;
    };
    // The fixture's procfs without pod B's process: on the GPU, one pod's process, one
    // container holding it (named by its DRM card, as Intel's and some AMD plugins do).
    let fixture = format!(
        "{}/../telemetry/tests/fixtures/telemetry/workloads",
        env!("CARGO_MANIFEST_DIR")
    );
    let proc = dir.join("proc");
    let cp = Command::new("cp")
        .args([
            "-a",
            &format!("{fixture}/proc"),
            &proc.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(proc.join("3002")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args([
            "mem",
            "--interval",
            "0.05",
            "--path.sysfs",
            &format!("{fixture}/sys"),
        ])
        .arg("--path.procfs")
        .arg(&proc)
        .args(["--kubelet.pod-resources-socket", &socket])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("pid 3001 python3 (root) [pod ml/trainer-a (main)]"),
        "{text}"
    );
    assert!(text.contains("[job 4242.0]"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_series_the_alert_rules_use_is_one_the_exporter_serves() {
    let rules = std::fs::read_to_string(format!(
        "{}/../../deploy/prometheus/alerts.yml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut names: Vec<String> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("accel_"))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 6, "{names:?}");
    // A real scrape of a fixture machine (an AMD and an Intel GPU); the series only NVML
    // gives (throttle reasons, ECC counters) must at least be ones the exporter registers.
    let f = |d: &str| {
        format!(
            "{}/../telemetry/tests/fixtures/telemetry/mixed/{d}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let (_p, addr) = serve_with(
        "60",
        &[
            "--path.sysfs",
            &f("sys"),
            "--path.procfs",
            &f("proc"),
            "--tpu.metrics-address",
            &format!("127.0.0.1:{}", free_port()),
        ],
    );
    let (_, _, body) = Client::new(addr).get("/metrics").unwrap();
    let source = ["mod.rs", "series.rs"]
        .map(|f| {
            std::fs::read_to_string(format!(
                "{}/../exporter/src/serve/{f}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        })
        .concat();
    for n in &names {
        let scraped = body.lines().any(|l| l.starts_with(&format!("{n}{{")));
        let nvml_only = [
            "accel_device_throttle_reason",
            "accel_device_memory_repair_pending",
            "accel_device_memory_repair_failed",
            "accel_device_pcie_replay_errors",
            "accel_device_xid_errors",
        ]
        .contains(&n.as_str())
            && source.contains(&format!("\"{n}\""));
        assert!(scraped || nvml_only, "{n} is in alerts.yml but not served");
    }
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    if !tool("prometheus") {
        println!("skipped: prometheus: not installed (every_dashboard_query_returns_data_from_a_real_prometheus)");
        return;
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../deploy/grafana/accel.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    // The workloads fixture with the labels on, so the workload table has rows too.
    let mut args = roots();
    args.extend([
        "--tpu.metrics-address".to_string(),
        format!("127.0.0.1:{}", free_port()),
        "--collector.process.labels=pod_uid,container_id,hpc_job".to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_p, addr) = serve_with("1", &args);
    let dir = std::env::temp_dir().join(format!("accel-dashboard-{}", std::process::id()));
    let (_prom, query) = prometheus(&dir, addr);
    let nonempty = |r: &[(serde_json::Value, f64)]| !r.is_empty();
    // The host variable's query, then every panel's with every host ("All": `.*`).
    wait_for(&query, "accel_device_up", 60, nonempty).unwrap_or_else(|| {
        panic!(
            "no scrape stored within 60 s:\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        )
    });
    for e in &exprs {
        let q = e.replace("$host", ".*");
        assert!(
            wait_for(&query, &q, 15, nonempty).is_some(),
            "the dashboard's query {e} returned no data"
        );
    }
}
