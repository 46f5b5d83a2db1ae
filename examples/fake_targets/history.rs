//! The fake targets' past, written as OpenMetrics for `promtool tsdb create-blocks-from
//! openmetrics`, so a Prometheus can start with full windows instead of filling them for
//! six hours (`scripts/bench/versus-prometheus.sh`, docs/footprint.md).
//!
//! Values are the ones the live server would have served at each past instant (the same
//! [`Template`] and the same anchor), so backfilled and live samples join without a jump.
//! Every sample carries the labels the benchmark's Prometheus scrape config gives the
//! live series (`job`, `instance`, `target`), and no `# TYPE` lines: stored samples do not
//! need them, and the live scrapes bring the metadata.

use std::io::Write;

use super::template::Template;

/// What to write: targets `0..targets`, one exposition each every `step_ms` in
/// `[from_ms, to_ms]` (Unix ms), values as the server anchored at `anchor_ms` renders them.
pub struct History<'a> {
    pub template: &'a Template,
    pub targets: usize,
    pub anchor_ms: i64,
    pub from_ms: i64,
    pub to_ms: i64,
    pub step_ms: i64,
    pub ramp_s: f64,
    pub job: &'a str,
    pub instance: &'a str,
}

impl History<'_> {
    /// Writes the whole history, oldest instant first (each series' samples must be in
    /// time order for the block writer), then `# EOF`.
    pub fn write(&self, out: &mut impl Write) -> std::io::Result<u64> {
        let mut samples = 0u64;
        let mut buf = String::new();
        let mut t = self.from_ms;
        while t <= self.to_ms {
            for i in 0..self.targets {
                let factor = super::template::factor(t - self.anchor_ms, i, self.ramp_s);
                let body = self.template.render(factor);
                let labels = format!("job=\"{}\",instance=\"{}\",target=\"t{i}\"", self.job, self.instance);
                buf.clear();
                for line in body.lines() {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    if let Some(l) = with_labels(line, &labels, t) {
                        buf.push_str(&l);
                        buf.push('\n');
                        samples += 1;
                    }
                }
                out.write_all(buf.as_bytes())?;
            }
            t += self.step_ms;
        }
        out.write_all(b"# EOF\n")?;
        Ok(samples)
    }
}

/// `name{a="b"} v` → `name{LABELS,a="b"} v T`, with `T` in seconds. `None` for a line that
/// is not a sample (no value after the last space).
fn with_labels(line: &str, labels: &str, t_ms: i64) -> Option<String> {
    let value_at = line.rfind(' ')?;
    let (series, value) = (&line[..value_at], &line[value_at + 1..]);
    let ts = format!("{}.{:03}", t_ms.div_euclid(1000), t_ms.rem_euclid(1000));
    Some(match series.find('{') {
        Some(brace) if series.ends_with("{}") => format!("{}{{{labels}}} {value} {ts}", &series[..brace]),
        Some(brace) => format!("{}{{{labels},{} {value} {ts}", &series[..brace], &series[brace + 1..]),
        None => format!("{series}{{{labels}}} {value} {ts}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_go_first_and_the_time_last() {
        let l = "job=\"f\",target=\"t0\"";
        assert_eq!(with_labels("x_total 5", l, 1_500).unwrap(), "x_total{job=\"f\",target=\"t0\"} 5 1.500");
        assert_eq!(
            with_labels("h_bucket{le=\"+Inf\"} 7", l, 2_000).unwrap(),
            "h_bucket{job=\"f\",target=\"t0\",le=\"+Inf\"} 7 2.000"
        );
        assert_eq!(with_labels("g{} 0.5", l, 0).unwrap(), "g{job=\"f\",target=\"t0\"} 0.5 0.000");
    }
}
