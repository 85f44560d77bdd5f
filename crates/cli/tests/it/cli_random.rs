//! The real `accel` binary under random argument vectors: whatever a user types, accel exits
//! 0 (done), 1 (a runtime error, one line) or 2 (a usage error), and never shows a panic, an
//! "internal error" or a backtrace.
//!
//! The vectors are drawn from a seeded generator (`ACCEL_CLI_RANDOM_SEED`, default 1), so a
//! failure names the seed and the vector and reruns exactly; `ACCEL_CLI_RANDOM_CASES` sets
//! how many (default 500 in the test command: 113 s of CPU for 1,500 was the largest test
//! there; `ACCEL_CLI_RANDOM_CASES=5000` with other seeds for a longer run). Each starts from a valid, cheap command and then gets random
//! options, values (valid, out of range, malformed) and stray tokens.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Commands that succeed quickly as they are.
const BASES: &[&[&str]] = &[
    &["devices"],
    &["devices", "--json"],
    &["mem"],
    &["mem", "--json"],
    &["mem", "--watch", "0.2", "--count", "2"],
    &["mem", "--count", "3"],
    &[
        "bench",
        "matmul",
        "--size",
        "7",
        "--min-time",
        "0",
        "--device",
        "cpu",
    ],
    &[
        "bench",
        "copy",
        "--size",
        "4KiB",
        "--min-time",
        "0",
        "--device",
        "cpu",
    ],
    &[
        "bench",
        "elementwise",
        "--size",
        "100",
        "--min-time",
        "0",
        "--device",
        "cpu",
    ],
    &[
        "bench", "matmul", "--size", "3", "--iters", "2", "--dtype", "i64",
    ],
    &["bench"],
    &["doctor"],
    &["doctor", "--json"],
    &["monitor", "--json", "--interval", "0.2", "--count", "2"],
    &["monitor", "--count", "1"],
    &["pick"],
    &["pick", "--index"],
    &["pick", "--json", "--count", "2"],
    &["mem", "--path.sysfs", "/nonexistent"],
    &["completions", "bash"],
    &["man"],
    &["help"],
    &["--version"],
    &[],
];

/// Every option, each with values that are valid and cheap, or invalid.
const OPTIONS: &[(&str, &[&str])] = &[
    (
        "--size",
        &[
            "1",
            "2",
            "7",
            "0",
            "-3",
            "1048576",
            "1048577",
            "10000000000000",
            "18446744073709551616",
            "1KiB",
            "4",
            "3B",
            "2TiB",
            "1GiB",
            "0x10",
            "7.5",
            "",
            "3x5x2",
            "2x3",
            "1x2x0",
            "4X4X4",
            "1048576x1048576x1",
            "x",
        ],
    ),
    (
        "--dtype",
        &[
            "f32", "f64", "f16", "bf16", "i32", "i64", "q8", "F32", "float", "",
        ],
    ),
    (
        "--device",
        &[
            "cpu",
            "cuda",
            "cuda:0",
            "cuda:7",
            "cuda:-1",
            "cuda:99999999999999999999",
            "xla",
            "xla:0",
            "xla:1",
            "xla:cpu:0",
            "xla:tpu:3",
            "wgpu:0",
            "wgpu:9",
            "mps",
            "mps:0",
            "tpu",
            "gpu",
            "cpu:1",
            "",
            ":",
            "cuda:",
            "💥",
        ],
    ),
    (
        "--warmup",
        &[
            "0",
            "1",
            "100001",
            "-1",
            "1e3",
            "nan",
            "18446744073709551616",
        ],
    ),
    (
        "--iters",
        &[
            "1",
            "2",
            "0",
            "-5",
            "10000001",
            "18446744073709551615",
            "1.5",
        ],
    ),
    (
        "--min-time",
        &[
            "0", "0.001", "-0.5", "3601", "1e308", "inf", "nan", "NaN", "-inf", "0x1", "",
        ],
    ),
    (
        "--watch",
        &[
            "0.01", "0.3", "0", "-1", "1e20", "86401", "nan", "inf", "0.0", "abc", "",
        ],
    ),
    (
        "--count",
        &["1", "2", "0", "-1", "18446744073709551616", "x"],
    ),
    ("--direction", &["h2d", "d2h", "d2d", "h2h", ""]),
    ("--host-memory", &["pageable", "pinned", "both", "none"]),
    ("--op", &["add", "scale", "exp", "sum", "mul", ""]),
    ("--compare", &["/nonexistent/accel.json", "/dev/null", "/"]),
    ("--plot", &["/nonexistent/dir/p.svg", "/tmp/x.txt", "/"]),
    (
        "--min-free",
        &["8GiB", "500MB", "1e9", "0", "-1", "1e30", "8XB", "nan", ""],
    ),
    (
        "--max-util",
        &["50", "0", "100", "101", "-1", "50%", "nan", "x"],
    ),
    (
        "--path.sysfs",
        &["/sys", "/nonexistent", "/dev/null", "/proc", ""],
    ),
    ("--path.procfs", &["/proc", "/nonexistent", "/sys", ""]),
    (
        "--tpu.metrics-address",
        &[
            "localhost:8431",
            "127.0.0.1:1",
            "nohost",
            ":",
            "[::1]:99999",
            "",
        ],
    ),
    ("--interval", &["0.2", "0", "-1", "nan", "1e20", ""]),
    (
        "--hosts",
        &[
            "127.0.0.1:1",
            "",
            ":",
            "x:99999",
            "https://127.0.0.1:1",
            ",,,",
        ],
    ),
    (
        "--prometheus",
        &["http://127.0.0.1:1", "", "ftp://x", "[::1"],
    ),
    ("--hostfile", &["/nonexistent", "/dev/null", "/"]),
    (
        "--http-config",
        &["/nonexistent", "/dev/null", "/etc/passwd"],
    ),
    ("--timeout", &["0.2", "0", "nan", "-1"]),
];

