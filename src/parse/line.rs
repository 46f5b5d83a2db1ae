//! One sample line: `name{label="value",…} value [timestamp] [# exemplar]`.

use std::borrow::Cow;

use super::{Label, Limits, ParseErrorKind, float::parse_f64};

pub(super) struct ParsedSample<'a> {
    pub name: &'a str,
    pub value: f64,
    pub timestamp: Option<f64>,
}

pub(super) fn is_metric_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_' || b[0] == b':')
        && b[1..].iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b[1..].iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
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

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

fn syntax(msg: impl Into<String>) -> ParseErrorKind {
    ParseErrorKind::Syntax(msg.into())
}

/// Parses a sample line, pushing its labels onto `labels`.
pub(super) fn parse_sample<'a>(
    line: &'a str,
    labels: &mut Vec<Label<'a>>,
    limits: &Limits,
) -> Result<ParsedSample<'a>, ParseErrorKind> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
        i += 1;
    }
    let name = &line[..i];
    if !is_metric_name(name) {
        let shown = line.split([' ', '\t', '{']).next().unwrap_or(line);
        return Err(ParseErrorKind::InvalidMetricName(shown.to_string()));
    }
    i = skip_blanks(b, i);
    if i < b.len() && b[i] == b'{' {
        i = parse_labels(line, i + 1, labels, limits)?;
        i = skip_blanks(b, i);
    } else if i == name.len() && i < b.len() {
        // The name ran into a character that can neither continue it nor end it.
        return Err(ParseErrorKind::InvalidMetricName(line.split([' ', '\t']).next().unwrap_or(line).to_string()));
    }
    if i >= b.len() {
        return Err(syntax(format!("sample {name:?} has no value")));
    }
    let vstart = i;
    while i < b.len() && b[i] != b' ' && b[i] != b'\t' {
        i += 1;
    }
    let vtext = &line[vstart..i];
    let value = parse_f64(vtext).ok_or_else(|| ParseErrorKind::InvalidValue(vtext.to_string()))?;
    i = skip_blanks(b, i);
    let mut timestamp = None;
    if i < b.len() && b[i] != b'#' {
        let tstart = i;
        while i < b.len() && b[i] != b' ' && b[i] != b'\t' {
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
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let lname = &line[nstart..i];
        if !is_label_name(lname) {
            let shown: String = line[nstart..].chars().take_while(|&c| c != '=' && c != ',' && c != '}').collect();
            return Err(ParseErrorKind::InvalidLabelName(shown));
        }
        if lname.len() > limits.max_label_name_bytes {
            return Err(ParseErrorKind::LabelNameTooLong { limit: limits.max_label_name_bytes });
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
