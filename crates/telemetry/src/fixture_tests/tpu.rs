//! The TPU reader: chips found in a TPU VM's sysfs (a fixture tree), numbers from a real gRPC
//! server (Python's grpcio) serving known metrics as libtpu does, and the hand-written HTTP/2 /
//! protobuf client's behaviour on garbage.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::tpu::{self, MetricPoint, TpuReader};
use crate::{Reader, Reading, Roots};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/telemetry")
}

/// The v4-8 TPU VM fixture, with the metrics service at `addr`.
fn vm_roots(addr: &str) -> Roots {
    let vm = fixtures().join("tpu-vm");
    Roots {
        sysfs: vm.join("sys"),
        procfs: vm.join("proc"),
        tpu_metrics: addr.to_string(),
        ..Roots::default()
    }
}

/// An address where nothing listens: a port the system gave us, then closed.
fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = l.local_addr().expect("addr");
    drop(l);
    a.to_string()
}

fn read(roots: &Roots) -> Vec<Reading> {
    let t = Instant::now();
    let r = TpuReader::new()
        .read(roots)
        .expect("the TPU reader fails only on its own errors");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "a read took {:?}",
        t.elapsed()
    );
    r
}

#[test]
fn finds_the_four_chips_of_a_v4_vm_without_a_metrics_service() {
    let addr = dead_addr();
    let chips = read(&vm_roots(&addr));
    // gVNIC (Google's 0x1ae0 too, class 0x02) and the Intel bridge are not chips.
    assert_eq!(chips.len(), 4, "{chips:#?}");
    for (i, c) in chips.iter().enumerate() {
        assert_eq!(c.index, i as u32);
        assert_eq!(c.id(), format!("tpu:{i}"));
        assert_eq!(c.name, "TPU v4");
        assert_eq!(
            c.pci_bus_id.as_deref(),
            Some(&*format!("0000:00:0{}.0", 4 + i))
        );
        assert_eq!(c.driver.as_deref(), Some("tpu"));
        assert!(c.up);
        assert_eq!(
            c.status.as_deref(),
            Some(&*format!(
                "idle / not reporting (no TPU runtime metrics on {addr})"
            ))
        );
        assert_eq!(c.utilization_percent, None);
        assert_eq!(c.memory_used_bytes, None);
        assert_eq!(c.memory_total_bytes, None);
    }
    // Process 4242 holds /dev/accel0 and /dev/accel1 open.
    for (i, c) in chips.iter().enumerate() {
        if i < 2 {
            assert_eq!(c.processes.len(), 1, "chip {i}");
            assert_eq!(c.processes[0].pid, 4242);
            assert_eq!(c.processes[0].command.as_deref(), Some("python3"));
            assert_eq!(c.processes[0].user.as_deref(), Some("54321"));
        } else {
            assert!(c.processes.is_empty(), "chip {i}");
        }
    }
}

#[test]
fn chip_details_from_sysfs() {
    let vm = fixtures().join("tpu-vm");
    let chips = tpu::find_chips(&vm.join("sys"));
    assert_eq!(chips.len(), 4);
    assert_eq!(chips[2].dev_node.as_deref(), Some("/dev/accel2"));
    assert!(chips[2].dev_node_present);
    assert_eq!(chips[0].generation.map(|g| g.name), Some("v4"));
    assert_eq!(tpu::dev_root(Path::new("/sys")), Path::new("/dev"));
    // tpu-info's table.
    let name = |d, s| tpu::generation(d, s).map(|g| g.display_name());
    assert_eq!(name("0x0027", "0x004e").as_deref(), Some("TPU v2"));
    assert_eq!(name("0x0027", "0x004f").as_deref(), Some("TPU v3"));
    assert_eq!(name("0x0063", "").as_deref(), Some("TPU v5e"));
    assert_eq!(name("0x0062", "").as_deref(), Some("TPU v5p"));
    assert_eq!(name("0x006f", "").as_deref(), Some("TPU v6e"));
    assert_eq!(name("0x0076", "").as_deref(), Some("TPU7x"));
    assert_eq!(name("0x0042", ""), None);
    // No sysfs at all: no chips, no error.
    let none = read(&Roots {
        sysfs: vm.join("no-such-dir"),
        procfs: vm.join("proc"),
        tpu_metrics: dead_addr(),
        ..Roots::default()
    });
    assert!(none.is_empty());
}

