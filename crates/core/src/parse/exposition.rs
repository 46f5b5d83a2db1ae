//! What a parsed exposition is: its families, samples, labels and duplicates, borrowed
//! from the body, and the limits a scrape is parsed under.

use std::borrow::Cow;
use std::ops::Range;

use super::float::parse_f64;

/// The metric type a `# TYPE` line declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    GaugeHistogram,
    Summary,
    Info,
    StateSet,
    /// `untyped` (0.0.4), `unknown` (OpenMetrics), or no TYPE line at all.
    Untyped,
}

impl MetricType {
    pub(super) fn from_token(s: &str) -> Option<MetricType> {
        Some(match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "gaugehistogram" => MetricType::GaugeHistogram,
            "summary" => MetricType::Summary,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "untyped" | "unknown" => MetricType::Untyped,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::Untyped => "untyped",
        }
    }

    /// Sample-name suffixes that belong to a family of this type.
    pub(super) fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Counter => &["_total", "_created"],
            MetricType::Histogram | MetricType::GaugeHistogram => {
                &["_bucket", "_sum", "_count", "_created", "_gcount", "_gsum"]
            }
            MetricType::Summary => &["_sum", "_count", "_created"],
            MetricType::Info => &["_info"],
            _ => &[],
        }
    }
}

/// One metric family: a name, a type and optional help text.
#[derive(Debug, Clone, PartialEq)]
pub struct Family<'a> {
    pub name: &'a str,
    pub kind: MetricType,
    /// HELP text with `\\` and `\n` unescaped.
    pub help: Option<Cow<'a, str>>,
    /// Number of samples that belong to this family.
    pub samples: usize,
}

/// One label pair; the value is unescaped (`\\`, `\"`, `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label<'a> {
    pub name: &'a str,
    pub value: Cow<'a, str>,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// The full sample name, e.g. `vllm:time_to_first_token_seconds_bucket`.
    pub name: &'a str,
    /// Index into [`Exposition::families`].
    pub family: u32,
    /// Range into [`Exposition::labels`].
    pub labels: Range<u32>,
    pub value: f64,
    /// The optional timestamp as written (milliseconds in 0.0.4, seconds in OpenMetrics).
    pub timestamp: Option<f64>,
    /// 1-based line number in the body.
    pub line: u32,
}

/// A series that appeared twice in one scrape; the first sample wins, as in Prometheus.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplicate {
    pub line: u32,
    pub first_line: u32,
    pub series: String,
}

/// A parsed scrape body.
#[derive(Debug, Clone, Default)]
pub struct Exposition<'a> {
    pub families: Vec<Family<'a>>,
    pub samples: Vec<Sample<'a>>,
    pub labels: Vec<Label<'a>>,
    /// Duplicate series (reported, not fatal). Their samples are not in `samples`.
    pub duplicates: Vec<Duplicate>,
}

impl<'a> Exposition<'a> {
    /// The labels of one sample.
    pub fn labels_of(&self, s: &Sample<'a>) -> &[Label<'a>] {
        &self.labels[s.labels.start as usize..s.labels.end as usize]
    }

    /// The value of label `name` on sample `s`, if present.
    pub fn label<'s>(&'s self, s: &Sample<'a>, name: &str) -> Option<&'s str> {
        self.labels_of(s).iter().find(|l| l.name == name).map(|l| l.value.as_ref())
    }

    /// The value of label `name` read as a Prometheus float, so that `le="2"` and
    /// `le="2.0"` (or `quantile="0.50"` and `"0.5"`) compare equal.
    pub fn label_f64(&self, s: &Sample<'a>, name: &str) -> Option<f64> {
        self.label(s, name).and_then(parse_f64)
    }

    /// The family a sample belongs to.
    pub fn family_of(&self, s: &Sample<'a>) -> &Family<'a> {
        &self.families[s.family as usize]
    }

    /// Renders a sample's series identity as `name{a="b",…}` (for messages).
    pub fn series_string(&self, s: &Sample<'a>) -> String {
        render_series(s.name, self.labels_of(s))
    }
}

pub(crate) fn render_series(name: &str, labels: &[Label<'_>]) -> String {
    let mut out = String::with_capacity(name.len() + 16 * labels.len());
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, l) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(l.name);
            out.push_str("=\"");
            for c in l.value.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    out
}

/// The longest label value a scrape may bring, and the longest a record from the request
/// path may put into a label (docs/limits.md).
pub const MAX_LABEL_VALUE_BYTES: usize = 4096;

/// Bounds that protect the daemon from a hostile or broken target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_samples: usize,
    pub max_label_name_bytes: usize,
    pub max_label_value_bytes: usize,
    pub max_labels_per_sample: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 64 << 20,
            max_samples: 1_000_000,
            max_label_name_bytes: 256,
            max_label_value_bytes: MAX_LABEL_VALUE_BYTES,
            max_labels_per_sample: 64,
        }
    }
}

impl Limits {
    /// No limits: for offline tools (`inspect`, benchmarks) on trusted files.
    pub fn unlimited() -> Self {
        Limits {
            max_body_bytes: usize::MAX,
            max_samples: usize::MAX,
            max_label_name_bytes: usize::MAX,
            max_label_value_bytes: usize::MAX,
            max_labels_per_sample: usize::MAX,
        }
    }
}
