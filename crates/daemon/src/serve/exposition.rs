//! Prometheus text format 0.0.4 for a dynamic list of samples.
//!
//! Written by hand rather than through prometheus-client: our families and label sets
//! change with every report (targets, models, windows come and go), while
//! prometheus-client wants metrics registered up front. The format is small; what
//! matters is done here: one HELP and TYPE per family, each family's lines together,
//! and escaping of HELP text and label values.

use std::collections::HashMap;
use std::fmt::Write;

/// One sample to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, &'a str)>,
    pub value: f64,
}

impl<'a> Line<'a> {
    /// A line borrowing one exported sample (the report's, alert delivery's, the taps').
    pub fn of(s: &'a crate::export::ExportSample) -> Line<'a> {
        Line { name: s.name, labels: s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect(), value: s.value }
    }
}

/// Writes `lines` as an exposition. Families keep the order of their first sample; the
/// samples of a family are brought together even if the input interleaves them.
/// `external` (the config's `external_labels`) is added to every sample after its own
/// labels; config validation keeps its names apart from goodput's own, and a sample that
/// has one already (`llm_slo_target_info`'s `pod` of a discovered target) keeps its own, as
/// Prometheus treats its external labels.
/// `meta` gives (help, type) per family; families without it are written as untyped.
pub fn write(
    out: &mut String,
    lines: &[Line<'_>],
    external: &[(String, String)],
    meta: impl Fn(&str) -> Option<(&'static str, &'static str)>,
) {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: HashMap<&str, Vec<&Line<'_>>> = HashMap::new();
    for l in lines {
        groups
            .entry(l.name)
            .or_insert_with(|| {
                order.push(l.name);
                Vec::new()
            })
            .push(l);
    }
    for name in order {
        match meta(name) {
            Some((help, kind)) => {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push(' ');
                escape_help(out, help);
                out.push('\n');
                let _ = writeln!(out, "# TYPE {name} {kind}");
            }
            None => {
                let _ = writeln!(out, "# TYPE {name} untyped");
            }
        }
        for l in &groups[name] {
            out.push_str(name);
            if !l.labels.is_empty() || !external.is_empty() {
                out.push('{');
                let own = |k: &str| l.labels.iter().any(|(o, _)| *o == k);
                let extra = external.iter().filter(|(k, _)| !own(k)).map(|(k, v)| (k.as_str(), v.as_str()));
                let all = l.labels.iter().copied().chain(extra);
                for (i, (k, v)) in all.enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape_label(out, v);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(out, l.value);
            out.push('\n');
        }
    }
}

fn escape_help(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_label(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Go's ParseFloat reads all of these; `{:?}` is the shortest form that round-trips.
fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Limits, parse};

    #[test]
    fn escapes_and_groups_and_round_trips_through_our_parser() {
        let tricky = "a\"b\\c\nd";
        let lines = vec![
            Line { name: "x_total", labels: vec![("t", "1")], value: 3.0 },
            Line { name: "y", labels: vec![("t", tricky)], value: f64::NAN },
            Line { name: "x_total", labels: vec![("t", "2")], value: 1e-7 },
            Line { name: "y", labels: vec![], value: f64::INFINITY },
        ];
        let mut out = String::new();
        write(&mut out, &lines, &[], |n| (n == "x_total").then_some(("Help with \\ and\nnewline.", "counter")));
        let expected = "# HELP x_total Help with \\\\ and\\nnewline.\n# TYPE x_total counter\nx_total{t=\"1\"} 3.0\nx_total{t=\"2\"} 1e-7\n# TYPE y untyped\ny{t=\"a\\\"b\\\\c\\nd\"} NaN\ny +Inf\n";
        assert_eq!(out, expected);
        let parsed = parse(out.as_bytes(), &Limits::default()).expect("our own exposition parses");
        assert_eq!(parsed.samples.len(), 4);
        let s = parsed.samples.iter().find(|s| s.name == "y" && !parsed.labels_of(s).is_empty()).unwrap();
        assert_eq!(parsed.label(s, "t"), Some(tricky));
        assert_eq!(parsed.samples[1].value, 1e-7);
    }

    #[test]
    fn external_labels_follow_each_samples_own() {
        let lines = vec![
            Line { name: "x_total", labels: vec![("t", "1")], value: 3.0 },
            Line { name: "y", labels: vec![], value: 1.0 },
        ];
        let external = [("cluster".to_string(), "prod-east".to_string()), ("pod".to_string(), "a\"b".to_string())];
        let mut out = String::new();
        write(&mut out, &lines, &external, |_| None);
        let expected = "# TYPE x_total untyped\nx_total{t=\"1\",cluster=\"prod-east\",pod=\"a\\\"b\"} 3.0\n# TYPE y untyped\ny{cluster=\"prod-east\",pod=\"a\\\"b\"} 1.0\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn a_samples_own_label_wins_over_an_external_one() {
        // A discovered target's info carries its pod; the sidecar's own pod must not
        // repeat the label name, which would make the whole exposition unparsable.
        let lines = vec![Line { name: "info", labels: vec![("pod", "vllm-0")], value: 1.0 }];
        let external = [("pod".to_string(), "goodput-7f".to_string()), ("cluster".to_string(), "c".to_string())];
        let mut out = String::new();
        write(&mut out, &lines, &external, |_| None);
        assert_eq!(out, "# TYPE info untyped\ninfo{pod=\"vllm-0\",cluster=\"c\"} 1.0\n");
    }
}