// ---- protobuf on hand-made bytes ---------------------------------------------------------

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_bytes(n: u64, b: &[u8], out: &mut Vec<u8>) {
    varint(n << 3 | 2, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// A Metric { attribute { key, value { int_attr } }, gauge { as_double | as_int } }.
fn metric(device: u64, double: Option<f64>, int: Option<u64>) -> Vec<u8> {
    let mut value = Vec::new();
    varint(3 << 3, &mut value); // int_attr, varint
    varint(device, &mut value);
    let mut attr = Vec::new();
    field_bytes(1, b"device-id", &mut attr);
    field_bytes(2, &value, &mut attr);
    let mut gauge = Vec::new();
    if let Some(d) = double {
        varint(1 << 3 | 1, &mut gauge);
        gauge.extend_from_slice(&d.to_le_bytes());
    }
    if let Some(i) = int {
        varint(2 << 3, &mut gauge);
        varint(i, &mut gauge);
    }
    let mut m = Vec::new();
    field_bytes(1, &attr, &mut m);
    // Unknown to the decoder: a timestamp (field 2), a fixed32 field 9 and a varint field 15.
    field_bytes(2, &[0x08, 0x96, 0x01], &mut m);
    varint(9 << 3 | 5, &mut m);
    m.extend_from_slice(&[1, 2, 3, 4]);
    varint(15 << 3, &mut m);
    varint(300, &mut m);
    field_bytes(3, &gauge, &mut m);
    m
}

fn response(metrics: &[Vec<u8>]) -> Vec<u8> {
    let mut tpu_metric = Vec::new();
    field_bytes(1, b"tpu.runtime.hbm.memory.usage.bytes", &mut tpu_metric);
    field_bytes(2, b"HBM", &mut tpu_metric);
    for m in metrics {
        field_bytes(3, m, &mut tpu_metric);
    }
    let mut r = Vec::new();
    field_bytes(1, &tpu_metric, &mut r);
    r
}

#[test]
fn protobuf_encoding_and_decoding_on_hand_made_bytes() {
    // MetricRequest { metric_name = "ab" }: tag 0x0a, length 2.
    assert_eq!(tpu::encode_metric_request("ab"), [0x0a, 2, b'a', b'b']);
    let bytes = response(&[
        metric(1, Some(12.5), None),
        metric(0, None, Some(34_359_738_368)),
    ]);
    let points = tpu::decode_metric_response(&bytes).expect("decodes");
    assert_eq!(
        points,
        vec![
            MetricPoint {
                key: Some("device-id".into()),
                device_id: Some(1),
                int_value: None,
                double_value: Some(12.5),
            },
            MetricPoint {
                key: Some("device-id".into()),
                device_id: Some(0),
                int_value: Some(34_359_738_368),
                double_value: None,
            },
        ]
    );
    assert_eq!(points[1].value(), Some(34_359_738_368.0));
    // Empty message: no points.
    assert_eq!(tpu::decode_metric_response(&[]), Ok(vec![]));
    // Malformed: truncated, a length past the end, a varint over 64 bits, a group.
    assert!(tpu::decode_metric_response(&bytes[..bytes.len() - 1]).is_err());
    assert!(tpu::decode_metric_response(&[0x0a, 0x05, 0x00]).is_err());
    assert!(tpu::decode_metric_response(&[0x08]).is_err());
    // Field 1 as a varint where a message is expected: skipped like an unknown field.
    assert_eq!(tpu::decode_metric_response(&[0x08; 12]), Ok(vec![]));
    assert!(tpu::decode_metric_response(&[
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
    ])
    .is_err());
    assert!(tpu::decode_metric_response(&[0x0b]).is_err());
    assert!(tpu::decode_metric_response(&[0x00, 0x00]).is_err());
    // Random bytes, and every prefix of a valid answer: errors or points, never a panic.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for n in 0..20_000usize {
        let mut buf = Vec::with_capacity(n % 64);
        for _ in 0..n % 64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf.push(s as u8);
        }
        let _ = tpu::decode_metric_response(&buf);
    }
    for k in 0..bytes.len() {
        let _ = tpu::decode_metric_response(&bytes[..k]);
    }
}

// ---- a real gRPC server ------------------------------------------------------------------

