//! Quantities written for people.

/// Formats a byte count for people: `1.50 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// `2026-12-01 13:05:56 UTC` (the civil-from-days algorithm; no time-zone database).
pub fn utc(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

/// A number of seconds above 0 and at most a day (86400): the command's intervals and
/// timeouts (`--interval`, `--watch`, `--web.header-timeout`, the fleet's `--timeout`).
pub fn parse_seconds(s: &str) -> Result<f64, NotSeconds> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86400.0 => Ok(v),
        _ => Err(NotSeconds {
            text: s.to_string(),
        }),
    }
}

/// What [`parse_seconds`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotSeconds {
    /// The text as given.
    pub text: String,
}

impl std::fmt::Display for NotSeconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' is not a number of seconds above 0 and at most 86400 (a day)",
            self.text
        )
    }
}

impl std::error::Error for NotSeconds {}

#[cfg(test)]
mod tests {
    use super::parse_seconds;

    #[test]
    fn seconds_above_zero_up_to_a_day() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert_eq!(parse_seconds("86400"), Ok(86400.0));
        for bad in ["0", "-1", "86400.5", "NaN", "inf", "", "5s"] {
            let e = parse_seconds(bad).unwrap_err();
            assert_eq!(e.text, bad);
            assert!(e
                .to_string()
                .starts_with(&format!("'{bad}' is not a number of seconds")));
        }
    }
}
