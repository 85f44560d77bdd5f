//! Output helpers: write to stdout without panicking on a closed pipe, and JSON envelopes.

use std::borrow::Cow;
use std::io::Write;

use serde::Serialize;

/// The version of every JSON document accel prints; bumped when a key changes meaning.
pub const SCHEMA_VERSION: u32 = 3;

/// Writes `s` and a newline to stdout, flushing so long runs show progress. Control
/// characters other than line feeds and tabs are escaped ([`printable_lines`]): no text read
/// from the machine or a remote host reaches the terminal as an escape sequence.
pub fn line(s: impl AsRef<str>) -> anyhow::Result<()> {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{}", printable_lines(s.as_ref()))?;
    o.flush()?;
    Ok(())
}

/// Writes `s` as it is (a generated script or page), without a newline of its own.
pub fn text(s: &str) -> anyhow::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())?;
    o.flush()?;
    Ok(())
}

/// Prints `{"schema_version": 1, "kind": kind, ...body}` as pretty JSON.
pub fn json<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    line(serde_json::to_string_pretty(&envelope(kind, body)?)?)
}

/// [`json`]'s document as HTML (`accel::html::render`: the renderer the Python module's
/// `_repr_html_` uses too).
pub fn html<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    let doc = serde_json::to_string(&envelope(kind, body)?)?;
    line(accel::html::render(&doc, kind)?)
}

/// [`json`]'s document as a JSON value (for a server that also reads it).
pub fn json_value<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::Value::Object(envelope(kind, body)?))
}

/// [`json`]'s document as compact text, for a server to hand out.
pub fn json_string<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&envelope(kind, body)?)?)
}

/// [`json`] on one line: one document per line (JSON Lines), for a stream of reports.
pub fn json_line<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    line(serde_json::to_string(&envelope(kind, body)?)?)
}

fn envelope<T: Serialize>(
    kind: &str,
    body: &T,
) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let mut v = serde_json::to_value(body)?;
    let obj = v
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("JSON body of {kind} is not an object"))?;
    let mut out = serde_json::Map::new();
    out.insert("schema_version".into(), SCHEMA_VERSION.into());
    out.insert("kind".into(), kind.into());
    out.extend(std::mem::take(obj));
    Ok(out)
}

/// True when the error is stdout closing under us (`accel devices | head -1`): not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Seconds with a unit that keeps 3-4 significant digits.
pub fn secs(s: f64) -> String {
    let (v, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else {
        (s * 1e6, "us")
    };
    let decimals = if v >= 100.0 {
        1
    } else if v >= 10.0 {
        2
    } else {
        3
    };
    format!("{v:.decimals$} {unit}")
}

/// Shows `msg` as a one-line progress indicator on stderr, or clears it with `None`. Only on a
/// terminal: redirected output and JSON consumers never see it.
pub fn progress(msg: Option<&str>) {
    use std::io::IsTerminal;
    let mut e = std::io::stderr().lock();
    if !e.is_terminal() {
        return;
    }
    // Progress is a courtesy: a failing stderr must not fail the run.
    let _ = match msg {
        Some(m) => write!(e, "\r\x1b[K{m}"),
        None => write!(e, "\r\x1b[K"),
    };
    let _ = e.flush();
}

/// `s` with every control character escaped visibly (`\x1b`, `\n`, `\u{9b}`), as ripgrep and
/// coreutils print names: for one field read from outside (a process name, which any local
/// user sets with `prctl(PR_SET_NAME)`; a sysfs product name; a remote host's error text), so
/// it can neither move the cursor nor fake a line of its own.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape_controls(s, |_| false)
}

/// A process's workload for a text row (` [pod 3f2a6b1c/9c1e0f7d3b2a]`, ` [job 4242.0]`), or
/// why the process cannot be seen; empty for a process in no container, pod, job or unit.
pub fn workload_note(p: &accel::telemetry::ProcessUse) -> String {
    match (p.workload.as_ref().map(|w| w.short()), &p.note) {
        (Some(s), _) if s != "-" => format!(" [{}]", printable(&s)),
        (_, Some(n)) => format!(" [{}]", printable(n)),
        _ => String::new(),
    }
}

/// What is wrong with a device's health, for a text row (` [XID 79 x1; memory repair waits
/// for a reset]`); empty when nothing is.
pub fn health_note(r: &accel::telemetry::Reading) -> String {
    let mut v: Vec<String> = r
        .xid_errors
        .iter()
        .map(|(x, n)| format!("XID {x} x{n}"))
        .collect();
    if r.memory_repair_failed == Some(true) {
        v.push("memory repair failed: no spare rows".into());
    }
    if r.memory_repair_pending == Some(true) {
        v.push("memory repair waits for a reset".into());
    }
    if let Some(n) = r.ecc_uncorrected_errors.filter(|n| *n > 0) {
        v.push(format!("{n} uncorrected memory errors"));
    }
    if v.is_empty() {
        String::new()
    } else {
        format!(" [{}]", v.join("; "))
    }
}

/// The containers the kubelet gave a device, for a text row (`held by ml/trainer-a (main),
/// research/nb (jupyter)`), or `None` off Kubernetes.
pub fn owners_line(r: &accel::telemetry::Reading) -> Option<String> {
    if r.owners.is_empty() {
        return None;
    }
    let names: Vec<String> = r.owners.iter().map(|o| o.short()).collect();
    Some(format!("held by {}", printable(&names.join(", "))))
}

/// [`printable`] for whole lines of accel's own text: line feeds and tabs stay.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    escape_controls(s, |c| c == '\n' || c == '\t')
}

fn escape_controls(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !c.is_control() || keep(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_visibly_and_other_text_is_kept() {
        assert_eq!(printable("python3"), "python3");
        assert_eq!(printable("Tesla T4 ü 東"), "Tesla T4 ü 東");
        // A name that would clear the screen and fake a second line.
        assert_eq!(
            printable("x\x1b[2J\x1b]0;pwned\x07\nfake"),
            "x\\x1b[2J\\x1b]0;pwned\\x07\\nfake"
        );
        // C1 controls (CSI as one byte in some terminals) and DEL.
        assert_eq!(printable("a\u{9b}31mb\x7f"), "a\\u{9b}31mb\\x7f");
        assert_eq!(printable_lines("a\tb\nc\rd\x1b"), "a\tb\nc\\rd\\x1b");
        for s in ["\x1b", "\u{9b}", "\x07", "\x00"] {
            assert!(!printable(s).chars().any(char::is_control), "{s:?}");
        }
    }
}
