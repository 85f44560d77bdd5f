//! `--compare torch`, `--compare numpy` (or `--compare` alone: every one installed): each run's
//! work timed again in PyTorch and numpy, in a fresh Python process right after accel's run,
//! with the same warm-ups and iterations, each iteration synchronised (`peer.py`). The Python
//! is `ACCEL_PYTHON`, else `python3` on PATH: the one the user's own scripts run in.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use accelkit::bench::{self, Comparison, Iterations};
use serde::Deserialize;

use super::output::BenchRow;
use crate::out;

/// The script that times one job in a peer library.
const SCRIPT: &str = include_str!("peer.py");

/// How long the Python may take to say which libraries it has (importing PyTorch with its CUDA
/// libraries from a cold disk takes seconds).
const DESCRIBE_LIMIT: Duration = Duration::from_secs(60);

/// The most a peer's answer (one line of JSON) and its error output may hold.
const ANSWER_LIMIT: u64 = 64 << 10;

/// A library accel is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Torch,
    Numpy,
}

impl Peer {
    const ALL: [Peer; 2] = [Peer::Torch, Peer::Numpy];

    fn name(self) -> &'static str {
        match self {
            Peer::Torch => "torch",
            Peer::Numpy => "numpy",
        }
    }
}

/// What `--compare` compares with: an earlier `--json` report, or peer libraries (none named:
/// every one the Python has).
#[derive(Clone, Debug, PartialEq)]
pub enum Against {
    Earlier(PathBuf),
    Peers(Vec<Peer>),
}

/// `--compare`'s value: `torch`, `numpy`, both comma-separated, `peers` (what `--compare`
/// alone means), or a file.
pub fn parse_against(s: &str) -> Result<Against, String> {
    if s == "peers" {
        return Ok(Against::Peers(Vec::new()));
    }
    let names: Vec<&str> = s.split(',').map(str::trim).collect();
    let peers: Vec<Peer> = names
        .iter()
        .filter_map(|n| Peer::ALL.into_iter().find(|p| p.name() == *n))
        .collect();
    match peers.len() {
        0 if s.is_empty() => Err("--compare takes FILE.json, torch or numpy".to_string()),
        0 => Ok(Against::Earlier(PathBuf::from(s))),
        k if k == names.len() => Ok(Against::Peers(peers)),
        _ => Err(format!(
            "'{s}' mixes library names with others; --compare takes FILE.json, or torch and numpy (comma-separated)"
        )),
    }
}

/// The Python and the peers it has, each with its version and what computes in it.
pub struct Peers {
    python: PathBuf,
    found: Vec<(Peer, Library)>,
}

/// A peer library as the Python describes it.
#[derive(Deserialize)]
struct Library {
    version: String,
    #[serde(default)]
    detail: String,
}

/// The Python's answer to "describe": for each library, itself or why it did not import.
#[derive(Deserialize)]
#[serde(untagged)]
enum Described {
    Found(Library),
    Missing { error: String },
}

/// A peer's answer to a timing job (it also says how many iterations it timed).
#[derive(Deserialize)]
#[serde(untagged)]
enum Timed {
    Done { median_s: f64 },
    Failed { error: String },
}

/// One peer's time for one run, or why it has none.
pub struct PeerTime {
    peer: Peer,
    median_s: Result<f64, String>,
}

impl Peers {
    /// The Python and, of `asked` (none: every peer), the libraries it has. A library asked
    /// for by name that does not import, or none at all, is an error before anything runs.
    pub fn find(asked: &[Peer]) -> anyhow::Result<Peers> {
        let python = python()?;
        let answer = ask(
            &python,
            &serde_json::json!({"kind": "describe"}),
            DESCRIBE_LIMIT,
        )
        .map_err(|e| anyhow::anyhow!("--compare: {} {e}", named(&python)))?;
        let mut described: std::collections::BTreeMap<String, Described> =
            serde_json::from_value(answer).map_err(|e| {
                anyhow::anyhow!("--compare: {} answered oddly: {e}", named(&python))
            })?;
        let wanted = if asked.is_empty() {
            &Peer::ALL[..]
        } else {
            asked
        };
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for &p in wanted {
            match described.remove(p.name()) {
                Some(Described::Found(lib)) => found.push((p, lib)),
                Some(Described::Missing { error }) => {
                    missing.push(format!("{}: {}", p.name(), shown(&error, 300)))
                }
                None => missing.push(format!("{}: not described", p.name())),
            }
        }
        if found.is_empty() || (!asked.is_empty() && !missing.is_empty()) {
            anyhow::bail!(
                "--compare: {} cannot import {} ({}); install it there (pip install {}) or name another Python with ACCEL_PYTHON",
                named(&python),
                wanted.iter().map(|p| p.name()).collect::<Vec<_>>().join(" or "),
                missing.join("; "),
                wanted.iter().map(|p| p.name()).collect::<Vec<_>>().join(" ")
            );
        }
        Ok(Peers { python, found })
    }

