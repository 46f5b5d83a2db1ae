//! HTML escaping and the number formats the status page writes.
//!
//! Every string that reaches the page from the config or a scrape (target, model and SLO
//! names, label values, error messages, runbook URLs) goes through [`Esc`]: an engine
//! controls its model names, so `<script>` in a label must stay text.

use std::fmt::{self, Write};
use std::time::Duration;

/// A string escaped for HTML text and for double- or single-quoted attribute values.
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let mut last = 0;
        for (i, b) in s.bytes().enumerate() {
            let rep = match b {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                b'\'' => "&#39;",
                _ => continue,
            };
            f.write_str(&s[last..i])?;
            f.write_str(rep)?;
            last = i + 1;
        }
        f.write_str(&s[last..])
    }
}

/// `url` when it may be a link on the page: http(s) only, so that a `javascript:` or
/// `data:` runbook URL from the config is shown as text instead of becoming clickable.
pub fn safe_link(url: &str) -> Option<&str> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://")).then_some(url)
}

/// An anchor for an id attribute: the name's letters and digits, other bytes as `-xx` hex,
/// so that two names never share an id and no id needs escaping.
pub fn anchor(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len() + 1);
    out.push_str(prefix);
    out.push('-');
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' {
            out.push(b as char);
        } else {
            let _ = write!(out, "-{b:02x}");
        }
    }
    out
}

/// Joins a number to its unit: a no-break space, so that "12.5 ms" never wraps between the
/// number and "ms". A literal character rather than `&nbsp;`: it is the same in text, in
/// attributes and in SVG.
pub const NBSP: char = '\u{a0}';

/// Units the page writes after a number, longest first where one is the start of another;
/// [`glue_units`] and the tests look for these.
pub const UNITS: &[&str] =
    &["requests/s", "preemptions/s", "tokens/s", "req/s", "ms", "µs", "s", "%", "MiB", "GiB", "KiB", "MB", "GB", "KB"];

/// A share as a percentage with `digits` decimals; `-` when unknown.
pub fn pct(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{:.*}{NBSP}%", digits, v * 100.0) } else { "-".into() }
}

/// A latency: from 10 s in seconds with one decimal (`12.5 s`), below in milliseconds
/// (`312 ms`, and `4.2 ms` under 10 ms); `-` when unknown. The terminal summaries draw the
/// same line between ms and s. The thresholds compare what is printed, so that 9.9996 s is
/// not `10000 ms`.
pub fn secs(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 9.9995 {
        format!("{v:.1}{NBSP}s")
    } else if v.abs() >= 0.00995 {
        format!("{:.0}{NBSP}ms", v * 1000.0)
    } else {
        format!("{:.1}{NBSP}ms", v * 1000.0)
    }
}

/// A configured limit, as [`secs`] writes it.
pub fn limit(d: Duration) -> String {
    secs(d.as_secs_f64())
}

/// A rate in requests per second, two decimals, with its unit.
pub fn per_second(v: f64, unit: &str) -> String {
    if v.is_finite() { format!("{v:.2}{NBSP}{unit}") } else { "-".into() }
}

/// A factor (a burn rate, a budget spent several times over): `14.4×`, `3.2×`, `1.06×`.
pub fn times(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = if v.abs() >= 10.0 { format!("{v:.1}") } else { format!("{v:.2}") };
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    format!("{s}×")
}

