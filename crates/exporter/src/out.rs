//! Output shared by the command and the exporter: lines to stdout without panicking on a closed
//! pipe, text escaped for terminals, and the JSON documents' envelope and encoder.

use std::borrow::Cow;
use std::io::Write;

use serde::Serialize;

/// The version of every JSON document accel prints; bumped when a key changes meaning.
pub(crate) const SCHEMA_VERSION: u32 = 3;

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

/// Prints `{"schema_version": 1, "kind": kind, ...body}` as pretty JSON: the JSON encoder's
/// text alone (`json_text`), which is valid JSON whatever bytes a name held and safe on a
/// terminal; the terminal escaping of [`line()`] is for text output only (run over JSON it once
/// turned a DEL in a process name into `\x7f`, which no JSON parser takes).
pub fn json<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    let mut t = json_text(&envelope(kind, body)?, true)?;
    t.push('\n');
    text(&t)
}

/// Whether a character is one a terminal or a text view may act on although it is valid in a
/// JSON string: DEL, the C1 controls (U+0080 to U+009F: CSI is U+009B), the bidirectional
/// overrides, embeddings and isolates (U+202E shows a name backwards), and the line and
/// paragraph separators. serde_json writes them as they are; [`json_text`] writes `\uXXXX`.
pub(crate) fn json_escapes(c: char) -> bool {
    matches!(c,
        '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// serde_json's formatter (compact or pretty) with [`json_escapes`]'s characters written as
/// `\uXXXX` escapes inside strings: still the JSON encoder, still the same document to any
/// parser.
struct Safe<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some(i) = rest.find(json_escapes) {
            w.write_all(&rest.as_bytes()[..i])?;
            let c = rest[i..].chars().next().unwrap_or('\0');
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `v` as JSON text through `Safe`: compact, or pretty (two-space indents).
pub(crate) fn json_text<T: Serialize + ?Sized>(v: &T, pretty: bool) -> anyhow::Result<String> {
    let mut buf = Vec::with_capacity(256);
    if pretty {
        let f = Safe(serde_json::ser::PrettyFormatter::new());
        v.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, f))?;
    } else {
        let f = Safe(serde_json::ser::CompactFormatter);
        v.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, f))?;
    }
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(buf)?)
}

/// [`json`]'s document as a JSON value (for a server that also reads it).
pub fn json_value<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::Value::Object(envelope(kind, body)?))
}

/// [`json`]'s document as compact text, for a server to hand out.
pub fn json_string<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<String> {
    json_text(&envelope(kind, body)?, false)
}

/// [`json`] on one line: one document per line (JSON Lines), for a stream of reports.
pub fn json_line<T: Serialize>(kind: &str, body: &T) -> anyhow::Result<()> {
    let mut t = json_string(kind, body)?;
    t.push('\n');
    text(&t)
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

/// `s` with every control character escaped visibly (`\x1b`, `\n`, `\u{9b}`), as ripgrep and
/// coreutils print names: for one field read from outside (a process name, which any local
/// user sets with `prctl(PR_SET_NAME)`; a sysfs product name; a remote host's error text), so
/// it can neither move the cursor nor fake a line of its own.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape_controls(s, |_| false)
}

/// [`printable`] for whole lines of accel's own text: line feeds and tabs stay.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    escape_controls(s, |c| c == '\n' || c == '\t')
}

fn escape_controls(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    // Controls, and the bidirectional and line-separating characters (`json_escapes`): a
    // U+202E in a process name would show the rest of the row backwards.
    let escaped = |c: char| (c.is_control() || json_escapes(c)) && !keep(c);
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !escaped(c) => out.push(c),
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
        assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b");
    }

    /// Every character in a name leaves the JSON valid, equal to the name once parsed, and
    /// free of anything a terminal acts on.
    #[test]
    fn json_text_is_valid_json_and_terminal_safe_for_every_character() {
        let mut name = String::new();
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            name.push(c);
        }
        name.push_str("\u{fffd}\u{10ffff}");
        let doc = serde_json::json!({"processes": [{"name": name, "pid": 1}]});
        for pretty in [false, true] {
            let t = json_text(&doc, pretty).unwrap();
            let back: serde_json::Value = serde_json::from_str(&t).unwrap();
            assert_eq!(back, doc);
            let bad: Vec<char> = t
                .chars()
                .filter(|&c| (c.is_control() && c != '\n') || json_escapes(c))
                .collect();
            assert!(bad.is_empty(), "{bad:?}");
            assert!(!pretty || t.contains("\n  \"processes\""), "{t:.80}");
            assert!(t.contains("\\u007f") && t.contains("\\u009b") && t.contains("\\u202e"));
        }
    }
}
