//! One sample line: `name{label="value",…} value [timestamp] [# exemplar]`.

use std::borrow::Cow;

use super::{Label, Limits, ParseErrorKind, float::parse_f64};

pub(super) struct ParsedSample<'a> {
    pub name: &'a str,
    pub value: f64,
    pub timestamp: Option<f64>,
}

/// Byte classes for the hot scanning loops: one table load per byte instead of a chain
/// of comparisons.
const METRIC: u8 = 1; // may continue a metric name: [A-Za-z0-9_:]
const LABEL: u8 = 2; // may continue a label name: [A-Za-z0-9_]
const DIGIT: u8 = 4; // may not start either name
const BLANK: u8 = 8; // ' ' or '\t'

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_alphabetic() || b == b'_' {
            METRIC | LABEL
        } else if b.is_ascii_digit() {
            METRIC | LABEL | DIGIT
        } else if b == b':' {
            METRIC
        } else if b == b' ' || b == b'\t' {
            BLANK
        } else {
            0
        };
        c += 1;
    }
    t
};

#[inline]
fn class(b: u8) -> u8 {
    CLASS[b as usize]
}

/// Length of the run of bytes from `i` whose class has `bits`.
#[inline]
fn run(b: &[u8], mut i: usize, bits: u8) -> usize {
    while i < b.len() && class(b[i]) & bits != 0 {
        i += 1;
    }
    i
}

pub(super) fn is_metric_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && class(b[0]) & DIGIT == 0 && run(b, 0, METRIC) == b.len()
}

/// HELP text escapes: `\\` and `\n`. Anything else after a backslash is kept as written.
pub(super) fn unescape_help(s: &str) -> Cow<'_, str> {
    if !s.contains('\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

#[inline]
fn skip_blanks(b: &[u8], i: usize) -> usize {
    run(b, i, BLANK)
}

fn syntax(msg: impl Into<String>) -> ParseErrorKind {
    ParseErrorKind::Syntax(msg.into())
}

/// Parses a sample line, pushing its labels onto `labels`.
/// The names the previous sample line used. Consecutive lines mostly repeat them
/// (a histogram's buckets, one family's series), and comparing against an already
/// validated name is a `memcmp` instead of a per-byte class scan.
#[derive(Default)]
pub(super) struct NameCache<'a> {
    metric: &'a str,
    labels: Vec<&'a str>,
}

/// If `b[i..]` starts with the known-valid `known` and the name ends right there,
/// the index after it.
#[inline]
fn reuse(b: &[u8], i: usize, known: &str, bits: u8) -> Option<usize> {
    let end = i + known.len();
    (!known.is_empty() && b.len() > end && same_bytes(&b[i..end], known.as_bytes()) && class(b[end]) & bits == 0)
        .then_some(end)
}

#[inline]
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// Equality of two short, equal-length byte strings, eight bytes at a time and inline:
/// names are 2–60 bytes, where a `memcmp` call costs more than the comparison.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let mut at = 0;
    while at + 8 <= n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last (possibly overlapping) word covers the tail.
    word(a, n - 8) == word(b, n - 8)
}

/// Parses a sample line, pushing its labels onto `labels`.
pub(super) fn parse_sample<'a>(
    line: &'a str,
    labels: &mut Vec<Label<'a>>,
    limits: &Limits,
    cache: &mut NameCache<'a>,
) -> Result<ParsedSample<'a>, ParseErrorKind> {
    let b = line.as_bytes();
    let mut i = match reuse(b, 0, cache.metric, METRIC) {
        Some(end) => end,
        None => run(b, 0, METRIC),
    };
    let name = &line[..i];
    if i == 0 || class(b[0]) & DIGIT != 0 {
        let shown = line.split([' ', '\t', '{']).next().unwrap_or(line);
        return Err(ParseErrorKind::InvalidMetricName(shown.to_string()));
    }
    cache.metric = name;
    i = skip_blanks(b, i);
    if i < b.len() && b[i] == b'{' {
        i = parse_labels(line, i + 1, labels, limits, &mut cache.labels)?;
        i = skip_blanks(b, i);
    } else if i == name.len() && i < b.len() {
        // The name ran into a character that can neither continue it nor end it.
        return Err(ParseErrorKind::InvalidMetricName(line.split([' ', '\t']).next().unwrap_or(line).to_string()));
    }
    if i >= b.len() {
        return Err(syntax(format!("sample {name:?} has no value")));
    }
    let vstart = i;
    while i < b.len() && class(b[i]) & BLANK == 0 {
        i += 1;
    }
    let vtext = &line[vstart..i];
    let value = parse_f64(vtext).ok_or_else(|| ParseErrorKind::InvalidValue(vtext.to_string()))?;
    i = skip_blanks(b, i);
    let mut timestamp = None;
    if i < b.len() && b[i] != b'#' {
        let tstart = i;
        while i < b.len() && class(b[i]) & BLANK == 0 {
            i += 1;
        }
        let ttext = &line[tstart..i];
        let ts = parse_f64(ttext)
            .filter(|t| t.is_finite())
            .ok_or_else(|| ParseErrorKind::InvalidTimestamp(ttext.to_string()))?;
        timestamp = Some(ts);
        i = skip_blanks(b, i);
    }
    // Whatever follows must be an OpenMetrics exemplar, which we skip.
    if i < b.len() && b[i] != b'#' {
        return Err(syntax(format!("unexpected text {:?} after the sample value", &line[i..])));
    }
    Ok(ParsedSample { name, value, timestamp })
}