/// Python with grpcio and grpcio-tools, or why not.
fn grpc_python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("VIRTUAL_ENV") {
        Some(v) if Path::new(&v).join("bin/python").exists() => Path::new(&v).join("bin/python"),
        _ => PathBuf::from("python3"),
    };
    let out = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools.protoc"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import grpc and grpc_tools (pip install grpcio grpcio-tools): {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(python)
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Compiles the .proto into a fresh temporary folder and starts the fake service serving
/// `values`; returns it with its address.
fn start_fake_service(python: &Path, values: &str) -> (Server, String) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "accel-tpu-grpc-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let protos = fixtures().join("tpu-metrics");
    let out = Command::new(python)
        .arg("-m")
        .arg("grpc_tools.protoc")
        .arg(format!("-I{}", protos.display()))
        .arg(format!("--python_out={}", dir.display()))
        .arg(format!("--grpc_python_out={}", dir.display()))
        .arg("tpu_metric_service.proto")
        .output()
        .expect("run grpc_tools.protoc");
    assert!(
        out.status.success(),
        "protoc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = Command::new(python)
        .arg(protos.join("fake_tpu_metrics.py"))
        .arg(values)
        .env("PYTHONPATH", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the fake service");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the port");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the fake service printed {line:?}, not a port"));
    // The service has imported its modules by now.
    let _ = std::fs::remove_dir_all(&dir);
    (server, format!("127.0.0.1:{port}"))
}

const GIB: u64 = 1 << 30;

#[test]
fn numbers_come_from_a_real_grpc_metrics_service() {
    let python = match grpc_python() {
        Ok(p) => p,
        Err(reason) => {
            accelkit_testkit::skip("grpc", &reason.to_string(), "tpu");
            return;
        }
    };
    // Per device (one per v4 chip), listed out of order: the reader sorts by device id.
    let values = format!(
        r#"{{
        "{used}": [[2, {u2}, "int"], [0, {u0}, "int"], [3, 0, "int"], [1, {u1}, "int"]],
        "{total}": [[0, {t}, "int"], [1, {t}, "int"], [2, {t}, "int"], [3, {t}, "int"]],
        "{duty}": [[3, 0.0, "double"], [1, 50.0, "double"], [0, 12.5, "double"], [2, 99.25, "double"]]
        }}"#,
        used = tpu::METRIC_HBM_USED,
        total = tpu::METRIC_HBM_TOTAL,
        duty = tpu::METRIC_DUTY_CYCLE,
        u0 = GIB,
        u1 = 2 * GIB + 12_345,
        u2 = 31 * GIB,
        t = 32 * GIB,
    );
    let (server, addr) = start_fake_service(&python, &values);
    let chips = read(&vm_roots(&addr));
    assert_eq!(chips.len(), 4);
    let want_used = [GIB, 2 * GIB + 12_345, 31 * GIB, 0];
    let want_duty = [12.5, 50.0, 99.25, 0.0];
    for (i, c) in chips.iter().enumerate() {
        assert_eq!(c.status, None, "chip {i}: {:?}", c.status);
        assert_eq!(c.memory_used_bytes, Some(want_used[i]), "chip {i}");
        assert_eq!(c.memory_total_bytes, Some(32 * GIB), "chip {i}");
        assert_eq!(c.utilization_percent, Some(want_duty[i]), "chip {i}");
        assert_eq!(c.name, "TPU v4");
    }
    // Again on the same service: nothing is left over from the first call.
    assert_eq!(read(&vm_roots(&addr))[2].memory_used_bytes, Some(31 * GIB));
    // The job ends, the service goes: the chips stay, without numbers.
    drop(server);
    let chips = read(&vm_roots(&addr));
    assert_eq!(chips.len(), 4);
    for c in &chips {
        assert_eq!(
            c.status.as_deref(),
            Some(&*format!(
                "idle / not reporting (no TPU runtime metrics on {addr})"
            ))
        );
        assert_eq!(c.memory_used_bytes, None);
        assert_eq!(c.utilization_percent, None);
    }
}