/// Flags without a value, and stray tokens.
const TOKENS: &[&str] = &[
    "--json",
    "--csv",
    "--explain",
    "--tf32",
    "--linear",
    "--help",
    "-h",
    "--version",
    "-V",
    "--bogus",
    "--",
    "-",
    "devices",
    "bench",
    "matmul",
    "mem",
    "doctor",
    "monitor",
    "pick",
    "--index",
    "completions",
    "man",
    "x",
    "--size=7",
    "--min-time=",
    "--device=cpu",
    "--dtype=f16",
    "-1",
    "über",
    "\u{200b}",
];

/// xorshift64*: a generator that does not depend on anything under test.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn vector(rng: &mut Rng) -> Vec<String> {
    let mut v: Vec<String> = rng.pick(BASES).iter().map(|s| s.to_string()).collect();
    for _ in 0..rng.below(4) {
        match rng.below(10) {
            0..=6 => {
                let (flag, values) = rng.pick(OPTIONS);
                v.push(flag.to_string());
                v.push(rng.pick(values).to_string());
            }
            7 | 8 => v.push(rng.pick(TOKENS).to_string()),
            _ if !v.is_empty() => {
                // Drop a token: a flag loses its value, or a command its name.
                let i = rng.below(v.len());
                v.remove(i);
            }
            _ => {}
        }
    }
    v
}

/// Whether the vector asks for an endless report (`mem --watch` or `monitor` without
/// `--count`), which the test stops itself.
fn endless(v: &[String]) -> bool {
    v.iter().any(|a| a.starts_with("--watch") || a == "monitor")
        && !v.iter().any(|a| a.starts_with("--count"))
}

struct Outcome {
    code: Option<i32>,
    stderr: String,
    stdout: String,
    timed_out: bool,
}