/// Parses `label="value",…}` starting just after `{`; returns the index after `}`.
fn parse_labels<'a>(
    line: &'a str,
    mut i: usize,
    labels: &mut Vec<Label<'a>>,
    limits: &Limits,
    known: &mut Vec<&'a str>,
) -> Result<usize, ParseErrorKind> {
    let b = line.as_bytes();
    let first = labels.len();
    loop {
        i = skip_blanks(b, i);
        if i >= b.len() {
            return Err(syntax("label set is not closed with '}'"));
        }
        if b[i] == b'}' {
            return Ok(i + 1);
        }
        let nstart = i;
        let k = labels.len() - first;
        i = match known.get(k).and_then(|n| reuse(b, i, n, LABEL)) {
            Some(end) => end,
            None => run(b, i, LABEL),
        };
        let lname = &line[nstart..i];
        if i == nstart || class(b[nstart]) & DIGIT != 0 {
            let shown: String = line[nstart..].chars().take_while(|&c| c != '=' && c != ',' && c != '}').collect();
            return Err(ParseErrorKind::InvalidLabelName(shown));
        }
        if lname.len() > limits.max_label_name_bytes {
            return Err(ParseErrorKind::LabelNameTooLong { limit: limits.max_label_name_bytes });
        }
        match known.get_mut(k) {
            Some(n) => *n = lname,
            None => known.push(lname),
        }
        i = skip_blanks(b, i);
        if i >= b.len() || b[i] != b'=' {
            return Err(syntax(format!("expected '=' after label name {lname:?}")));
        }
        i = skip_blanks(b, i + 1);
        if i >= b.len() || b[i] != b'"' {
            return Err(syntax(format!("expected '\"' to open the value of label {lname:?}")));
        }
        i += 1;
        let vstart = i;
        let mut escaped = false;
        // memchr2 finds the closing quote or the next escape without a byte loop.
        loop {
            match memchr::memchr2(b'"', b'\\', &b[i..]) {
                None => return Err(syntax(format!("value of label {lname:?} is not closed with '\"'"))),
                Some(off) => {
                    i += off;
                    if b[i] == b'\\' {
                        escaped = true;
                        i += 2;
                        if i > b.len() {
                            return Err(syntax(format!("value of label {lname:?} is not closed with '\"'")));
                        }
                    } else {
                        break;
                    }
                }
            }
        }
        let raw = &line[vstart..i];
        i += 1; // closing quote
        if raw.len() > limits.max_label_value_bytes {
            return Err(ParseErrorKind::LabelValueTooLong {
                name: lname.to_string(),
                limit: limits.max_label_value_bytes,
            });
        }
        let value = if escaped { Cow::Owned(unescape_label(raw)) } else { Cow::Borrowed(raw) };
        if labels[first..].iter().any(|l| l.name == lname) {
            return Err(ParseErrorKind::DuplicateLabel(lname.to_string()));
        }
        if labels.len() - first >= limits.max_labels_per_sample {
            return Err(ParseErrorKind::TooManyLabels { limit: limits.max_labels_per_sample });
        }
        labels.push(Label { name: lname, value });
        i = skip_blanks(b, i);
        if i < b.len() && b[i] == b',' {
            i += 1;
        } else if i < b.len() && b[i] == b'}' {
            return Ok(i + 1);
        } else {
            return Err(syntax(format!("expected ',' or '}}' after the value of label {lname:?}")));
        }
    }
}

/// Label value escapes: `\\`, `\"`, `\n`. Others are kept verbatim, as Prometheus does.
fn unescape_label(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('n') => out.push('\n'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}
