//! Prometheus text format 0.0.4 for a dynamic list of samples.
//!
//! Written by hand rather than through prometheus-client: our families and label sets
//! change with every report (targets, models, windows come and go), while
//! prometheus-client wants metrics registered up front. The format is small; what
//! matters is done here: one HELP and TYPE per family, each family's lines together,
//! and escaping of HELP text and label values. HELP and TYPE come from the families'
//! declarations (goodput_core::export::registry); this file knows no family.

use std::collections::HashMap;
use std::fmt::Write;

use crate::export::{self, Emit, Labels};

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

/// What [`write`] needs of a sample. The report's samples are written as they are, without a
/// [`Line`] each: at thousands of targets a tick's /metrics is over a million samples, and a
/// label list per sample was a good part of rendering it (docs/footprint.md#b-aggregator).
pub trait Sample {
    fn name(&self) -> &str;
    fn label_count(&self) -> usize;
    /// The `i`th label, `i < label_count()`.
    fn label(&self, i: usize) -> (&str, &str);
    fn value(&self) -> f64;
}

impl Sample for Line<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn label_count(&self) -> usize {
        self.labels.len()
    }
    fn label(&self, i: usize) -> (&str, &str) {
        self.labels[i]
    }
    fn value(&self) -> f64 {
        self.value
    }
}

impl Sample for crate::export::ExportSample {
    fn name(&self) -> &str {
        self.name
    }
    fn label_count(&self) -> usize {
        self.labels.len()
    }
    fn label(&self, i: usize) -> (&str, &str) {
        let (k, v) = &self.labels[i];
        (k, v)
    }
    fn value(&self) -> f64 {
        self.value
    }
}

/// Writes `samples` as an exposition. Families keep the order of their first sample; the
/// samples of a family are brought together even if the input interleaves them.
/// `external` (the config's `external_labels`) is added to every sample after its own
/// labels; config validation keeps its names apart from goodput's own, and a sample that
/// has one already (`llm_slo_target_info`'s `pod` of a discovered target) keeps its own, as
/// Prometheus treats its external labels.
/// `meta` gives (help, type) per family; families without it are written as untyped.
pub fn write<S: Sample>(
    out: &mut String,
    samples: &[S],
    external: &[(String, String)],
    meta: impl Fn(&str) -> Option<(&'static str, &'static str)>,
) {
    let mut families = Families::new(external, &meta);
    families.add(samples);
    for chunk in families.finish() {
        out.push_str(&chunk);
    }
}

/// HELP text and TYPE of a family, `None` for one to write as untyped.
pub type Meta<'m> = &'m dyn Fn(&str) -> Option<(&'static str, &'static str)>;

/// An exposition written a sample at a time, in any order: each family's text (its HELP and
/// TYPE, then its lines) goes to a buffer of its own, and [`Families::finish`] hands the
/// buffers over in family order. The report's families are written straight from the report
/// through [`Emit`], a target at a time, so that neither a list of its samples nor a joined
/// copy of the text is ever made (docs/footprint.md#b-aggregator).
///
/// Family order: a family's place is fixed when its first sample comes, by the rank of the
/// current [`Families::section`] (its position in the exporter's table), or after the ranked
/// ones in order of first appearance; sections follow one another.
pub struct Families<'e> {
    external: &'e [(String, String)],
    meta: Meta<'e>,
    /// A family's index in `families` by its name, and by the address of its name where that
    /// is a constant (the report's families), so that most lookups hash a pointer rather
    /// than the string.
    by_name: HashMap<String, usize>,
    by_address: HashMap<(usize, usize), usize>,
    families: Vec<Family>,
    section: usize,
    rank: fn(&str) -> Option<usize>,
}

struct Family {
    /// Section, then the rank within it.
    order: (usize, usize),
    text: String,
}

fn unranked(_: &str) -> Option<usize> {
    None
}

