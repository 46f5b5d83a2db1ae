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

/// A share as a percentage with `digits` decimals; `-` when unknown.
pub fn pct(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{:.*} %", digits, v * 100.0) } else { "-".into() }
}

/// Seconds as `312 ms` or `1.25 s`; `-` when unknown.
pub fn secs(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() < 1.0 {
        format!("{:.0} ms", v * 1000.0)
    } else {
        format!("{v:.2} s")
    }
}

/// A configured limit, as [`secs`] writes it.
pub fn limit(d: Duration) -> String {
    secs(d.as_secs_f64())
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
        assert_eq!(pct(0.99234, 2), "99.23 %");
        assert_eq!(pct(f64::NAN, 2), "-");
        assert_eq!(secs(0.3124), "312 ms");
        assert_eq!(secs(1.25), "1.25 s");
        assert_eq!(short(1234.0), "1.2k");
        assert_eq!(short(45_000.0), "45k");
        assert_eq!(short(4.256), "4.26");
        assert_eq!(short(0.0), "0");
        assert_eq!(count(3.0), "3");
        assert_eq!(count(1500.0), "1.5k");
    }
}
