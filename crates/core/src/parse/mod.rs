//! The Prometheus text exposition parser (format 0.0.4 and OpenMetrics 1.0 text).
//!
//! Our own, not a crate: `prometheus-parse` drops every name containing `:` (all of vLLM
//! and SGLang) and `openmetrics-parser` runs at ~10 MB/s (docs/benchmarks.md#why-not-a-crate).
//! This one borrows from the body (zero-copy, label values are only copied when they
//! contain an escape), finds lines with `memchr`, and never panics on any input: a
//! malformed line rejects the scrape with its line number, as Prometheus does.
//!
//! The result is a flat list of [`Sample`]s, each pointing at the [`Family`] its
//! `# TYPE` declared (or an untyped family of its own), with all labels in one shared
//! vector so that parsing allocates per scrape, not per sample. Duplicate series are
//! found in one pass after the last line (`dedup`), not with a per-sample hash map.
//! docs/benchmarks.md has the measurements; `synth` generates the benchmark body.

mod dedup;
mod error;
mod exposition;
mod float;
mod hash;
mod line;
mod synth;

pub use error::{ParseError, ParseErrorKind};
pub(crate) use exposition::render_series;
pub use exposition::{Duplicate, Exposition, Family, Label, Limits, MAX_LABEL_VALUE_BYTES, MetricType, Sample};
pub use float::parse_f64;
pub use synth::vllm_like_exposition;

use std::collections::HashMap;

/// Parses one exposition body with the given limits.
pub fn parse<'a>(body: &'a [u8], limits: &Limits) -> Result<Exposition<'a>, ParseError> {
    if body.len() > limits.max_body_bytes {
        return Err(ParseError::whole(ParseErrorKind::BodyTooLarge { limit: limits.max_body_bytes, got: body.len() }));
    }
    let text = std::str::from_utf8(body).map_err(|e| {
        let line = 1 + memchr::memchr_iter(b'\n', &body[..e.valid_up_to()]).count();
        ParseError::at(line, ParseErrorKind::InvalidUtf8)
    })?;
    Parser::new(text, *limits).run()
}

