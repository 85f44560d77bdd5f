//! Keys for the full-screen views, read from the terminal directly (poll(2) and read(2) on
//! standard input in raw mode) instead of through crossterm's event reader: when the terminal
//! goes away (a closed tmux pane, an ssh session that drops), crossterm's reader loops on
//! `read() == 0` inside its poll and never returns, so the view spun at 100 % of a core for
//! good, deaf even to SIGTERM. Here a hang-up is an answer: [`Input::Gone`].

use std::time::Duration;

/// The keys the views act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `q`, `Q` or Ctrl-C (raw mode turns Ctrl-C into a byte, not a SIGINT).
    Quit,
    /// Escape alone.
    Esc,
    /// Up arrow or `k`.
    Up,
    /// Down arrow or `j`.
    Down,
    /// Enter.
    Enter,
    /// Any other key.
    Other,
}

/// What waiting for a key gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A key.
    Key(Key),
    /// Nothing within the time.
    Nothing,
    /// The terminal hung up or closed.
    Gone,
}

/// The first key in bytes read from a raw-mode terminal.
pub(crate) fn parse(b: &[u8]) -> Key {
    match b {
        [] => Key::Other,
        [b'q' | b'Q' | 0x03, ..] => Key::Quit,
        [0x1b] => Key::Esc,
        [0x1b, b'[' | b'O', b'A', ..] => Key::Up,
        [0x1b, b'[' | b'O', b'B', ..] => Key::Down,
        [0x1b, ..] => Key::Other,
        [b'\r' | b'\n', ..] => Key::Enter,
        [b'k', ..] => Key::Up,
        [b'j', ..] => Key::Down,
        _ => Key::Other,
    }
}

/// Waits up to `timeout` for a key on standard input.
#[cfg(unix)]
pub fn wait(timeout: Duration) -> std::io::Result<Input> {
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one pollfd on the stack, its count passed; poll only writes its revents.
    let n = unsafe { libc::poll(&mut fds, 1, ms) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(Input::Nothing)
        } else {
            Err(e)
        };
    }
    if n == 0 {
        return Ok(Input::Nothing);
    }
    if fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
        && fds.revents & libc::POLLIN == 0
    {
        return Ok(Input::Gone);
    }
    let mut buf = [0u8; 64];
    // SAFETY: reads at most buf.len() bytes into the stack buffer.
    let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match r {
        0 => Ok(Input::Gone),
        r if r < 0 => {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => {
                    Ok(Input::Nothing)
                }
                // EIO: the terminal hung up.
                _ => Ok(Input::Gone),
            }
        }
        r => Ok(Input::Key(parse(&buf[..r as usize]))),
    }
}

/// Waits up to `timeout` for a key (crossterm's reader, off Unix).
#[cfg(not(unix))]
pub fn wait(timeout: Duration) -> std::io::Result<Input> {
    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    if !event::poll(timeout)? {
        return Ok(Input::Nothing);
    }
    Ok(match event::read()? {
        Event::Key(k) if k.kind == KeyEventKind::Press => Input::Key(match k.code {
            KeyCode::Char('q') | KeyCode::Char('Q') => Key::Quit,
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Quit,
            KeyCode::Esc => Key::Esc,
            KeyCode::Up | KeyCode::Char('k') => Key::Up,
            KeyCode::Down | KeyCode::Char('j') => Key::Down,
            KeyCode::Enter => Key::Enter,
            _ => Key::Other,
        }),
        _ => Input::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_raw_bytes() {
        assert_eq!(parse(b"q"), Key::Quit);
        assert_eq!(parse(&[3]), Key::Quit);
        assert_eq!(parse(&[0x1b]), Key::Esc);
        assert_eq!(parse(b"\x1b[A"), Key::Up);
        assert_eq!(parse(b"\x1bOB"), Key::Down);
        assert_eq!(parse(b"\x1b[C"), Key::Other);
        assert_eq!(parse(b"\r"), Key::Enter);
        assert_eq!(parse(b"j"), Key::Down);
        assert_eq!(parse(b"x"), Key::Other);
    }
}
