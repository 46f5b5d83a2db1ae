//! SLOs: the one definition ([`Slo`], with its [`Scope`] and [`Objective`]), and the math
//! on windowed histogram increases: per-clause attainment with honest bounds, joint
//! attainment bounded from the marginals, goodput and error-budget burn.
//!
//! Pure functions of their inputs. The window layer supplies raw increases (first to
//! last scrape inside the window, resets handled): a ratio of raw increases needs no
//! extrapolation, and a bracket built from them provably contains the true share of the
//! requests observed in the window (docs/architecture.md#ratios-from-raw-increases).

mod attainment;
mod bounded;
mod clause;
mod counts;
mod joint;
#[cfg(test)]
mod paths_tests;
mod spec;

pub use attainment::attainment;
pub use bounded::Bounded;
pub use clause::Clause;
pub use counts::{Attained, HistogramClause, HistogramCounts, good_counts, stops_at, threshold_on_boundary};
pub use joint::{burn_rate, joint, restate};
pub use spec::{Objective, Scope, Slo};
