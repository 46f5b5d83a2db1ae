//! Whether an SLO is met over a window, as every output reports it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::slo::{Bounded, Clause};

/// Whether an SLO could be evaluated, and what came out.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SloStatus {
    Evaluated(SloValues),
    /// The engine lacks a quantity a clause needs (TGI has no TTFT), or the scrape's
    /// histogram was unusable (no `+Inf` bucket, NaN counts); never silently passed.
    NotEvaluable {
        reason: String,
    },
    /// No request finished in the window, so there is no share to report.
    NoTraffic,
}

#[derive(Debug, Clone, Serialize)]
pub struct SloValues {
    /// Per clause, and `joint` for all clauses together with failures counted as bad.
    pub attainment: BTreeMap<Clause, Bounded>,
    pub burn_rate: Bounded,
    pub goodput_requests_per_second: Option<Bounded>,
    pub goodput_tokens_per_second: Option<Bounded>,
    /// Requests finished in the window (raw increase), and how many of them failed.
    pub requests: f64,
    pub failed: f64,
}