struct Parser<'a> {
    text: &'a str,
    limits: Limits,
    out: Exposition<'a>,
    /// Family name → index, for samples that come after another family's lines. Hashed
    /// with seeded foldhash: SipHash was a tenth of parsing a small scrape's HELP/TYPE lines.
    by_name: HashMap<&'a str, u32, foldhash::fast::RandomState>,
    /// The series hash of each sample, in order, for the duplicate pass at the end.
    hashes: Vec<u64>,
    current: Option<u32>,
    names: line::NameCache<'a>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, limits: Limits) -> Self {
        let approx_lines = text.len() / 64 + 1;
        Parser {
            text,
            limits,
            out: Exposition {
                families: Vec::new(),
                samples: Vec::with_capacity(approx_lines.min(1 << 20)),
                labels: Vec::with_capacity((approx_lines * 2).min(1 << 21)),
                duplicates: Vec::new(),
            },
            by_name: HashMap::default(),
            hashes: Vec::with_capacity(approx_lines.min(1 << 20)),
            current: None,
            names: line::NameCache::default(),
        }
    }

    fn run(mut self) -> Result<Exposition<'a>, ParseError> {
        let bytes = self.text.as_bytes();
        let mut start = 0usize;
        let mut lineno = 0u32;
        while start < bytes.len() {
            lineno = lineno.saturating_add(1);
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            let mut line = &self.text[start..end];
            start = end + 1;
            if let Some(l) = line.strip_suffix('\r') {
                line = l;
            }
            // Go's text parser skips leading blanks; a line of blanks is a blank line.
            if line.starts_with([' ', '\t']) {
                line = line.trim_start_matches([' ', '\t']);
            }
            if line.is_empty() {
                continue;
            }
            if line.as_bytes()[0] == b'#' {
                if self.comment(line, lineno)? {
                    break;
                }
            } else {
                self.sample(line, lineno)?;
            }
        }
        dedup::remove_duplicates(&mut self.out, &self.hashes);
        Ok(self.out)
    }

    /// Handles a `#` line; returns true at `# EOF`.
    fn comment(&mut self, line: &'a str, lineno: u32) -> Result<bool, ParseError> {
        let rest = line[1..].trim_start_matches([' ', '\t']);
        if rest == "EOF" {
            return Ok(true);
        }
        let (keyword, rest) = split_token(rest);
        match keyword {
            "HELP" | "TYPE" | "UNIT" => {}
            _ => return Ok(false), // a plain comment
        }
        let (name, rest) = split_token(rest);
        if name.is_empty() {
            return Err(ParseError::at(lineno, ParseErrorKind::Syntax(format!("{keyword} without a metric name"))));
        }
        if !line::is_metric_name(name) {
            return Err(ParseError::at(lineno, ParseErrorKind::InvalidMetricName(name.to_string())));
        }
        match keyword {
            "TYPE" => {
                let kind = MetricType::from_token(rest.trim()).ok_or_else(|| {
                    ParseError::at(lineno, ParseErrorKind::Syntax(format!("unknown metric type {:?}", rest.trim())))
                })?;
                let idx = self.family_entry(name);
                self.out.families[idx as usize].kind = kind;
                self.current = Some(idx);
            }
            "HELP" => {
                let idx = self.family_entry(name);
                self.out.families[idx as usize].help = Some(line::unescape_help(rest));
                self.current = Some(idx);
            }
            _ => {} // UNIT carries nothing we use
        }
        Ok(false)
    }

    fn family_entry(&mut self, name: &'a str) -> u32 {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.out.families.len() as u32;
        self.out.families.push(Family { name, kind: MetricType::Untyped, help: None, samples: 0 });
        self.by_name.insert(name, i);
        i
    }

    /// The family a sample named `name` belongs to: the current family when the name
    /// matches it (with a type-appropriate suffix), else any earlier family that does,
    /// else a new untyped family named after the sample.
    fn family_for(&mut self, name: &'a str) -> u32 {
        if let Some(cur) = self.current
            && belongs(&self.out.families[cur as usize], name)
        {
            return cur;
        }
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        for suffix in ["_bucket", "_sum", "_count", "_total", "_created", "_gcount", "_gsum", "_info"] {
            if let Some(base) = name.strip_suffix(suffix)
                && let Some(&i) = self.by_name.get(base)
                && belongs(&self.out.families[i as usize], name)
            {
                return i;
            }
        }
        let i = self.family_entry(name);
        self.current = Some(i);
        i
    }

    fn sample(&mut self, line: &'a str, lineno: u32) -> Result<(), ParseError> {
        let label_start = self.out.labels.len();
        let parsed = line::parse_sample(line, &mut self.out.labels, &self.limits, &mut self.names)
            .map_err(|kind| ParseError::at(lineno as usize, kind))?;
        let family = self.family_for(parsed.name);
        let labels = label_start as u32..self.out.labels.len() as u32;
        let sample = Sample {
            name: parsed.name,
            family,
            labels,
            value: parsed.value,
            timestamp: parsed.timestamp,
            line: lineno,
        };

        if self.out.samples.len() >= self.limits.max_samples.min(u32::MAX as usize) {
            // Duplicates count too, until the final pass removes them.
            return Err(ParseError::at(lineno, ParseErrorKind::TooManySamples { limit: self.limits.max_samples }));
        }
        self.hashes.push(hash::series(parsed.name, &self.out.labels[label_start..]));
        self.out.families[family as usize].samples += 1;
        self.out.samples.push(sample);
        Ok(())
    }
}

fn belongs(f: &Family<'_>, sample: &str) -> bool {
    if sample == f.name {
        return true;
    }
    match sample.strip_prefix(f.name) {
        Some(suffix) => f.kind.suffixes().contains(&suffix),
        None => false,
    }
}

/// Splits off the first whitespace-delimited token; the rest has leading blanks removed.
fn split_token(s: &str) -> (&str, &str) {
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], s[i..].trim_start_matches([' ', '\t'])),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests;
