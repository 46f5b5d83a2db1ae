//! SLOs: the one definition ([`Slo`], with its [`Scope`] and [`Objective`]), and the math
//! on windowed histogram increases: per-clause attainment with honest bounds, joint
//! attainment bounded from the marginals, goodput and error-budget burn.
//!
//! Pure functions of their inputs. The window layer supplies raw increases (first to
//! last scrape inside the window, resets handled): a ratio of raw increases needs no
//! extrapolation, and a bracket built from them provably contains the true share of the
//! requests observed in the window (docs/architecture.md#ratios-from-raw-increases).

mod attainment;
mod joint;
mod spec;

pub use attainment::{attainment, threshold_on_boundary};
pub use joint::{burn_rate, joint, restate};
pub use spec::{Objective, Scope, Slo};

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

/// One clause of an SLO, or all of them together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clause {
    Ttft,
    Tpot,
    E2e,
    Joint,
}

impl Clause {
    pub fn as_str(self) -> &'static str {
        match self {
            Clause::Ttft => "ttft",
            Clause::Tpot => "tpot",
            Clause::E2e => "e2e",
            Clause::Joint => "joint",
        }
    }
}
