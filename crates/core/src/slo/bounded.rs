//! A quantity known only within bounds: every attainment, goodput and burn rate.

use serde::Serialize;

/// A quantity known only within bounds, with a point estimate inside them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bounded {
    pub lower: f64,
    pub estimate: f64,
    pub upper: f64,
}

impl Bounded {
    pub fn exact(v: f64) -> Bounded {
        Bounded { lower: v, estimate: v, upper: v }
    }

    pub fn is_exact(&self) -> bool {
        self.lower == self.upper
    }

    /// Scales every bound by a non-negative factor (attainment × throughput = goodput).
    pub fn scale(self, k: f64) -> Bounded {
        Bounded { lower: self.lower * k, estimate: self.estimate * k, upper: self.upper * k }
    }

    pub fn contains(&self, v: f64, tolerance: f64) -> bool {
        v >= self.lower - tolerance && v <= self.upper + tolerance
    }

    /// `(bound label, value)` in export order.
    pub fn labelled(&self) -> [(&'static str, f64); 3] {
        [("lower", self.lower), ("estimate", self.estimate), ("upper", self.upper)]
    }
}