impl<'e> Families<'e> {
    pub fn new(external: &'e [(String, String)], meta: Meta<'e>) -> Families<'e> {
        Families {
            external,
            meta,
            by_name: HashMap::new(),
            by_address: HashMap::new(),
            families: Vec::new(),
            section: 0,
            rank: unranked,
        }
    }

    /// Starts a section: families first seen from here on come after those seen before,
    /// in the order `rank` gives, those without a rank in order of first appearance.
    pub fn section(&mut self, rank: fn(&str) -> Option<usize>) {
        self.section += 1;
        self.rank = rank;
    }

    /// Writes `samples` into their families' buffers.
    pub fn add<S: Sample>(&mut self, samples: &[S]) {
        for s in samples {
            let f = self.family(s.name());
            let n = s.label_count();
            write_sample(&mut self.families[f].text, s.name(), n, (0..n).map(|i| s.label(i)), self.external, s.value());
        }
    }

    /// The index of the family `name`, made with its HELP and TYPE on its first sample.
    fn family(&mut self, name: &str) -> usize {
        if let Some(&f) = self.by_name.get(name) {
            return f;
        }
        let f = self.families.len();
        let rank = (self.rank)(name).unwrap_or(export::UNRANKED + f);
        let mut text = String::new();
        header(&mut text, name, (self.meta)(name));
        self.families.push(Family { order: (self.section, rank), text });
        self.by_name.insert(name.to_string(), f);
        f
    }

    /// [`Families::family`] for a name that lives as long as the program, so that its address
    /// can stand for it: no other name will ever be at that address.
    fn static_family(&mut self, name: &'static str) -> usize {
        let address = (name.as_ptr() as usize, name.len());
        if let Some(&f) = self.by_address.get(&address) {
            return f;
        }
        let f = self.family(name);
        self.by_address.insert(address, f);
        f
    }

    /// Each family's text, HELP and TYPE first, in family order: the body's chunks.
    pub fn finish(mut self) -> Vec<String> {
        self.families.sort_by_key(|f| f.order);
        self.families
            .into_iter()
            .map(|mut f| {
                // Held for a whole tick: give back what the buffer grew beyond its text.
                f.text.shrink_to_fit();
                f.text
            })
            .collect()
    }
}

impl Emit for Families<'_> {
    fn sample(&mut self, family: &'static str, labels: Labels<'_>, value: f64) {
        let f = self.static_family(family);
        write_sample(&mut self.families[f].text, family, labels.len(), labels.iter(), self.external, value);
    }
}

fn header(out: &mut String, name: &str, meta: Option<(&'static str, &'static str)>) {
    match meta {
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
}

fn write_sample<'k, 'v>(
    out: &mut String,
    name: &str,
    n: usize,
    labels: impl Iterator<Item = (&'k str, &'v str)> + Clone,
    external: &[(String, String)],
    value: f64,
) {
    out.push_str(name);
    if n > 0 || !external.is_empty() {
        out.push('{');
        let mut first = true;
        let mut label = |out: &mut String, k: &str, v: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(k);
            out.push_str("=\"");
            escape_label(out, v);
            out.push('"');
        };
        for (k, v) in labels.clone() {
            label(out, k, v);
        }
        for (k, v) in external {
            if !labels.clone().any(|(own, _)| own == k) {
                label(out, k, v);
            }
        }
        out.push('}');
    }
    out.push(' ');
    write_value(out, value);
    out.push('\n');
}

fn escape_help(out: &mut String, s: &str) {
    escape(out, s, |b| memchr::memchr2(b'\\', b'\n', b));
}

fn escape_label(out: &mut String, s: &str) {
    escape(out, s, |b| memchr::memchr3(b'\\', b'"', b'\n', b));
}

