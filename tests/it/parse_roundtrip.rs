//! Property tests: random families rendered as text parse back identical, and no byte
//! string (random, or a valid exposition mutated) makes the parser panic or report a
//! line outside the body.

use std::fmt::Write;

use goodput::parse::{Limits, MetricType, parse, parse_f64};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Untyped,
    Histogram,
    Summary,
}

#[derive(Debug, Clone)]
struct Series {
    labels: Vec<(String, String)>,
    value: f64,
    value_form: u8,
    timestamp: Option<i64>,
}

#[derive(Debug, Clone)]
struct Fam {
    name: String,
    kind: Kind,
    help: Option<String>,
    series: Vec<Series>,
    /// For histograms: `le` bounds (shared by every series); summaries: quantiles.
    bounds: Vec<(f64, u8)>,
    /// Where `le`/`quantile` goes among the labels, and a shuffle seed for line order.
    special_at: usize,
    shuffle: u64,
}

fn metric_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_:][a-zA-Z0-9_:]{0,12}"
}

fn label_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_filter("reserved", |n| n != "le" && n != "quantile" && n != "id")
}

fn label_value() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(vec!['\\', '"', '\n', ',', '=', '{', '}', ' ', '#', '\t', '\r']),
            4 => any::<char>(),
            8 => prop::char::range('a', 'z'),
        ],
        0..12,
    )
    .prop_map(|v| v.into_iter().collect())
}

fn help_text() -> impl Strategy<Value = String> {
    // No leading blanks (the format cannot carry them) and no CR (a line ending).
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec!['\\', '\n', '"', ' ', '{', '#']),
            any::<char>().prop_filter("cr", |c| *c != '\r')
        ],
        0..16,
    )
    .prop_map(|v| v.into_iter().collect::<String>())
    .prop_map(|s| s.trim_start_matches([' ', '\t']).to_string())
}

fn odd_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(f64::MAX),
        Just(0.00015000000000000001),
        any::<f64>(),
        (-1e6f64..1e6),
        (0u32..100_000).prop_map(f64::from),
    ]
}

