//! Durations as users write them (`5s`, `1m`, `1h30m`, `250ms`) and as labels show them.

use std::fmt;
use std::time::Duration;

/// Parses `250ms`, `5s`, `1m`, `1h30m`, `2d`. Bare numbers are rejected: a unit is required.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration; write e.g. 5s, 1m or 250ms".into());
    }
    humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?} ({e}); write e.g. 5s, 1m or 250ms"))
}

/// Formats a duration compactly, the way Prometheus writes ranges: `30s`, `5m`, `1h30m`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, len) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] {
        if ms >= len {
            out.push_str(&format!("{}{unit}", ms / len));
            ms %= len;
        }
    }
    out
}

/// One evaluation window, e.g. the last 5 minutes. Never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window(Duration);

impl Window {
    pub fn new(d: Duration) -> Option<Window> {
        (!d.is_zero()).then_some(Window(d))
    }

    /// A window of `secs` seconds, for constants (a zero fails the build there).
    pub const fn from_secs(secs: u64) -> Window {
        assert!(secs > 0, "a window is never zero");
        Window(Duration::from_secs(secs))
    }

    pub fn duration(self) -> Duration {
        self.0
    }

    pub fn millis(self) -> i64 {
        self.0.as_millis() as i64
    }

    /// The `window` label value.
    pub fn label(self) -> String {
        format_duration(self.0)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["250ms", "5s", "1m", "5m", "15m", "1h", "1h30m", "2d"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("").is_err());
        assert!(Window::new(Duration::ZERO).is_none());
    }
}
