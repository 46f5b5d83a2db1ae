//! A template exposition whose counters advance: shared by the fake targets and the
//! steady-state cost example.
//!
//! Counter-like samples (those of `counter` and `histogram` families, except `_created`)
//! render as `base × factor`, floored when `base` is an integer. Scaling every sample of a
//! histogram by one factor keeps buckets cumulative and `_count` equal to the `+Inf`
//! bucket; flooring is monotone, so it keeps that too. Gauges stay as given.

/// How many distinct phases the fake targets have: targets `i` and `i + PHASES` serve the
/// same values at the same instant.
#[allow(dead_code)] // used by fill_state only
pub const PHASES: usize = 97;

/// The scale of fake target `i`'s counters `elapsed_ms` after its anchor: they grow
/// linearly (a constant rate), with a per-target phase so that no two of [`PHASES`]
/// consecutive targets serve the same exposition.
#[allow(dead_code)] // steady_state renders by its own clock
pub fn factor(elapsed_ms: i64, i: usize, ramp_s: f64) -> f64 {
    let t = elapsed_ms as f64 / 1000.0 + (i % PHASES) as f64 * 0.731;
    1.0 + t / ramp_s
}

/// How one sample's value changes over time.
#[derive(Clone, Copy)]
enum Kind {
    /// A counter-like integer: floored after scaling.
    Int,
    /// A counter-like float (`_sum`).
    Float,
}

/// Text up to a value, then the value to render (or nothing at the end).
struct Segment {
    literal: String,
    value: Option<(f64, Kind)>,
}

pub struct Template {
    segments: Vec<Segment>,
    len_hint: usize,
}

impl Template {
    pub fn parse(text: &str) -> Template {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut family_advances = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let kind = rest.split_whitespace().nth(1).unwrap_or("");
                family_advances = kind == "counter" || kind == "histogram";
            }
            let advancing = !line.starts_with('#') && family_advances;
            let split = line.rfind(' ').filter(|_| advancing);
            let parsed = split.and_then(|i| line[i + 1..].parse::<f64>().ok().map(|v| (i, v)));
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            match parsed {
                Some((i, v)) if v.is_finite() && !line[..name_end].ends_with("_created") => {
                    literal.push_str(&line[..=i]);
                    let kind = if v.fract() == 0.0 { Kind::Int } else { Kind::Float };
                    segments.push(Segment { literal: std::mem::take(&mut literal), value: Some((v, kind)) });
                    literal.push('\n');
                }
                _ => {
                    literal.push_str(line);
                    literal.push('\n');
                }
            }
        }
        segments.push(Segment { literal, value: None });
        Template { segments, len_hint: text.len() + 1024 }
    }

    pub fn render(&self, factor: f64) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(self.len_hint);
        for s in &self.segments {
            out.push_str(&s.literal);
            match s.value {
                Some((v, Kind::Int)) => {
                    let _ = write!(out, "{}", (v * factor).floor());
                }
                Some((v, Kind::Float)) => {
                    let _ = write!(out, "{}", v * factor);
                }
                None => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 5\nh_sum 2.5\nh_count 5\n\
                        # TYPE h_created gauge\nh_created 17.0\n# TYPE g gauge\ng 0.4\n";

    #[test]
    fn scales_counters_and_keeps_gauges() {
        let t = Template::parse(TEXT);
        let out = t.render(2.5);
        // 3×2.5 = 7.5 → 7, 5×2.5 = 12.5 → 12, 2.5×2.5 = 6.25; gauges and _created unchanged.
        assert_eq!(
            out,
            "# TYPE h histogram\nh_bucket{le=\"1\"} 7\nh_bucket{le=\"+Inf\"} 12\nh_sum 6.25\nh_count 12\n\
             # TYPE h_created gauge\nh_created 17.0\n# TYPE g gauge\ng 0.4\n"
        );
        assert_eq!(t.render(1.0), TEXT);
    }
}