    /// `run`'s work timed in each peer, with the plan's warm-ups and iterations.
    pub fn time<R: BenchRow>(&self, run: &R, warmup: usize, iters: Iterations) -> Vec<PeerTime> {
        // The peer gets ten times accel's own time for the run, and a minute to start.
        let s = run.stats();
        let own = s.mean_s * (s.samples + warmup) as f64;
        let limit = Duration::from_secs_f64(60.0 + 10.0 * own.min(3600.0));
        let (fixed, min_time_s) = match iters {
            Iterations::Fixed(n) => (Some(n), 0.0),
            Iterations::Adaptive { min_time_s } => (None, min_time_s),
        };
        self.found
            .iter()
            .map(|&(peer, _)| {
                let mut job = run.peer_job();
                let extra = serde_json::json!({
                    "lib": peer.name(),
                    "warmup": warmup,
                    "iters": fixed,
                    "min_time_s": min_time_s,
                    "min_samples": bench::ADAPTIVE_MIN_SAMPLES,
                    "max_samples": bench::ADAPTIVE_MAX_SAMPLES,
                });
                if let (Some(j), Some(e)) = (job.as_object_mut(), extra.as_object()) {
                    j.extend(e.clone());
                }
                let median_s = ask(&self.python, &job, limit).and_then(|v| {
                    match serde_json::from_value::<Timed>(v) {
                        Ok(Timed::Done { median_s, .. }) if median_s > 0.0 => Ok(median_s),
                        Ok(Timed::Done { .. }) => Err("timed no time".to_string()),
                        Ok(Timed::Failed { error }) => Err(error),
                        Err(e) => Err(format!("answered oddly: {e}")),
                    }
                });
                PeerTime { peer, median_s }
            })
            .collect()
    }

    /// The library and its version, as the JSON report's `against` names it.
    fn label(&self, peer: Peer) -> String {
        match self.found.iter().find(|(p, _)| *p == peer) {
            Some((_, lib)) => format!("{} {}", peer.name(), shown(&lib.version, 100)),
            None => peer.name().to_string(),
        }
    }

    /// Each run against each peer that timed it, for the JSON report.
    pub fn comparisons<R: BenchRow>(&self, runs: &[R], times: &[Vec<PeerTime>]) -> Vec<Comparison> {
        let mut out = Vec::new();
        for (r, ts) in runs.iter().zip(times) {
            let median_s = r.stats().median_s;
            for t in ts {
                if let Ok(theirs) = t.median_s {
                    out.push(Comparison {
                        run: r.work(),
                        median_s,
                        baseline_median_s: Some(theirs),
                        speedup: Some(theirs / median_s),
                        against: Some(self.label(t.peer)),
                    });
                }
            }
        }
        out
    }

    /// The comparison as text: which libraries, then one line per run.
    pub fn print<R: BenchRow>(&self, runs: &[R], times: &[Vec<PeerTime>]) -> anyhow::Result<()> {
        let libs: Vec<String> = self
            .found
            .iter()
            .map(|(p, lib)| match lib.detail.as_str() {
                "" => self.label(*p),
                d => format!("{} ({})", self.label(*p), shown(d, 200)),
            })
            .collect();
        out::line(format!(
            "compared with {} in {}, each timed in a fresh process right after accel's run, with the same warm-ups and iterations (speed-up = its median / accel's; above 1: accel is faster):",
            libs.join(" and "),
            named(&self.python)
        ))?;
        for (r, ts) in runs.iter().zip(times) {
            let median_s = r.stats().median_s;
            let each: Vec<String> = ts
                .iter()
                .map(|t| match &t.median_s {
                    Ok(theirs) => format!(
                        "{:.2}x {} ({})",
                        theirs / median_s,
                        t.peer.name(),
                        out::secs(*theirs)
                    ),
                    Err(why) => format!("{}: not timed ({})", t.peer.name(), shown(why, 300)),
                })
                .collect();
            out::line(format!(
                "  {} ({} in accel): {}",
                r.work(),
                out::secs(median_s),
                each.join(", ")
            ))?;
        }
        Ok(())
    }
}

/// `ACCEL_PYTHON`, else `python3` on PATH: the Python the user asked to run (no ownership check,
/// unlike the one the probes ask for site-packages: `--compare` runs what the shell would).
fn python() -> anyhow::Result<PathBuf> {
    accelkit_core::env::path("ACCEL_PYTHON")
        .or_else(|| accelkit_core::env::on_path("python3"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--compare torch|numpy runs them in Python: no python3 on PATH; name one with ACCEL_PYTHON"
            )
        })
}

/// Runs `peer.py` with `job` in `python`, killed after `limit`; its answer (the last line it
/// prints, as JSON), or why there is none.
fn ask(
    python: &Path,
    job: &serde_json::Value,
    limit: Duration,
) -> Result<serde_json::Value, String> {
    let mut child = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(job.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not be started: {e}"))?;
    // Each stream read on its own thread, up to the limit, the rest drained, so that a chatty
    // child never blocks on a full pipe. What they read comes back by channel, waited for
    // with the deadline: a grandchild that keeps the pipe open must not hold this up.
    let reader = |s: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            if let Some(mut s) = s {
                let _ = s.by_ref().take(ANSWER_LIMIT).read_to_end(&mut kept);
                let _ = tx.send(kept);
                let _ = std::io::copy(&mut s, &mut std::io::sink());
            }
        });
        rx
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t0.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not answer within {:.0} s (killed)",
                    limit.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("could not be waited for: {e}")),
        }
    };
    let left = || {
        limit
            .saturating_sub(t0.elapsed())
            .max(Duration::from_secs(1))
    };
    let out = stdout.recv_timeout(left()).unwrap_or_default();
    let err = stderr.recv_timeout(left()).unwrap_or_default();
    let last = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string()
    };
    if !status.success() {
        return Err(format!("failed ({status}): {}", shown(&last(&err), 300)));
    }
    let line = last(&out);
    serde_json::from_str(&line).map_err(|_| {
        format!(
            "answered with something other than JSON: '{}'",
            shown(&line, 200)
        )
    })
}

/// The Python's path as printed (`ACCEL_PYTHON` may hold anything).
fn named(p: &Path) -> String {
    out::printable(&p.display().to_string()).into_owned()
}

/// At most `max` characters of a child's text, control characters escaped (`out::printable`):
/// what a Python prints must not move the terminal's cursor.
fn shown(s: &str, max: usize) -> String {
    let cut: String = s.chars().take(max).collect();
    out::printable(&cut).into_owned()
}