/// One environment variable set for a run.
type Env = Option<(&'static str, std::ffi::OsString)>;

/// `ACCEL_*` variables drawn beside the arguments: valid, out of range, empty, not UTF-8, and
/// a name accel does not know.
fn env_draw(rng: &mut Rng) -> Env {
    use std::os::unix::ffi::OsStringExt;
    const VARS: &[(&str, &[&str])] = &[
        (
            "ACCEL_PJRT_TIMEOUT",
            &["inf", "1e20", "-1", "", "5", "nan", "0.05", "\u{ff}"],
        ),
        (
            "ACCEL_PROBE_TIMEOUT",
            &["inf", "0", "-3", "", "30", "\u{ff}"],
        ),
        ("ACCEL_WGPU_MATMUL", &["bogus", "simple", "", "\u{ff}"]),
        (
            "ACCEL_CACHE_DIR",
            &["/nonexistent/x", "/dev/null", "\u{ff}"],
        ),
        ("ACCEL_CUDA_LIB_DIR", &["/nonexistent", ":::", "\u{ff}"]),
        (
            "ACCEL_PJRT_PLUGIN",
            &["/nonexistent.so", "/dev/null", "/etc/passwd", "\u{ff}"],
        ),
        ("ACCEL_PJRT_TIMOUT", &["5"]),
    ];
    if rng.below(4) != 0 {
        return None;
    }
    let (k, values) = rng.pick(VARS);
    let v = *rng.pick(values);
    // "\u{ff}" stands for bytes that are not UTF-8.
    let v = if v == "\u{ff}" {
        std::ffi::OsString::from_vec(vec![0xff, 0xfe, b'/', b'x'])
    } else {
        v.into()
    };
    Some((k, v))
}

fn run(args: &[String], env: &Env, limit: Duration) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel"));
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the accel binary starts");
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for accel") {
            break s;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait for accel");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        timed_out,
    }
}

#[test]
fn random_argument_vectors_exit_0_1_or_2_without_a_panic() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let seed = env("ACCEL_CLI_RANDOM_SEED", 1);
    let cases = env("ACCEL_CLI_RANDOM_CASES", 500) as usize;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let vectors: Vec<(Vec<String>, Env)> = (0..cases)
        .map(|_| (vector(&mut rng), env_draw(&mut rng)))
        .collect();
    let start = Instant::now();
    // Four workers on two cores: a child spends much of its life waiting (`mem` samples the
    // CPU over half a second, `devices` waits for its probe helpers), so two more keep the
    // cores busy.
    let chunks: Vec<&[(Vec<String>, Env)]> = vectors.chunks(cases.div_ceil(4).max(1)).collect();
    let results: Vec<Vec<(Vec<String>, Outcome)>> = std::thread::scope(|s| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|c| {
                s.spawn(move || {
                    c.iter()
                        .map(|(v, env)| {
                            let limit = if endless(v) { 8 } else { 60 };
                            let mut shown = v.clone();
                            if let Some((k, val)) = env {
                                shown.insert(0, format!("{k}={}", val.to_string_lossy()));
                            }
                            (shown, run(v, env, Duration::from_secs(limit)))
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut counts = [0usize; 3];
    let mut stopped = 0;
    for (v, o) in results.iter().flatten() {
        let what = format!(
            "seed {seed}: accel {v:?}\nstdout: {}\nstderr: {}",
            o.stdout, o.stderr
        );
        for bad in [
            "internal error",
            "panicked",
            "RUST_BACKTRACE",
            "stack backtrace",
        ] {
            assert!(
                !o.stderr.contains(bad) && !o.stdout.contains(bad),
                "{bad}: {what}"
            );
        }
        if o.timed_out {
            assert!(endless(v), "did not finish within 60 s: {what}");
            // Stopped by the test: it must have been a valid watch, reporting already.
            assert!(
                o.stdout.contains("host RAM") || o.stdout.contains("\"kind\""),
                "stopped before its first report: {what}"
            );
            stopped += 1;
            continue;
        }
        match o.code {
            Some(c @ 0..=2) => counts[c as usize] += 1,
            other => panic!("exit code {other:?}: {what}"),
        }
        if o.code == Some(2) {
            // A usage error says what is wrong (or shows the usage, for a bare `accel bench`).
            assert!(
                o.stderr.starts_with("error: ") || o.stderr.contains("Usage: "),
                "usage errors say so: {what}"
            );
        }
        if o.code == Some(1) {
            // A runtime error is one line, starting with "error: ".
            assert!(o.stderr.starts_with("error: "), "{what}");
            assert_eq!(o.stderr.trim_end().lines().count(), 1, "{what}");
        }
    }
    println!(
        "{cases} random argument vectors (seed {seed}) in {:.1} s: {} exit 0, {} exit 1, {} exit 2, {stopped} endless watches stopped",
        start.elapsed().as_secs_f64(),
        counts[0],
        counts[1],
        counts[2]
    );
    // The generator reaches every outcome, or the test proves less than it claims.
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
}
