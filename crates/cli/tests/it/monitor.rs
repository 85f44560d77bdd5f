//! `accel monitor` for real: the full-screen view in a tmux terminal of a fixed size, with
//! keys sent to it; the JSON and plain-text streams through a pipe.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

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

use accelkit_testkit::is_required as required;

/// `accel monitor ARGS` in a detached tmux session of `width`x`height` on a tmux server of its
/// own (no user configuration, no other sessions); the server is killed on drop, whatever
/// happened. The shell prints `EXIT=<status>` after accel and lingers 5 s to be read.
struct Tmux {
    socket: std::path::PathBuf,
    session: String,
}

impl Tmux {
    /// None, with a skip line, where tmux is not installed.
    fn start(test: &str, width: u16, height: u16, args: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                !required("tmux"),
                "ACCEL_TEST_REQUIRE names tmux, but it is not installed"
            );
            println!("skipped: tmux: not installed ({test})");
            return None;
        }
        let t = Tmux {
            socket: std::env::temp_dir().join(format!("accel-tmux-{}-{test}", std::process::id())),
            session: test.to_string(),
        };
        // The terminal's mode (`stty -g`: raw or cooked, echo, ...) is saved before accel and
        // after it, to compare: the screen can look right while the mode stays raw.
        let command = format!(
            "stty -g > '{}'; '{}' monitor {args}; echo EXIT=$?; stty -g > '{}'; sleep 5",
            t.stty_file("before").display(),
            env!("CARGO_BIN_EXE_accel"),
            t.stty_file("after").display(),
        );
        let (w, h) = (width.to_string(), height.to_string());
        let o = t.tmux(&[
            "new-session",
            "-d",
            "-s",
            test,
            "-x",
            &w,
            "-y",
            &h,
            &command,
        ]);
        assert!(o.status.success(), "tmux new-session: {}", stderr(&o));
        Some(t)
    }

    fn stty_file(&self, when: &str) -> std::path::PathBuf {
        self.socket.with_extension(format!("stty-{when}"))
    }

    /// The terminal mode after accel is the mode before it (`stty -g`).
    fn assert_mode_restored(&self, how: &str) {
        let read = |w: &str| std::fs::read_to_string(self.stty_file(w)).unwrap_or_default();
        let t0 = std::time::Instant::now();
        while read("after").is_empty() && t0.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let (before, after) = (read("before"), read("after"));
        assert!(!before.trim().is_empty(), "{how}: no stty -g before");
        assert_eq!(
            before, after,
            "{how}: the terminal mode changed (stty -g before / after)"
        );
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The visible screen, as text.
    fn screen(&self) -> String {
        stdout(&self.tmux(&["capture-pane", "-p", "-t", &self.session]))
    }

    /// A tmux format (`#{alternate_on}`) for the pane.
    fn display(&self, format: &str) -> String {
        let o = self.tmux(&["display-message", "-p", "-t", &self.session, format]);
        stdout(&o).trim().to_string()
    }

    fn keys(&self, keys: &str) {
        let o = self.tmux(&["send-keys", "-t", &self.session, keys]);
        assert!(o.status.success(), "tmux send-keys: {}", stderr(&o));
    }

    /// Polls the screen until `done` holds for it; fails with the last screen after `secs`.
    fn wait_for(&self, what: &str, secs: u64, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if done(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on the screen after {secs} s:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends `key`, waits for `EXIT=0`, and checks the terminal is back as it was: the
    /// alternate screen left (the view gone), the cursor shown.
    fn quit_with(&self, key: &str) {
        self.keys(key);
        let s = self.wait_for("EXIT=", 10, |s| s.contains("EXIT="));
        assert!(s.contains("EXIT=0"), "{key} did not exit 0:\n{s}");
        assert!(
            !s.contains("accel monitor"),
            "the view is still shown:\n{s}"
        );
        assert!(!s.contains("terminal too small"), "{s}");
        assert_eq!(s.trim(), "EXIT=0", "only the shell's line is left");
        assert_eq!(
            self.display("#{alternate_on}"),
            "0",
            "alternate screen left"
        );
        assert_eq!(self.display("#{cursor_flag}"), "1", "cursor shown");
        self.assert_mode_restored(key);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        // tmux leaves its socket behind.
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(self.stty_file("before"));
        let _ = std::fs::remove_file(self.stty_file("after"));
    }
}

#[test]
fn monitor_in_tmux() {
    let Some(t) = Tmux::start("monitor_in_tmux", 100, 30, "--interval 0.2") else {
        return;
    };
    let s = t.wait_for("host CPU and RAM rows", 15, |s| {
        s.contains("accel monitor") && s.contains("RAM ") && s.contains("% of ")
    });
    assert!(s.contains("every 0.2 s"), "{s}");
    assert!(
        s.lines()
            .any(|l| l.starts_with("RAM ") && l.contains(" used / ")),
        "{s}"
    );
    // The monitor lists hardware its monitoring interfaces show: XLA's CPU plugin (the CPU
    // again) and lavapipe are not listed, even where the tests have them; this machine's
    // NVIDIA GPUs are, each in its panel.
    let gpus = accelkit_testkit::nvidia_gpus();
    let s = if gpus.is_empty() {
        t.wait_for("the no-accelerator line", 10, |s| {
            s.contains("no accelerator found by any monitoring interface")
        })
    } else {
        t.wait_for("a panel per NVIDIA GPU", 10, |s| {
            (0..gpus.len()).all(|i| s.contains(&format!(" nvidia:{i}  ")))
        })
    };
    assert!(!s.contains(" xla:") && !s.contains(" wgpu:"), "{s}");
    // A few samples later the history has grown: the view is live.
    t.wait_for("a history of 5 samples", 10, |s| {
        s.contains("last  5") || s.contains("sample 5")
    });
    t.quit_with("q");
}

#[test]
fn monitor_in_a_tiny_terminal_says_so_and_still_quits() {
    let Some(t) = Tmux::start("monitor_tiny", 40, 8, "--interval 0.2") else {
        return;
    };
    let s = t.wait_for("the too-small message", 15, |s| {
        s.contains("terminal too small")
    });
    // Wrapped to the 40 columns.
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("terminal too small: need at least 60x12, have 40x8"),
        "{s}"
    );
    assert!(!s.contains("accel monitor"), "{s}");
    t.quit_with("q");
}

#[test]
fn monitor_quits_on_esc_and_ctrl_c_at_the_smallest_size() {
    for key in ["Escape", "C-c"] {
        let name = if key == "C-c" {
            "monitor_ctrl_c"
        } else {
            "monitor_esc"
        };
        let Some(t) = Tmux::start(name, 60, 12, "--interval 0.2") else {
            return;
        };
        // 60x12 is enough: the view, not the message.
        t.wait_for("the view at 60x12", 15, |s| {
            s.contains("accel monitor") && s.contains("RAM ")
        });
        t.quit_with(key);
    }
}

#[test]
fn monitor_restores_the_terminal_when_killed_by_a_signal() {
    // SIGINT and SIGQUIT sent with `kill` (not typed: raw mode turns Ctrl-C into a key) as
    // well as SIGTERM and SIGHUP.
    for sig in ["TERM", "HUP", "INT", "QUIT"] {
        let name = format!("monitor_sig{}", sig.to_lowercase());
        let Some(t) = Tmux::start(&name, 100, 30, "--interval 0.2") else {
            return;
        };
        t.wait_for("the view", 15, |s| s.contains("accel monitor"));
        // The shell in the pane runs accel as its child.
        let shell = t.display("#{pane_pid}");
        let o = Command::new("pkill")
            .args([&format!("-{sig}"), "-P", &shell, "-x", "accel"])
            .output()
            .expect("pkill runs");
        assert!(o.status.success(), "pkill -{sig}: {}", stderr(&o));
        let s = t.wait_for("EXIT=", 10, |s| s.contains("EXIT="));
        assert_eq!(
            s.trim(),
            "EXIT=0",
            "SIG{sig}: only the shell's line is left:\n{s}"
        );
        assert_eq!(
            t.display("#{alternate_on}"),
            "0",
            "SIG{sig}: alternate screen left"
        );
        assert_eq!(t.display("#{cursor_flag}"), "1", "SIG{sig}: cursor shown");
        t.assert_mode_restored(&format!("SIG{sig}"));
    }
}

#[test]
fn monitor_json_streams_one_document_per_sample() {
    let o = accel(&["monitor", "--json", "--count", "2", "--interval", "0.2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!o.stdout.contains(&0x1b), "escape codes in JSON");
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let gpus = accelkit_testkit::nvidia_gpus();
    let mut times = Vec::new();
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert_eq!(v["schema_version"], 3);
        assert_eq!(v["kind"], "monitor");
        assert!(v["host"]["memory"]["total_bytes"].as_u64().unwrap() > 0);
        assert!(!v["host"]["cpu_per_core_percent"]
            .as_array()
            .unwrap()
            .is_empty());
        // The hardware here: a row per NVIDIA GPU its driver lists (none on a machine without
        // one), nothing else, and each vendor's reader answered.
        let rows: Vec<String> = v["devices"]
            .as_array()
            .expect("a devices array")
            .iter()
            .map(|d| format!("{} {}", d["vendor"], d["pci_bus_id"]))
            .collect();
        let want: Vec<String> = gpus.iter().map(|g| format!("\"nvidia\" \"{g}\"")).collect();
        assert_eq!(rows, want, "{l}");
        let collectors = v["collectors"].as_array().expect("collectors");
        for c in ["nvidia", "amd", "intel", "tpu"] {
            assert!(
                collectors
                    .iter()
                    .any(|x| x["collector"] == c && x["success"] == true),
                "{c}: {l}"
            );
        }
        times.push(v["time_unix_s"].as_f64().unwrap());
    }
    assert!(times[1] > times[0], "{times:?}");
}

#[test]
fn monitor_usage_errors_exit_2() {
    for args in [
        &["monitor", "--count", "0"][..],
        &["monitor", "--interval", "0"],
        &["monitor", "--interval", "nan"],
        &["monitor", "--interval", "inf"],
        &["monitor", "--interval", "-1"],
        &["monitor", "--interval", "1e20"],
        &["monitor", "--json", "--count", "0"],
    ] {
        let o = accel(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("error: "), "{args:?}: {e}");
        assert!(
            !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
            "{e}"
        );
        assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
    }
}

#[test]
fn monitor_through_a_pipe_prints_plain_lines() {
    let o = accel(&["monitor", "--count", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !o.stdout.contains(&0x1b),
        "escape codes in {:?}",
        stdout(&o)
    );
    assert!(
        !o.stderr.contains(&0x1b),
        "escape codes in {:?}",
        stderr(&o)
    );
    let s = stdout(&o);
    assert!(s.starts_with("--- t = 0.0 s, "), "{s}");
    assert!(s.contains("\nhost CPU:  "), "{s}");
    assert!(s.contains("\nhost RAM:  "), "{s}");
    // Hardware only, from monitoring interfaces: XLA's CPU plugin (the CPU again) is not a
    // row; without an NVIDIA GPU here the line says what each vendor's reader found instead.
    assert!(!s.contains("xla:"), "{s}");
    let gpus = accelkit_testkit::nvidia_gpus();
    if gpus.is_empty() {
        assert!(s.contains("\naccelerators: none found (nvidia: "), "{s}");
    } else {
        for i in 0..gpus.len() {
            assert!(s.contains(&format!("\nnvidia:{i} (")), "{s}");
        }
        assert!(!s.contains("accelerators: none found"), "{s}");
    }
    let o = accel(&["monitor", "--count", "2", "--interval", "0.2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).matches("--- t = ").count(), 2, "{}", stdout(&o));
}

/// The pids of running `accel monitor` processes whose command line holds `marker`.
fn monitors_with(marker: &str) -> Vec<u32> {
    let found: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // The accel binary itself, not the shell or tmux that carry the same words.
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|e| e == std::path::Path::new(env!("CARGO_BIN_EXE_accel")))
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                c.contains(" monitor ") && c.contains(marker)
            })
        })
        .collect::<Vec<u32>>();
    // A child the monitor is starting (its probe helper, between fork and exec) still looks
    // like the monitor: leave out every process whose parent is in the list.
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    found
        .iter()
        .copied()
        .filter(|&p| parent(p).is_none_or(|pp| !found.contains(&pp)))
        .collect()
}

