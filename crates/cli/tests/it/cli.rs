//! The real `accel` binary: exit codes, text and JSON output.

use std::process::{Command, Output};

fn accel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .expect("the accel binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

#[test]
fn devices_json_has_every_backend_with_a_reason() {
    let o = accel(&["devices", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 3);
    assert_eq!(v["kind"], "devices");
    let backends = v["backends"].as_array().unwrap();
    let names: Vec<&str> = backends
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu", "cuda", "mps", "xla", "wgpu"]);
    for b in backends {
        match b["status"].as_str().unwrap() {
            "available" => {
                let d = &b["devices"][0];
                assert!(d["device"].is_string() && d["name"].is_string());
            }
            "unavailable" => assert!(!b["reason"].as_str().unwrap().is_empty()),
            s => panic!("unknown status {s}"),
        }
    }
    assert!(
        backends[0]["devices"][0]["memory_total_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(v["best_device"].is_string());
}

/// Without a driver `accel devices` finds the CUDA libraries of the test environment's
/// wheels without loading them (PyTorch's cost 300 MB and 0.2 s to load) and names the
/// wheels' versions; `accel doctor` loads them (`the_cuda_12_wheels_are_found_...`).
#[test]
fn devices_finds_cuda_libraries_unloaded_without_a_driver() {
    let v = json(&accel(&["devices", "--json"]));
    let libs = v["cuda_libraries"].as_array().expect("cuda_libraries");
    let by = |n: &str| libs.iter().find(|l| l["name"] == n).expect(n);
    if by("cuda")["loaded"] == true {
        println!("skipped: cuda: a driver is here, so every library is loaded");
        return;
    }
    let nvrtc = by("nvrtc");
    if nvrtc["path"].is_null() {
        println!("skipped: nvrtc: no NVRTC wheel in this environment");
        return;
    }
    assert_eq!(nvrtc["loaded"], false, "{nvrtc}");
    let version = nvrtc["version"].as_str().unwrap_or_default();
    let major = nvrtc["major"].as_u64().unwrap();
    assert!(version.starts_with(&format!("{major}.")), "{nvrtc}");
    assert!(stdout(&accel(&["devices"])).contains("found, not loaded: no driver"));
}

#[test]
fn devices_text_lists_cpu_and_reasons() {
    let o = accel(&["devices"]);
    assert!(o.status.success());
    let s = stdout(&o);
    assert!(s.starts_with("cpu "), "{s}");
    assert!(s.contains("best device: "), "{s}");
    for b in ["cuda", "mps", "xla", "wgpu"] {
        assert!(s.lines().any(|l| l.starts_with(b)), "{b} missing from\n{s}");
    }
}

#[test]
fn devices_and_doctor_print_html_tables() {
    let o = accel(&["devices", "--html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let h = stdout(&o);
    assert!(h.starts_with("<div class=\"accel-report\"><style>"), "{h}");
    for b in ["cpu", "cuda", "mps", "xla", "wgpu"] {
        assert!(
            h.contains(&format!("<tr><td>{b}</td>")),
            "{b} missing from {h}"
        );
    }
    assert!(!h.contains("<script"), "{h}");
    // A check that fails here (no CUDA driver) is marked by its word, with its fix.
    let o = accel(&["doctor", "--html"]);
    let h = stdout(&o);
    assert!(h.contains("<td class=\"st pass\">PASS</td>"), "{h}");
    assert!(h.contains("<div class=\"fix\">fix: "), "{h}");
    assert_eq!(
        accel(&["doctor", "--html", "--json"]).status.code(),
        Some(2)
    );
}

#[test]
fn bench_matmul_json_is_checked_and_unit_suffixed() {
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "64", "--size", "96", "--dtype", "f64",
        "--warmup", "1", "--iters", "3", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 3);
    assert_eq!(v["benchmark"], "matmul");
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["size"], 64);
    assert_eq!(r[1]["size"], 96);
    assert_eq!(r[0]["dtype"], "f64");
    assert_eq!(r[0]["device"], "cpu");
    assert_eq!(r[0]["stats"]["samples"], 3);
    let s = &r[0]["stats"];
    assert!(s["min_s"].as_f64().unwrap() <= s["median_s"].as_f64().unwrap());
    assert!(s["median_s"].as_f64().unwrap() <= s["max_s"].as_f64().unwrap());
    assert!(r[0]["gflop_per_s"].as_f64().unwrap() > 0.0);
    assert!(r[0]["first_run_s"].as_f64().unwrap() > 0.0);
    assert!(r[0]["max_rel_error"].as_f64().unwrap() < 1e-12);
}

#[test]
fn bench_text_has_a_row_per_run() {
    let o = accel(&[
        "bench", "matmul", "--size", "32", "--dtype", "i64", "--iters", "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(
        s.contains("matmul i64: 3 warm-ups, 2 timed iterations"),
        "{s}"
    );
    assert!(
        s.lines().any(|l| l.starts_with("cpu") && l.contains("32")),
        "{s}"
    );
}

#[test]
fn mem_json_has_host_and_device_figures() {
    let o = accel(&["mem", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], 3);
    assert!(v["host"]["memory"]["total_bytes"].as_u64().unwrap() > 0);
    assert!(v["host"]["cpu_percent"].as_f64().is_some());
    // Measured over --interval (0.5 s by default), as psutil.cpu_percent(interval=0.5).
    assert!(v["measured_over_s"].as_f64().unwrap() >= 0.5);
    // Telemetry only: a fresh process has used no device, and probes none.
    assert_eq!(v["accel_memory"].as_array().unwrap().len(), 0);
    assert!(v["devices"].is_array());
    let t = accel(&["mem"]);
    assert!(stdout(&t).contains("host RAM:"));
}

#[test]
fn usage_errors_exit_2_with_one_clear_line() {
    for args in [
        &["bench", "matmul", "--device", "tpu"][..],
        &["bench", "matmul", "--dtype", "f8"],
        &["bench", "matmul", "--iters", "0"],
        &["frobnicate"],
        // "internal error in accel" (a panic in Duration::from_secs_f64) before numeric
        // options were range-checked at parse time; the rest are the ranges now checked.
        &["mem", "--watch", "1e20"],
        &["bench", "matmul", "--size", "0", "--device", "cpu"],
        &["bench", "matmul", "--size", "18446744073709551615"],
        &["bench", "matmul", "--size", "8x9"],
        &["bench", "matmul", "--size", "8x9x0"],
        &["bench", "elementwise", "--size", "99999999999999"],
        &["bench", "copy", "--size", "2TiB"],
        &["bench", "matmul", "--warmup", "100001"],
        &["bench", "matmul", "--iters", "99999999999"],
        &["bench", "matmul", "--min-time", "1e300"],
    ] {
        let o = accel(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("error: "), "{args:?}: {e}");
        assert!(
            !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
            "{e}"
        );
    }
    let o = accel(&["bench", "matmul", "--device", "tpu"]);
    assert!(
        stderr(&o).contains("TPUs are reached through XLA"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn runtime_errors_exit_1_with_one_clear_line() {
    // One past the last GPU, however many this machine has.
    let missing = format!("cuda:{}", accelkit::cuda::device_count());
    let o = accel(&["bench", "matmul", "--device", &missing, "--size", "8"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.starts_with(&format!("error: device {missing} is not available: ")),
        "{e}"
    );
    assert!(e.contains("available devices: "), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}

#[test]
fn help_and_version_succeed() {
    let o = accel(&["--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("devices") && stdout(&o).contains("bench"));
    assert!(accel(&["--version"]).status.success());
}

#[test]
fn bench_csv_has_a_header_and_a_row_per_run() {
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "16", "--size", "24", "--iters", "2",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 3, "{s}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[..3], ["device", "dtype", "size"]);
    assert!(header.contains(&"median_s") && header.contains(&"gflop_per_s"));
    for (row, size) in lines[1..].iter().zip(["16", "24"]) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{row}");
        assert_eq!(cells[..3], ["cpu", "f32", size]);
        let median: f64 = cells[header.iter().position(|h| *h == "median_s").unwrap()]
            .parse()
            .unwrap();
        assert!(median > 0.0);
    }
    let both = accel(&["bench", "matmul", "--csv", "--json"]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn compare_against_an_earlier_json_run() {
    let dir = std::env::temp_dir().join(format!("accelkit-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("base.json");
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "32", "--iters", "3", "--json",
    ]);
    assert!(o.status.success());
    std::fs::write(&base, &o.stdout).unwrap();
    let b = base.to_str().unwrap();
    let o = accel(&[
        "bench",
        "matmul",
        "--device",
        "cpu",
        "--size",
        "32",
        "--size",
        "40",
        "--iters",
        "3",
        "--json",
        "--compare",
        b,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let c = v["comparison"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    let earlier = c[0]["baseline_median_s"].as_f64().unwrap();
    let now = c[0]["median_s"].as_f64().unwrap();
    assert!((c[0]["speedup"].as_f64().unwrap() - earlier / now).abs() < 1e-9);
    assert!(
        c[1]["baseline_median_s"].is_null(),
        "size 40 was not in the earlier run"
    );
    let text = accel(&[
        "bench",
        "matmul",
        "--size",
        "32",
        "--iters",
        "2",
        "--compare",
        b,
    ]);
    assert!(
        stdout(&text).contains("compared with "),
        "{}",
        stdout(&text)
    );
    // A missing file or another benchmark's report fails before anything runs.
    let o = accel(&[
        "bench",
        "matmul",
        "--compare",
        dir.join("missing.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: cannot read "),
        "{}",
        stderr(&o)
    );
    let o = accel(&["bench", "elementwise", "--compare", b]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("holds a \"matmul\" benchmark"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_reads_an_older_copy_report_and_names_a_broken_one() {
    let dir = std::env::temp_dir().join(format!("accelkit-cli-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = |extra: &[&str]| {
        let mut args = vec![
            "bench", "copy", "--device", "cpu", "--size", "4KiB", "--iters", "2", "--json",
        ];
        args.extend(extra);
        accel(&args)
    };
    let o = copy(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Reports from before the host-memory choice had no host_memory (nor copy peaks): their
    // copies were pageable, and match this run's.
    let mut v = json(&o);
    for r in v["results"].as_array_mut().unwrap() {
        let r = r.as_object_mut().unwrap();
        for k in ["host_memory", "peak", "percent_of_peak", "device_stats"] {
            r.remove(k);
        }
    }
    let old = dir.join("old.json");
    std::fs::write(&old, v.to_string()).unwrap();
    let o = copy(&["--compare", old.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c = &json(&o)["comparison"][0];
    assert_eq!(c["run"], "h2d pageable cpu f32 size 4096");
    assert!(c["baseline_median_s"].as_f64().unwrap() > 0.0, "{c}");
    // A run without its measurements is no report: the error names what is missing.
    v["results"][0]["stats"]
        .as_object_mut()
        .unwrap()
        .remove("median_s");
    std::fs::write(&old, v.to_string()).unwrap();
    let o = copy(&["--compare", old.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("is not an accel --json report") && e.contains("`median_s`"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plot_is_an_svg_with_one_series_per_device() {
    let path = std::env::temp_dir().join(format!("accel-plot-{}.svg", std::process::id()));
    let p = path.to_str().unwrap();
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "16", "--size", "32", "--size", "48",
        "--iters", "2", "--plot", p,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert!(svg.contains("matmul f32") && svg.contains("GFLOP/s"));
    // The CPU's line with its three points, and its legend entry.
    assert!(svg.contains("<polyline"), "no series line");
    assert_eq!(svg.matches("<circle").count(), 3);
    assert!(
        svg.lines().any(|l| l.trim() == "cpu"),
        "no legend entry for cpu"
    );
    std::fs::remove_file(&path).unwrap();
    // Linear layers on more and more tokens: throughput against M.
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "4x16x8", "--size", "8x16x8", "--linear",
        "--iters", "2", "--plot", p,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.contains("M (rows of A)") && svg.contains("x @ W.t()"),
        "{svg}"
    );
    assert_eq!(svg.matches("<circle").count(), 2);
    std::fs::remove_file(&path).unwrap();
    // Products that differ in more than M have no one x axis: refused before anything runs.
    let o = accel(&[
        "bench", "matmul", "--size", "8x16x16", "--size", "8x32x16", "--plot", p,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty() && !path.exists());
    assert!(stderr(&o).contains("differ in M alone"), "{}", stderr(&o));
    // Another format is refused before anything runs.
    let o = accel(&["bench", "matmul", "--size", "16", "--plot", "x.jpg"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert!(
        stderr(&o).contains("--plot writes SVG or PNG"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn plot_png_is_a_real_image_with_the_series_drawn() {
    let path = std::env::temp_dir().join(format!("accel-plot-{}.png", std::process::id()));
    let p = path.to_str().unwrap();
    let o = accel(&[
        "bench", "matmul", "--device", "cpu", "--size", "16", "--size", "32", "--iters", "2",
        "--plot", p,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = std::fs::File::open(&path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (800, 500));
    assert_eq!(info.color_type, png::ColorType::Rgba);
    // The first series is drawn in plotters' first palette colour, a strong red: its line
    // and markers cover many pixels; the background is white.
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(4).collect();
    let red = px
        .iter()
        .filter(|c| c[0] > 180 && c[1] < 90 && c[2] < 120 && c[3] > 200)
        .count();
    let white = px
        .iter()
        .filter(|c| c[0] > 250 && c[1] > 250 && c[2] > 250)
        .count();
    assert!(red > 200, "series pixels: {red}");
    assert!(white > px.len() / 2, "mostly white background");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bench_copy_names_its_host_memory_and_explains_its_peak() {
    let o = accel(&[
        "bench", "copy", "--device", "cpu", "--size", "4KiB", "--iters", "2", "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 2, "{s}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[..4], ["direction", "device", "host_memory", "bytes"]);
    assert!(header.contains(&"percent_of_peak"));
    // The CPU's copies have no host side to choose (a memcpy): the column is empty, as the
    // text table's "-".
    assert_eq!(
        lines[1].split(',').take(4).collect::<Vec<_>>(),
        ["h2d", "cpu", "", "4096"]
    );
    let o = accel(&[
        "bench",
        "copy",
        "--device",
        "cpu",
        "--size",
        "4KiB",
        "--iters",
        "2",
        "--explain",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("peak of cpu for h2d copies: not derivable"),
        "{}",
        stdout(&o)
    );
    // Pinned host memory is a CUDA matter: on the CPU alone there is nothing to time.
    let o = accel(&[
        "bench",
        "copy",
        "--device",
        "cpu",
        "--host-memory",
        "pinned",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("pinned host memory applies to"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn mem_watch_reports_again_and_stops_after_count() {
    let o = accel(&["mem", "--watch", "0.3", "--count", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert_eq!(s.matches("host RAM:").count(), 2, "{s}");
    assert!(s.starts_with("--- t = 0.0 s"), "{s}");
    assert_eq!(s.matches("--- t = ").count(), 2, "{s}");
    // JSON: one document per line.
    let o = accel(&["mem", "--json", "--watch", "0.3", "--count", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["kind"], "mem");
        assert!(v["host"]["memory"]["total_bytes"].as_u64().unwrap() > 0);
    }
    // Usage errors: --count needs --watch; the interval must be positive.
    assert_eq!(accel(&["mem", "--count", "2"]).status.code(), Some(2));
    assert_eq!(accel(&["mem", "--watch", "0"]).status.code(), Some(2));
}

#[test]
fn mem_watch_energy_integrates_power_and_reads_counters() {
    let f = |d: &str| {
        format!(
            "{}/../telemetry/tests/fixtures/telemetry/mixed/{d}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let o = accel(&[
        "mem",
        "--watch",
        "0.3",
        "--count",
        "3",
        "--energy",
        "--path.sysfs",
        &f("sys"),
        "--path.procfs",
        &f("proc"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("energy over "))
        .collect();
    assert_eq!(lines.len(), 3, "{s}");
    // The last line: the fixture's AMD card draws 245 W and has no energy counter, so its
    // energy is 245 W times the seconds between the first and the last report; the xe card's
    // counter does not move (0 J); this VM's fixture has no RAPL zones.
    let last = lines[2];
    let secs: f64 = last["energy over ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let amd = last.split("amd:0 ").nth(1).unwrap();
    let (num, unit) = {
        let mut it = amd.split(' ');
        (
            it.next().unwrap().parse::<f64>().unwrap(),
            it.next().unwrap(),
        )
    };
    let joules = if unit == "kJ" { num * 1000.0 } else { num };
    assert!(amd.contains("(power integral)"), "{last}");
    assert!(
        (joules - 245.0 * secs).abs() <= 245.0 * 0.051 + 1.0,
        "{joules} J over {secs} s: {last}"
    );
    assert!(
        last.contains("intel:1 0.0 J = 0.000 Wh (counter)"),
        "{last}"
    );
    assert!(last.contains("host - (no RAPL"), "{last}");
    // --energy needs --watch, and is text (JSON has the counters and powers per sample).
    assert_eq!(accel(&["mem", "--energy"]).status.code(), Some(2));
    assert_eq!(
        accel(&["mem", "--watch", "1", "--json", "--energy"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn monitor_json_shows_the_fixture_gpus_with_their_values() {
    let f = |d: &str| {
        format!(
            "{}/../telemetry/tests/fixtures/telemetry/mixed/{d}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let o = accel(&[
        "monitor",
        "--json",
        "--count",
        "1",
        "--path.sysfs",
        &f("sys"),
        "--path.procfs",
        &f("proc"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{v}");
    // fixtures/telemetry/mixed/README.md: amd:0 42 % busy, 6 of 24 GiB, 65 C, 245 of 355 W;
    // intel:1 (xe) 12 GiB, 55 C.
    let amd = &devices[0];
    assert_eq!(amd["vendor"], "amd");
    assert_eq!(amd["index"], 0);
    assert_eq!(amd["driver"], "amdgpu");
    assert_eq!(amd["pci_bus_id"], "0000:03:00.0");
    assert_eq!(amd["utilization_percent"], 42.0);
    assert_eq!(amd["memory_used_bytes"], 6u64 << 30);
    assert_eq!(amd["memory_total_bytes"], 24u64 << 30);
    assert_eq!(amd["temperature_c"], 65.0);
    assert_eq!(amd["power_w"], 245.0);
    assert_eq!(amd["power_limit_w"], 355.0);
    assert_eq!(amd["processes"][0]["pid"], 1234);
    assert_eq!(amd["processes"][0]["command"], "python3");
    assert_eq!(amd["processes"][0]["memory_bytes"], 1u64 << 30);
    let intel = &devices[1];
    assert_eq!(intel["vendor"], "intel");
    assert_eq!(intel["driver"], "xe");
    assert_eq!(intel["memory_total_bytes"], 12u64 << 30);
    assert_eq!(intel["processes"][0]["command"], "llama-server");
    assert_eq!(intel["processes"][0]["memory_bytes"], 2u64 << 30);
    // The fixture's procfs: 4 cores, MemTotal 65536000 kB, load 3.50.
    assert_eq!(
        v["host"]["cpu_per_core_percent"].as_array().unwrap().len(),
        4
    );
    assert_eq!(v["host"]["memory"]["total_bytes"], 65_536_000u64 * 1024);
    assert_eq!(v["host"]["load_average"][0], 3.5);
}

#[test]
fn pick_without_a_gpu_says_why_and_refuses_bad_values() {
    // A machine without a GPU, whatever this one has: NVML's GPUs are this machine's, and
    // under another --path.sysfs only those it holds are shown (nvidia::not_of_this_sysfs).
    let none = format!(
        "{}/../telemetry/tests/fixtures/telemetry/none/sys",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = accel(&["pick", "--min-free", "8GiB", "--path.sysfs", &none]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(e.starts_with("error: no nvidia GPU on this machine"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    for bad in [
        &["pick", "--max-util", "101"][..],
        &["pick", "--min-free", "8XB"],
        &["pick", "--min-free", "-1"],
        &["pick", "--count", "0"],
    ] {
        let o = accel(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
}

#[test]
fn python3_is_asked_once_and_again_only_when_what_its_answer_depends_on_changes() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join(format!("accel-pyask-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (bin, run, home, sp) = (
        root.join("bin"),
        root.join("run"),
        root.join("home"),
        root.join("sp"),
    );
    for d in [&bin, &run, &home, &sp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A python3 that counts the times it is asked and names one site-packages.
    let count = root.join("asked");
    let python = bin.join("python3");
    let script = |extra: &str| {
        format!(
            "#!/bin/sh\necho x >> '{}'\necho '{}'{extra}\n",
            count.display(),
            sp.display()
        )
    };
    std::fs::write(&python, script("")).unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let asked = || {
        std::fs::read_to_string(&count)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let run_devices = || {
        let o = Command::new(env!("CARGO_BIN_EXE_accel"))
            .args(["devices", "--json"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("XDG_RUNTIME_DIR", &run)
            .env("HOME", &home)
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env_remove("PYENV_VERSION")
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    run_devices();
    assert_eq!(
        asked(),
        1,
        "asked once per command (the helpers take the parent's answer)"
    );
    let kept = run.join("accel-python3-site-packages.json");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    run_devices();
    assert_eq!(asked(), 1, "the kept answer is used");
    // Another python3 at the same place: asked again, then kept again.
    std::fs::write(&python, script(" # another build")).unwrap();
    run_devices();
    assert_eq!(asked(), 2);
    run_devices();
    assert_eq!(asked(), 2);
    // pyenv's choice of version in the working directory changes what python3 is.
    std::fs::write(root.join(".python-version"), "3.12\n").unwrap();
    run_devices();
    assert_eq!(asked(), 3);
    // A cache file others may read or write is not trusted (and is replaced).
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o666)).unwrap();
    run_devices();
    assert_eq!(asked(), 4);
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "rewritten private");
    // Its folder gone: the answer is stale.
    std::fs::remove_dir(&sp).unwrap();
    run_devices();
    assert_eq!(asked(), 5);
    let _ = std::fs::remove_dir_all(&root);
}
