//! Text-exposition writing shared by the three engine formats.
//!
//! Label sets are rendered sorted by name, as prometheus_client does (and as every real
//! vLLM/SGLang scrape shows). Numbers go through a per-format formatter.

use std::fmt::Write;

use super::hist::Histogram;

/// One series' labels, unsorted; rendering sorts them.
pub type Labels = Vec<(&'static str, String)>;

/// How numbers, histograms and counters look in one exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// prometheus_client, single process: `_created` gauge families, `_count` before `_sum`.
    Python,
    /// prometheus_client multiprocess mode (SGLang): no `_created`, `_sum` first.
    PythonMultiprocess,
    /// metrics-exporter-prometheus (TGI): Rust `Display`, blank line after each family.
    Rust,
}

impl Style {
    pub fn num(self, v: f64) -> String {
        match self {
            Style::Python | Style::PythonMultiprocess => super::pyfmt::go_float(v),
            Style::Rust if v == f64::INFINITY => "+Inf".into(),
            Style::Rust => format!("{v}"),
        }
    }
}

pub fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{a="1",b="2"}` sorted by name, with `extra` merged in; empty string for no labels.
pub fn render_labels(labels: &Labels, extra: Option<(&'static str, &str)>) -> String {
    let mut all: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    if let Some(e) = extra {
        all.push(e);
    }
    if all.is_empty() {
        return String::new();
    }
    all.sort_by(|a, b| a.0.cmp(b.0));
    let body: Vec<String> = all.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_value(v))).collect();
    format!("{{{}}}", body.join(","))
}

pub struct Writer {
    pub out: String,
    pub style: Style,
}

impl Writer {
    pub fn new(style: Style) -> Writer {
        Writer { out: String::with_capacity(64 * 1024), style }
    }

    fn header(&mut self, name: &str, help: Option<&str>, kind: &str) {
        if let Some(h) = help {
            let _ = writeln!(self.out, "# HELP {name} {h}");
        }
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn line(&mut self, name: &str, labels: &str, v: f64) {
        let _ = writeln!(self.out, "{name}{labels} {}", self.style.num(v));
    }

    fn end_family(&mut self) {
        if self.style == Style::Rust {
            self.out.push('\n');
        }
    }

    pub fn gauge<'a>(&mut self, name: &str, help: Option<&str>, rows: impl IntoIterator<Item = (&'a Labels, f64)>) {
        self.header(name, help, "gauge");
        for (l, v) in rows {
            let ls = render_labels(l, None);
            self.line(name, &ls, v);
        }
        self.end_family();
    }

    /// A counter `base`: Python styles print `base_total` (+ `base_created`); Rust prints
    /// `base` as TGI does. Values are integral counts.
    pub fn counter<'a>(
        &mut self,
        base: &str,
        help: Option<&str>,
        rows: impl IntoIterator<Item = (&'a Labels, u64)> + Clone,
        created: f64,
    ) {
        let total = match self.style {
            Style::Rust => base.to_string(),
            _ => format!("{base}_total"),
        };
        self.header(&total, help, "counter");
        for (l, v) in rows.clone() {
            let ls = render_labels(l, None);
            self.line(&total, &ls, v as f64);
        }
        self.end_family();
        if self.style == Style::Python {
            self.created(base, help, rows.into_iter().map(|(l, _)| l), created);
        }
    }

    /// A counter from a custom collector (no `_created`), with float values.
    pub fn counter_no_created<'a>(
        &mut self,
        base: &str,
        help: &str,
        rows: impl IntoIterator<Item = (&'a Labels, f64)>,
    ) {
        let total = format!("{base}_total");
        self.header(&total, Some(help), "counter");
        for (l, v) in rows {
            let ls = render_labels(l, None);
            self.line(&total, &ls, v);
        }
        self.end_family();
    }

    fn created<'a>(&mut self, base: &str, help: Option<&str>, labels: impl IntoIterator<Item = &'a Labels>, at: f64) {
        let name = format!("{base}_created");
        self.header(&name, help, "gauge");
        for l in labels {
            let ls = render_labels(l, None);
            self.line(&name, &ls, at);
        }
    }

    pub fn histogram<'a>(
        &mut self,
        name: &str,
        help: Option<&str>,
        rows: impl IntoIterator<Item = (&'a Labels, &'a Histogram)> + Clone,
        created: f64,
    ) {
        self.header(name, help, "histogram");
        let bucket = format!("{name}_bucket");
        let count = format!("{name}_count");
        let sum = format!("{name}_sum");
        for (l, h) in rows.clone() {
            let plain = render_labels(l, None);
            if self.style == Style::PythonMultiprocess {
                self.line(&sum, &plain, h.sum);
            }
            for (le, c) in h.cumulative() {
                let les = self.style.num(le);
                let ls = render_labels(l, Some(("le", &les)));
                self.line(&bucket, &ls, c as f64);
            }
            match self.style {
                Style::Python => {
                    self.line(&count, &plain, h.count() as f64);
                    self.line(&sum, &plain, h.sum);
                }
                Style::PythonMultiprocess => self.line(&count, &plain, h.count() as f64),
                Style::Rust => {
                    self.line(&sum, &plain, h.sum);
                    self.line(&count, &plain, h.count() as f64);
                }
            }
        }
        self.end_family();
        if self.style == Style::Python {
            self.created(name, help, rows.into_iter().map(|(l, _)| l), created);
        }
    }
}