#[test]
fn a_service_missing_a_metric_still_gives_the_others() {
    let python = match grpc_python() {
        Ok(p) => p,
        Err(reason) => {
            accelkit_testkit::skip("grpc", &reason.to_string(), "tpu");
            return;
        }
    };
    // Only the duty cycle, per core (8 values for 4 chips: two per chip, averaged).
    let values = format!(
        r#"{{"{duty}": [[0, 10, "double"], [1, 30, "double"], [2, 50, "double"], [3, 70, "double"],
                        [4, 0, "double"], [5, 100, "double"], [6, 1, "double"], [7, 2, "double"]]}}"#,
        duty = tpu::METRIC_DUTY_CYCLE
    );
    let (_server, addr) = start_fake_service(&python, &values);
    let chips = read(&vm_roots(&addr));
    let duty: Vec<Option<f64>> = chips.iter().map(|c| c.utilization_percent).collect();
    assert_eq!(duty, [Some(20.0), Some(60.0), Some(50.0), Some(1.5)]);
    for c in &chips {
        assert_eq!(c.memory_used_bytes, None);
        // NOT_FOUND for the memory metrics: trailers only, no message.
        let status = c.status.as_deref().unwrap_or("");
        assert!(status.contains(tpu::METRIC_HBM_USED), "{status}");
        assert!(status.contains("no message"), "{status}");
    }
}

// ---- garbage from the server -------------------------------------------------------------

/// A server on 127.0.0.1:0 that answers every connection with `answer`, then (if `hold`)
/// keeps the connection open without a word.
fn garbage_server(answer: Vec<u8>, hold: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                let _ = c.read(&mut buf);
                let _ = c.write_all(&answer);
                if hold {
                    std::thread::sleep(Duration::from_secs(5));
                }
            });
        }
    });
    addr
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn assert_unreadable(addr: &str, what: &str) {
    let chips = read(&vm_roots(addr));
    assert_eq!(chips.len(), 4, "{what}");
    for c in &chips {
        let status = c.status.as_deref().unwrap_or("");
        assert!(
            status.starts_with(&format!("TPU runtime metrics on {addr} unreadable")),
            "{what}: {status}"
        );
        assert_eq!(c.memory_used_bytes, None, "{what}");
        assert_eq!(c.utilization_percent, None, "{what}");
    }
}

#[test]
fn garbage_answers_are_errors_not_panics_or_hangs() {
    // An HTTP/1.1 server.
    let http1 = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec();
    assert_unreadable(&garbage_server(http1, false), "HTTP/1.1");
    // A frame announcing 16 MiB.
    assert_unreadable(
        &garbage_server(vec![0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0], true),
        "huge frame",
    );
    // A padded DATA frame whose padding is longer than the frame.
    let mut bad = frame(4, 0, 0, &[]);
    bad.extend(frame(0, 0x8, 1, &[200, 1, 2, 3]));
    assert_unreadable(&garbage_server(bad, true), "bad padding");
    // A gRPC message announcing 100 MiB (the other two calls reset).
    let mut big = frame(4, 0, 0, &[]);
    big.extend(frame(3, 0, 3, &[0, 0, 0, 8]));
    big.extend(frame(3, 0, 5, &[0, 0, 0, 8]));
    let mut first = vec![0u8];
    first.extend_from_slice(&(100u32 << 20).to_be_bytes());
    first.resize(16_384, 7);
    big.extend(frame(0, 0, 1, &first));
    assert_unreadable(&garbage_server(big, true), "oversized message");
    // A 10-byte message followed by 16 KiB more on a unary call.
    let mut long = frame(4, 0, 0, &[]);
    long.extend(frame(3, 0, 3, &[0, 0, 0, 8]));
    long.extend(frame(3, 0, 5, &[0, 0, 0, 8]));
    let mut first = vec![0u8, 0, 0, 0, 10];
    first.resize(16_384, 7);
    long.extend(frame(0, 0, 1, &first));
    long.extend(frame(0, 0, 1, &first));
    assert_unreadable(
        &garbage_server(long, true),
        "more than the announced message",
    );
    // Valid framing, but each stream ends with a message that is not a MetricResponse.
    let mut wrong = frame(4, 0, 0, &[]);
    for id in [1, 3, 5] {
        wrong.extend(frame(0, 1, id, &[0, 0, 0, 0, 2, 0xff, 0xff]));
    }
    assert_unreadable(&garbage_server(wrong, true), "not protobuf");
    // A server that accepts and says nothing: no answer within the deadline, not an error.
    let silent = garbage_server(Vec::new(), true);
    let chips = read(&vm_roots(&silent));
    assert!(chips[0]
        .status
        .as_deref()
        .unwrap_or("")
        .starts_with("idle / not reporting"));
}