/// `n` and `noun`, in the plural unless `n` is 1: "1 target", "2 targets", "0 alerts".
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// `text` with the space between a number and a unit made a no-break space: for texts the
/// page does not format itself (alert summaries, scrape errors), so that they do not wrap
/// between "0.150" and "requests/s" either.
pub fn glue_units(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(' ') {
        let (before, after) = (&rest[..i], &rest[i + 1..]);
        out.push_str(before);
        let number = before.ends_with(|c: char| c.is_ascii_digit());
        let unit = UNITS
            .iter()
            .any(|u| after.strip_prefix(u).is_some_and(|tail| !tail.starts_with(|c: char| c.is_alphanumeric())));
        out.push(if number && unit { NBSP } else { ' ' });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A rate or count with a metric suffix (`1.2k`), so that chart labels stay short.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A count of requests (a window's increase, which extrapolation never touches, but which
/// is a float), as a whole number with a metric suffix when large.
pub fn count(v: f64) -> String {
    if v.is_finite() && v.abs() < 1e3 { format!("{v:.0}") } else { short(v) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped_for_text_and_attributes() {
        let s = Esc(r#"<script>alert("x")</script> & 'y'"#).to_string();
        assert_eq!(s, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;");
        assert_eq!(Esc("plain-name_1").to_string(), "plain-name_1");
        assert_eq!(Esc("ünïcode → ok").to_string(), "ünïcode → ok");
    }

    #[test]
    fn only_http_links_are_links() {
        assert!(safe_link("https://example.com/runbooks.md#x").is_some());
        assert!(safe_link("HTTP://example.com").is_some());
        for bad in ["javascript:alert(1)", "data:text/html,x", " javascript:x", "ftp://x", "/relative"] {
            assert!(safe_link(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn anchors_are_distinct_and_need_no_escaping() {
        assert_eq!(anchor("t", "sim-chat"), "t-sim-2dchat");
        assert_ne!(anchor("t", "a b"), anchor("t", "a-b"));
        assert!(anchor("t", "<x\">").bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(pct(0.99234, 2), "99.23\u{a0}%");
        assert_eq!(pct(f64::NAN, 2), "-");
        assert_eq!(secs(0.3124), "312\u{a0}ms");
        assert_eq!(times(14.4), "14.4×");
        assert_eq!(times(3.2), "3.2×");
        assert_eq!(times(1.0625), "1.06×");
        assert_eq!(times(2.0), "2×");
        assert_eq!(times(120.0), "120×");
        assert_eq!(short(1234.0), "1.2k");
        assert_eq!(short(45_000.0), "45k");
        assert_eq!(short(4.256), "4.26");
        assert_eq!(short(0.0), "0");
        assert_eq!(count(3.0), "3");
        assert_eq!(count(1500.0), "1.5k");
        assert_eq!(per_second(3.2, "requests/s"), "3.20\u{a0}requests/s");
    }

    #[test]
    fn latencies_under_ten_seconds_are_in_milliseconds() {
        for (v, want) in [
            (0.0, "0.0 ms"),
            (0.0042, "4.2 ms"),
            (0.00996, "10 ms"),
            (0.05, "50 ms"),
            (0.3124, "312 ms"),
            (2.0, "2000 ms"),
            (3.2, "3200 ms"),
            (9.9994, "9999 ms"),
            (9.9996, "10.0 s"),
            (10.0, "10.0 s"),
            (12.5, "12.5 s"),
            (f64::NAN, "-"),
        ] {
            assert_eq!(secs(v), want.replace(' ', "\u{a0}"), "{v}");
        }
        assert_eq!(limit(Duration::from_millis(500)), "500\u{a0}ms");
        assert_eq!(limit(Duration::from_secs(30)), "30.0\u{a0}s");
    }

    #[test]
    fn counts_agree_with_their_number() {
        assert_eq!(plural(0, "target"), "0 targets");
        assert_eq!(plural(1, "target"), "1 target");
        assert_eq!(plural(2, "SLO"), "2 SLOs");
        assert_eq!(plural(1, "evaluation"), "1 evaluation");
    }

    #[test]
    fn a_number_keeps_its_unit_in_foreign_text() {
        let got = glue_units("engine-0 preempts 0.150 requests/s over 5 minutes, 93.0 % full, 3 s late");
        assert_eq!(got, "engine-0 preempts 0.150\u{a0}requests/s over 5 minutes, 93.0\u{a0}% full, 3\u{a0}s late");
        // A word that merely starts like a unit is not one; a space after a word stays.
        assert_eq!(glue_units("2 slots and 4 msgs at 5 sites"), "2 slots and 4 msgs at 5 sites");
        assert_eq!(glue_units("took ms"), "took ms");
        assert_eq!(glue_units(""), "");
    }
}