/// Renders a float the ways exporters do: Rust Display (long forms), exponent, Go's
/// `e+09`, and the special spellings.
fn render_f64(v: f64, form: u8) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { ["+Inf", "Inf", "inf"][form as usize % 3].into() } else { "-Inf".into() };
    }
    match form % 4 {
        0 => format!("{v}"),
        1 => format!("{v:e}"),
        2 => format!("{v:E}"),
        _ => {
            let s = format!("{v:e}");
            let (m, e) = s.split_once('e').unwrap();
            let (sign, d) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
            format!("{m}e{sign}{d:0>2}")
        }
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn series_strategy() -> impl Strategy<Value = Series> {
    (
        prop::collection::vec((label_name(), label_value()), 0..4),
        odd_f64(),
        any::<u8>(),
        prop::option::of(-10_000_000_000_000i64..10_000_000_000_000),
    )
        .prop_map(|(mut labels, value, value_form, timestamp)| {
            let mut seen = std::collections::HashSet::new();
            labels.retain(|(n, _)| seen.insert(n.clone()));
            Series { labels, value, value_form, timestamp }
        })
}

fn family_strategy() -> impl Strategy<Value = Fam> {
    (
        metric_name(),
        prop::sample::select(vec![Kind::Counter, Kind::Gauge, Kind::Untyped, Kind::Histogram, Kind::Summary]),
        prop::option::of(help_text()),
        prop::collection::vec(series_strategy(), 1..4),
        prop::collection::vec((odd_f64().prop_filter("finite", |f| f.is_finite()), any::<u8>()), 0..5),
        0usize..5,
        any::<u64>(),
    )
        .prop_map(|(name, kind, help, series, mut bounds, special_at, shuffle)| {
            bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            bounds.dedup_by(|a, b| a.0 == b.0);
            Fam { name, kind, help, series, bounds, special_at, shuffle }
        })
}

/// One expected sample: full name, labels in written order, value, timestamp.
type Expected = (String, Vec<(String, String)>, f64, Option<f64>);

/// One expected family: name, type, help, sample count.
type ExpectedFamily = (String, MetricType, Option<String>, usize);

fn with_id(s: &Series, j: usize, extra: Option<(&str, String)>, at: usize) -> Vec<(String, String)> {
    let mut labels = s.labels.clone();
    labels.insert(j % (labels.len() + 1), ("id".into(), j.to_string()));
    if let Some((k, v)) = extra {
        labels.insert(at % (labels.len() + 1), (k.into(), v));
    }
    labels
}

/// Renders families (each with a unique prefix so they cannot claim each other's
/// samples) and returns the text plus what the parser should find.
fn render(fams: &[Fam]) -> (String, Vec<ExpectedFamily>, Vec<Expected>) {
    let mut text = String::new();
    let mut families = Vec::new();
    let mut samples = Vec::new();
    for (i, f) in fams.iter().enumerate() {
        let base = format!("f{i}_{}", f.name);
        let (fname, kind) = match f.kind {
            Kind::Counter => (format!("{base}_total"), MetricType::Counter),
            Kind::Gauge => (base.clone(), MetricType::Gauge),
            Kind::Untyped => (base.clone(), MetricType::Untyped),
            Kind::Histogram => (base.clone(), MetricType::Histogram),
            Kind::Summary => (base.clone(), MetricType::Summary),
        };
        if let Some(h) = &f.help {
            let _ = writeln!(text, "# HELP {fname} {}", h.replace('\\', "\\\\").replace('\n', "\\n"));
        }
        let _ = writeln!(text, "# TYPE {fname} {}", if f.kind == Kind::Untyped { "untyped" } else { kind.as_str() });
        let mut lines: Vec<(String, Expected)> = Vec::new();
        for (j, s) in f.series.iter().enumerate() {
            let ts = s.timestamp.map(|t| t as f64);
            let mut one = |name: String, labels: Vec<(String, String)>, value: f64, form: u8| {
                let mut line = name.clone();
                if !labels.is_empty() || form.is_multiple_of(2) {
                    line.push('{');
                    let parts: Vec<String> =
                        labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
                    line.push_str(&parts.join(","));
                    line.push('}');
                }
                let _ = write!(line, " {}", render_f64(value, form));
                if let Some(t) = s.timestamp {
                    let _ = write!(line, " {t}");
                }
                let value = parse_f64(&render_f64(value, form)).unwrap();
                lines.push((line, (name, labels, value, ts)));
            };
            match f.kind {
                Kind::Counter | Kind::Gauge | Kind::Untyped => {
                    one(fname.clone(), with_id(s, j, None, 0), s.value, s.value_form)
                }
                Kind::Histogram | Kind::Summary => {
                    let (suffix, key) = if f.kind == Kind::Histogram { ("_bucket", "le") } else { ("", "quantile") };
                    let mut bounds = f.bounds.clone();
                    if f.kind == Kind::Histogram {
                        bounds.push((f64::INFINITY, 0));
                    }
                    for (k, (b, form)) in bounds.iter().enumerate() {
                        let lv = render_f64(*b, *form);
                        let labels = with_id(s, j, Some((key, lv)), f.special_at + k);
                        one(format!("{base}{suffix}"), labels, s.value, s.value_form.wrapping_add(k as u8));
                    }
                    one(format!("{base}_sum"), with_id(s, j, None, 0), s.value, s.value_form);
                    one(format!("{base}_count"), with_id(s, j, None, 0), 7.0, s.value_form);
                }
            }
        }
        // Shuffle the family's lines (histogram lines in any order).
        let mut seed = f.shuffle | 1;
        for k in (1..lines.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            lines.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        families.push((fname, kind, f.help.clone(), lines.len()));
        for (line, exp) in lines {
            text.push_str(&line);
            text.push('\n');
            samples.push(exp);
        }
    }
    (text, families, samples)
}

fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn rendered_families_parse_back_identical(fams in prop::collection::vec(family_strategy(), 1..6), crlf in any::<bool>()) {
        let (mut text, families, samples) = render(&fams);
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        let e = parse(text.as_bytes(), &Limits::default()).map_err(|err| TestCaseError::fail(format!("{err}\n{text}")))?;
        prop_assert!(e.duplicates.is_empty(), "{:?}", e.duplicates);
        let got: Vec<_> = e.families.iter().map(|f| (f.name.to_string(), f.kind, f.help.as_deref().map(str::to_string), f.samples)).collect();
        prop_assert_eq!(got, families);
        prop_assert_eq!(e.samples.len(), samples.len());
        for (s, (name, labels, value, ts)) in e.samples.iter().zip(&samples) {
            prop_assert_eq!(s.name, name.as_str());
            let got: Vec<(String, String)> = e.labels_of(s).iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            prop_assert_eq!(&got, labels);
            prop_assert!(same_f64(s.value, *value), "{} vs {}", s.value, value);
            prop_assert_eq!(s.timestamp, *ts);
            for key in ["le", "quantile"] {
                if let Some((_, v)) = labels.iter().find(|(k, _)| k == key) {
                    prop_assert_eq!(e.label_f64(s, key).map(f64::to_bits), parse_f64(v).map(f64::to_bits));
                }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check_no_panic(&body)?;
    }

    #[test]
    fn arbitrary_text_never_panics(body in "[a-z_:{}=\",# \\\\\n\r\t0-9.+eEIfNa-]{0,200}") {
        check_no_panic(body.as_bytes())?;
    }

    #[test]
    fn mutated_expositions_never_panic(
        fams in prop::collection::vec(family_strategy(), 1..3),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..6),
    ) {
        let (text, _, _) = render(&fams);
        let mut body = text.into_bytes();
        for (at, op, byte) in edits {
            let specials = b"\\\"{}=,# \n\r\t\xff\x00";
            let b = if byte % 2 == 0 { specials[byte as usize % specials.len()] } else { byte };
            if body.is_empty() {
                body.push(b);
                continue;
            }
            let i = at.index(body.len());
            match op {
                0 => body[i] = b,
                1 => body.insert(i, b),
                2 => { body.remove(i); }
                _ => body.truncate(i),
            }
        }
        check_no_panic(&body)?;
    }
}

fn check_no_panic(body: &[u8]) -> Result<(), TestCaseError> {
    let lines = body.split(|&b| b == b'\n').count();
    match parse(body, &Limits::default()) {
        Ok(e) => {
            prop_assert_eq!(e.families.iter().map(|f| f.samples).sum::<usize>(), e.samples.len());
            for s in &e.samples {
                prop_assert!((s.family as usize) < e.families.len());
                prop_assert!(s.labels.start <= s.labels.end && s.labels.end as usize <= e.labels.len());
                prop_assert!(s.line >= 1 && s.line as usize <= lines);
            }
        }
        Err(err) => {
            prop_assert!(err.line >= 1 && err.line <= lines, "line {} of {}: {}", err.line, lines, err);
            prop_assert!(!err.to_string().is_empty());
        }
    }
    Ok(())
}
