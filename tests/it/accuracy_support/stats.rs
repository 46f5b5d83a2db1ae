//! Coverage and error statistics over comparison rows.

use goodput::slo::Bounded;

/// Slack for float noise in a ratio of counts.
pub const TOLERANCE: f64 = 1e-12;

pub fn contains(b: &Bounded, v: f64) -> bool {
    b.contains(v, TOLERANCE)
}

/// Coverage and estimate error of a set of (bounds, truth) pairs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub covered: usize,
    pub mean_abs_error: f64,
    pub p95_abs_error: f64,
    pub max_abs_error: f64,
    /// Mean upper − lower.
    pub mean_width: f64,
}

impl Summary {
    pub fn of(pairs: impl Iterator<Item = (Bounded, f64)>) -> Summary {
        let mut errors = Vec::new();
        let (mut covered, mut width) = (0, 0.0);
        for (b, truth) in pairs {
            covered += usize::from(contains(&b, truth));
            width += b.upper - b.lower;
            errors.push((b.estimate - truth).abs());
        }
        let n = errors.len();
        if n == 0 {
            return Summary::default();
        }
        errors.sort_by(f64::total_cmp);
        Summary {
            n,
            covered,
            mean_abs_error: errors.iter().sum::<f64>() / n as f64,
            p95_abs_error: errors[((n as f64 * 0.95).ceil() as usize).clamp(1, n) - 1],
            max_abs_error: errors[n - 1],
            mean_width: width / n as f64,
        }
    }

    pub fn coverage(&self) -> f64 {
        if self.n == 0 { f64::NAN } else { self.covered as f64 / self.n as f64 }
    }
}
