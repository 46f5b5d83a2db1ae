//! Durations as users write them (`5s`, `1m`, `1h30m`, `250ms`) and as labels show them.
//!
//! [`parse_duration`] is the one parser: the config file (directly and through the serde
//! helpers in [`de`]) and every command-line flag read durations through it, so `5s` means
//! the same everywhere and a bare `5` is rejected everywhere.

use std::fmt;
use std::time::Duration;

/// The shortest interval accepted for anything that repeats: scrapes, evaluations, NVML
/// samples, alert re-sends. A `1ms` scrape interval would ask an engine to render its
/// /metrics a thousand times a second; 100 ms is still fast enough for tests and demos,
/// and production intervals are 1 s or more (docs/config.md).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Why a written duration is refused; each message says what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write e.g. 5s, 1m or 250ms")]
    Empty,
    #[error("invalid duration {text:?} ({reason}); write e.g. 5s, 1m or 250ms")]
    Invalid { text: String, reason: humantime::DurationError },
    #[error("{0} must be longer than 0s, e.g. 5s")]
    Zero(String),
    #[error(
        "{0} is shorter than the minimum interval of {min}; use at least {min} (1s or more outside tests)",
        min = format_duration(MIN_INTERVAL)
    )]
    BelowMinInterval(String),
}

/// Parses `250ms`, `5s`, `1m`, `1h30m`, `2d`. Bare numbers are rejected: a unit is required.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    humantime::parse_duration(s).map_err(|reason| DurationError::Invalid { text: s.to_string(), reason })
}

/// [`parse_duration`], refusing zero (a timeout or window of `0s` means nothing).
pub fn parse_positive_duration(s: &str) -> Result<Duration, DurationError> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(DurationError::Zero(s.trim().to_string())),
        d => Ok(d),
    }
}

/// [`parse_duration`], refusing anything shorter than [`MIN_INTERVAL`].
pub fn parse_interval(s: &str) -> Result<Duration, DurationError> {
    match parse_duration(s)? {
        d if d < MIN_INTERVAL => Err(DurationError::BelowMinInterval(s.trim().to_string())),
        d => Ok(d),
    }
}

/// serde `deserialize_with` helpers: config durations are text read by [`parse_duration`].
pub mod de {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    use super::Window;

    fn text<'de, D: Deserializer<'de>>(
        d: D,
        parse: fn(&str) -> Result<Duration, super::DurationError>,
    ) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    /// A duration longer than zero.
    pub fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        text(d, super::parse_positive_duration)
    }

    /// An interval of at least [`super::MIN_INTERVAL`].
    pub fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        text(d, super::parse_interval)
    }

    /// An optional duration that may be zero (`for: 0s` fires at once).
    pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        text(d, super::parse_duration).map(Some)
    }

    /// An optional window (a duration longer than zero).
    pub fn opt_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Window>, D::Error> {
        text(d, super::parse_positive_duration).map(Window::new)
    }
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

/// RFC 3339 with milliseconds, UTC. Times before 1970 clamp to the epoch.
pub fn rfc3339_ms(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
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

    #[test]
    fn positive_and_interval_bounds() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_positive_duration("0s").unwrap_err().to_string(), "0s must be longer than 0s, e.g. 5s");
        assert_eq!(parse_positive_duration("1ms"), Ok(Duration::from_millis(1)));
        let e = parse_interval("1ms").unwrap_err().to_string();
        assert!(e.contains("shorter than the minimum interval of 100ms"), "{e}");
        assert_eq!(parse_interval("100ms"), Ok(MIN_INTERVAL));
        assert!(parse_interval("5x").unwrap_err().to_string().starts_with("invalid duration \"5x\" ("));
        assert_eq!(parse_duration(" ").unwrap_err().to_string(), "empty duration; write e.g. 5s, 1m or 250ms");
    }
}