#[test]
fn monitor_exits_when_its_terminal_goes_away() {
    // A closed tmux pane (or a dropped ssh session): the terminal hangs up. crossterm's event
    // reader used to spin on read() == 0 at 100 % of a core for good, deaf to SIGTERM.
    for (name, args) in [
        ("gone_single", "--interval 0.3 --count 1000000"),
        (
            "gone_fleet",
            "--hosts 127.0.0.1:1 --interval 0.3 --timeout 0.2",
        ),
    ] {
        let Some(t) = Tmux::start(name, 100, 24, args) else {
            return;
        };
        let marker = args.to_string();
        let start = Instant::now();
        while monitors_with(&marker).is_empty() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let pids = monitors_with(&marker);
        assert_eq!(pids.len(), 1, "{name}: {pids:?}");
        std::thread::sleep(Duration::from_millis(500));
        let _ = t.tmux(&["kill-server"]);
        let t0 = Instant::now();
        while std::path::Path::new(&format!("/proc/{}", pids[0])).exists()
            && t0.elapsed() < Duration::from_secs(5)
        {
            // A zombie (exited, not yet reaped by tmux) counts as gone.
            let state =
                std::fs::read_to_string(format!("/proc/{}/stat", pids[0])).unwrap_or_default();
            if state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let alive = std::fs::read_to_string(format!("/proc/{}/stat", pids[0]))
            .is_ok_and(|s| !s.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')));
        if alive {
            // SAFETY: kill on a pid we found; the test is failing anyway.
            unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
        }
        assert!(
            !alive,
            "{name}: accel monitor still running 5 s after its terminal closed"
        );
        println!(
            "{name}: accel monitor exited {:.2} s after its terminal closed",
            t0.elapsed().as_secs_f64()
        );
    }
}
