//! The probe helper: work that cannot be cancelled inside this process — a driver's
//! initialisation (`cuInit`, `nvmlInit`), a PJRT plugin's constructor and client start, Vulkan
//! adapter enumeration — is first tried in a child process (the `accel` program re-executed
//! with `__probe-helper <task>`) that is killed at a deadline, with its whole process group.
//! Only when the child finished does this process run the same step itself, so a hung or
//! crashing driver costs one killed child and a reason, never a hung or crashed command and
//! never a thread left running behind the answer.
//!
//! Off by default: a program that embeds the library has no helper to re-execute. The `accel`
//! command turns it on ([`enable`]) with its own path. In the child, [`step`] names each step
//! on stderr, so a timeout says where it stopped.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The tasks a helper can run.
pub const TASKS: &[&str] = &["cuda", "xla", "wgpu", "nvml"];

/// The argument that turns the `accel` program into a probe helper.
pub const ARG: &str = "__probe-helper";

/// The prefix of a step line on the child's stderr.
const STEP: &str = "accel-step: ";

/// The prefix of the answer line on the child's stdout (a library may print lines of its
/// own there: they are not the answer).
const ANSWER: &str = "accel-answer: ";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
/// Facts this process already found, passed to every helper as environment variables so the
/// helper does not ask again (the `python3` on PATH, which may take seconds).
static CHILD_ENV: OnceLock<ChildEnv> = OnceLock::new();

/// Names the environment variables (and values) every helper gets.
pub type ChildEnv = fn() -> Vec<(&'static str, std::ffi::OsString)>;
static IN_HELPER: AtomicBool = AtomicBool::new(false);

/// Runs the risky steps of every later probe in a child process started from `program` (a
/// build of the `accel` command). Call once, early; later calls are ignored.
pub fn enable(program: PathBuf, child_env: ChildEnv) {
    let _ = CHILD_ENV.set(child_env);
    let _ = PROGRAM.set(program);
}

/// Where a helper's answer may be kept between runs, so that a command started again with
/// nothing changed does not start the helper again.
#[derive(Clone, Copy)]
pub struct Keeper {
    /// Everything `task`'s answer depends on, one line each (`None`: never kept).
    pub key: fn(&str) -> Option<Vec<String>>,
    /// The answer kept for `task` under this key, if any may be trusted.
    pub read: fn(&str, &[String]) -> Option<Answer>,
    /// Keeps a finished helper's answer (or decides not to).
    pub write: fn(&str, &[String], &Answer),
}

static KEEPER: OnceLock<Keeper> = OnceLock::new();
static FRESH: AtomicBool = AtomicBool::new(false);

/// Lets [`canary`] take kept answers from `keeper` and give it new ones. Call once, early.
pub fn keep_answers(keeper: Keeper) {
    let _ = KEEPER.set(keeper);
}

/// From now on no kept answer is taken: every helper this process starts runs again, and its
/// answer is kept anew. `accel doctor` calls it first, so that it looks at the machine as it
/// is (a process that already probed keeps what it found).
pub fn fresh_answers() {
    FRESH.store(true, Ordering::SeqCst);
}

/// The program helpers are started from, once enabled.
pub fn program() -> Option<&'static std::path::Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

/// Marks this process as a helper: [`step`] reports, and nothing here starts another helper.
pub fn mark_helper() {
    IN_HELPER.store(true, Ordering::SeqCst);
}

/// Whether this process is a probe helper.
pub fn is_helper() -> bool {
    IN_HELPER.load(Ordering::SeqCst)
}

/// In a helper: names the step about to run (read by the parent when the child times out or
/// dies). Elsewhere: nothing.
pub fn step(what: impl std::fmt::Display) {
    if is_helper() {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{STEP}{}", what.to_string().replace('\n', " "));
        let _ = e.flush();
    }
}

/// Why a task was refused in this process: its child timed out, died or could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// One line: what happened and at which step.
    pub reason: String,
    /// What the user can do.
    pub hint: String,
    /// The step the child was at (empty when it never started).
    pub step: String,
}