/// `s` with each byte that `next` finds escaped; the text between them is copied whole.
fn escape(out: &mut String, s: &str, next: impl Fn(&[u8]) -> Option<usize>) {
    let mut rest = s;
    while let Some(i) = next(rest.as_bytes()) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        });
        // The byte at `i` is ASCII, so `i + 1` is a character boundary.
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// Go's ParseFloat reads all of these; `{:?}` is the shortest form that round-trips.
fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
        // What `{v:?}` writes for a whole number below 1e16 ("3.0"), without float formatting:
        // counts, flags and 0/1 bands are most of a report's values.
        let _ = write!(out, "{}.0", v as i64);
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
    fn whole_numbers_are_written_as_debug_formatting_writes_them() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            3.0,
            42.0,
            1e6,
            -7e9,
            999_999_999_999_999.0,
            1e15,
            1e16,
            1.5e17,
            0.5,
            -2.25,
            1e-7,
            123.456,
            f64::MAX,
            f64::MIN_POSITIVE,
            4_503_599_627_370_496.0,
        ];
        for v in values {
            let mut out = String::new();
            write_value(&mut out, v);
            assert_eq!(out, format!("{v:?}"), "{v}");
        }
    }

    #[test]
    fn interleaved_families_are_grouped_in_first_seen_order_keeping_each_familys_order() {
        let names = ["a", "b", "a", "c", "b", "a"];
        let lines: Vec<Line> =
            names.iter().enumerate().map(|(i, n)| Line { name: n, labels: vec![], value: i as f64 }).collect();
        let mut out = String::new();
        write(&mut out, &lines, &[], |_| None);
        let expected =
            "# TYPE a untyped\na 0.0\na 2.0\na 5.0\n# TYPE b untyped\nb 1.0\nb 4.0\n# TYPE c untyped\nc 3.0\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn export_samples_are_written_as_their_lines_are() {
        use crate::export::ExportSample;
        let samples = vec![
            ExportSample { name: "x", labels: vec![("target", "t\"1".to_string())], value: 1.0 },
            ExportSample { name: "y", labels: vec![], value: 0.25 },
            ExportSample { name: "x", labels: vec![("target", "t2".to_string()), ("pod", "p".into())], value: 2.0 },
        ];
        let external = [("pod".to_string(), "own".to_string())];
        let (mut direct, mut via_lines) = (String::new(), String::new());
        write(&mut direct, &samples, &external, |_| None);
        let lines: Vec<Line> = samples.iter().map(Line::of).collect();
        write(&mut via_lines, &lines, &external, |_| None);
        assert_eq!(direct, via_lines);
        assert_eq!(
            direct,
            "# TYPE x untyped\nx{target=\"t\\\"1\",pod=\"own\"} 1.0\nx{target=\"t2\",pod=\"p\"} 2.0\n# TYPE y untyped\ny{pod=\"own\"} 0.25\n"
        );
    }

    #[test]
    fn emitted_families_take_their_rank_within_their_section() {
        fn rank(name: &str) -> Option<usize> {
            ["a", "b"].iter().position(|n| *n == name)
        }
        let external = [("cluster".to_string(), "c".to_string())];
        let meta = |_: &str| None;
        let mut f = Families::new(&external, &meta);
        f.section(rank);
        let target = [("target", "t\"1")];
        // Target by target, each family interleaved with the others; `b` before `a`, an
        // unranked family first of all.
        for t in ["x", "y"] {
            f.sample("z", Labels::new(&[("target", t)], &[]), 3.0);
            f.sample("b", Labels::new(&[("target", t)], &[("side", "lower")]), 2.0);
            f.sample("a", Labels::new(&[("target", t)], &[]), 1.0);
        }
        f.sample("a", Labels::new(&target, &[]), 0.5);
        f.section(rank);
        f.sample("r", Labels::new(&[], &[]), 4.0);
        f.sample("a2", Labels::new(&[], &[("cluster", "own")]), 5.0);
        let chunks = f.finish();
        assert_eq!(chunks.len(), 5, "{chunks:?}");
        assert_eq!(
            chunks.concat(),
            "# TYPE a untyped\na{target=\"x\",cluster=\"c\"} 1.0\na{target=\"y\",cluster=\"c\"} 1.0\na{target=\"t\\\"1\",cluster=\"c\"} 0.5\n\
             # TYPE b untyped\nb{target=\"x\",side=\"lower\",cluster=\"c\"} 2.0\nb{target=\"y\",side=\"lower\",cluster=\"c\"} 2.0\n\
             # TYPE z untyped\nz{target=\"x\",cluster=\"c\"} 3.0\nz{target=\"y\",cluster=\"c\"} 3.0\n\
             # TYPE r untyped\nr{cluster=\"c\"} 4.0\n\
             # TYPE a2 untyped\na2{cluster=\"own\"} 5.0\n"
        );
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