/// What a child that finished said: one JSON document, the task's own answer type as serde
/// writes it ([`finish`]); the task's module reads it back with [`Answer::parse`]. `Null`
/// when the child printed no answer.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Answer(pub serde_json::Value);

impl Answer {
    /// The answer as the task's type; `None` when it is not one (a helper of another build,
    /// or none printed): the caller then probes in this process.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(&self.0).ok()
    }
}

/// The verdict on `task`, asked once per process: `Ok` when no helper is enabled (the step
/// runs here as before), or when the child finished in time (with its answer), or when an
/// answer kept by the [`Keeper`] still holds (no child starts); `Err` when the child did not
/// finish, and this process must not run the step.
pub fn canary(task: &'static str) -> Result<Option<Answer>, Refusal> {
    type Cells = Mutex<HashMap<&'static str, Arc<OnceLock<Verdict>>>>;
    static VERDICTS: OnceLock<Cells> = OnceLock::new();
    if is_helper() {
        return Ok(None);
    }
    let Some(program) = PROGRAM.get() else {
        return Ok(None);
    };
    let cell = VERDICTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(task)
        .or_default()
        .clone();
    cell.get_or_init(|| kept_or_run(program, task)).clone()
}

/// The answer kept for `task` where nothing it depends on changed, else a new helper's (kept
/// when it finished).
fn kept_or_run(program: &PathBuf, task: &str) -> Verdict {
    // A bad ACCEL_PROBE_TIMEOUT is reported by `run`, kept answer or not.
    let keeper = KEEPER.get().filter(|_| limit().is_ok());
    let key = keeper.and_then(|k| (k.key)(task).map(|key| (k, key)));
    if let Some((k, key)) = key.as_ref().filter(|_| !FRESH.load(Ordering::SeqCst)) {
        if let Some(answer) = (k.read)(task, key) {
            return Ok(Some(answer));
        }
    }
    let verdict = run(program, task, &[]);
    if let (Some((k, key)), Ok(Some(answer))) = (&key, &verdict) {
        (k.write)(task, key, answer);
    }
    verdict
}

/// Whether this process starts helpers (enabled, and not a helper itself).
pub fn active() -> bool {
    !is_helper() && PROGRAM.get().is_some()
}

/// Runs `task` in a new helper with `extra` arguments, every time it is called (`Ok(None)`
/// when no helper is enabled).
pub fn run_task(task: &str, extra: &[std::ffi::OsString]) -> Verdict {
    match PROGRAM.get() {
        Some(program) if !is_helper() => run(program, task, extra),
        _ => Ok(None),
    }
}

type Verdict = Result<Option<Answer>, Refusal>;

/// How long one helper may run (`ACCEL_PROBE_TIMEOUT`).
pub fn limit() -> Result<Duration, crate::env::EnvError> {
    crate::env::seconds("ACCEL_PROBE_TIMEOUT", 90.0, 0.1, 3600.0)
}

fn run(program: &PathBuf, task: &str, extra: &[std::ffi::OsString]) -> Verdict {
    let limit = limit().map_err(|e| Refusal {
        reason: format!("not probed: {e}"),
        hint: "fix the variable; nothing was loaded".to_string(),
        step: String::new(),
    })?;
    let hint_timeout = "a driver or plugin step hangs: `accel doctor` names the library; set \
                        ACCEL_PROBE_TIMEOUT to wait longer"
        .to_string();
    let mut cmd = Command::new(program);
    cmd.arg(ARG)
        .arg(task)
        .args(extra)
        .envs(CHILD_ENV.get().map(|f| f()).unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so the kill at the deadline takes anything it started.
        cmd.process_group(0);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| Refusal {
        reason: format!(
            "the probe helper ({}) could not start: {e}",
            program.display()
        ),
        hint: "reinstall accel; nothing was loaded in this process".to_string(),
        step: String::new(),
    })?;
    let last_step = Arc::new(Mutex::new(String::from("starting")));
    let stderr_tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let err_reader = child.stderr.take().map(|e| {
        let (step, tail) = (last_step.clone(), stderr_tail.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(e).lines().map_while(|l| l.ok()) {
                if let Some(s) = line.strip_prefix(STEP) {
                    *step.lock().unwrap_or_else(|e| e.into_inner()) = s.to_string();
                } else {
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    t.push(line);
                    if t.len() > 5 {
                        t.remove(0);
                    }
                }
            }
        })
    });
    let out_reader = child.stdout.take().map(|mut o| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = o.by_ref().take(1 << 20).read_to_string(&mut s);
            s
        })
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() >= limit => break None,
            // Most helpers answer within tens of milliseconds: look often at first.
            Ok(None) if started.elapsed() < Duration::from_millis(200) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let step_now = || last_step.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(status) = status else {
        let at = step_now();
        kill_group(&mut child);
        // The readers end with the pipes, which closed with the group.
        let _ = err_reader.map(|h| h.join());
        let _ = out_reader.map(|h| h.join());
        return Err(Refusal {
            reason: format!(
                "the {task} probe did not finish within {:.1} s (step: {at}); its helper \
                 process was killed and nothing of it runs on",
                limit.as_secs_f64()
            ),
            hint: hint_timeout,
            step: at,
        });
    };
    let _ = err_reader.map(|h| h.join());
    let out = out_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    let at = step_now();
    if !status.success() {
        let how = describe_exit(status);
        let tail = stderr_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join(" | ");
        return Err(Refusal {
            reason: format!(
                "the {task} probe crashed ({how}) at step: {at}{}; accel did not run it in \
                 this process",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(" (it said: {tail})")
                }
            ),
            hint: "the step names the library at fault: update or remove it".to_string(),
            step: at,
        });
    }
    Ok(Some(parse_answer(&out)))
}

fn kill_group(child: &mut std::process::Child) {
    #[cfg(target_os = "linux")]
    // SAFETY: kill(2) with a negative pid signals that process group; the group is the
    // child's own (process_group(0) above), whose id is the child's pid, not yet reaped.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn describe_exit(s: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            let name = match sig {
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGILL => " (SIGILL)",
                libc::SIGFPE => " (SIGFPE)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            return format!("signal {sig}{name}");
        }
    }
    match s.code() {
        Some(c) => format!("exit status {c}"),
        None => "no exit status".to_string(),
    }
}

/// The answer in a child's stdout: the last answer line's JSON (`Null` when there is none or
/// it does not parse).
fn parse_answer(out: &str) -> Answer {
    let doc = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(ANSWER))
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default();
    Answer(doc)
}

/// The child's side: prints `answer` as one JSON line (serde's own encoding of the task's
/// answer type) and leaves with `code` at once, without running any library's exit handlers
/// (a plugin thread that still hangs must not hold the exit).
pub fn finish(answer: &impl serde::Serialize, code: i32) -> ! {
    let mut o = std::io::stdout().lock();
    if let Ok(j) = serde_json::to_string(answer) {
        let _ = writeln!(o, "{ANSWER}{j}");
    }
    let _ = o.flush();
    #[cfg(target_os = "linux")]
    // SAFETY: _exit ends the process at once; nothing after it runs.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(not(target_os = "linux"))]
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_last_answer_line_whatever_else_was_printed() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct A {
            available: bool,
            names: Vec<String>,
        }
        let a = A {
            available: true,
            names: vec!["tab\there".into(), "line\nbreak".into()],
        };
        let out = format!(
            "a plugin's own line\n{ANSWER}{{\"stale\": 1}}\n{ANSWER}{}\nmore noise\n",
            serde_json::to_string(&a).unwrap()
        );
        assert_eq!(parse_answer(&out).parse::<A>(), Some(a));
        assert_eq!(parse_answer("no answer\n"), Answer(serde_json::Value::Null));
        assert_eq!(
            parse_answer(&format!("{ANSWER}{{broken")).0,
            serde_json::Value::Null
        );
        assert_eq!(parse_answer("").parse::<A>(), None);
    }
}
