//! An SLO's error budget over its period, as the budget book reports it for one target,
//! model and source (docs/budgets.md).

use std::time::Duration;

use serde::Serialize;

use super::request::DataSource;
use crate::slo::Bounded;

/// One SLO's budget over its period, for one target, model and source.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetReport {
    pub target: String,
    pub model: String,
    pub slo: String,
    pub source: DataSource,
    pub objective: f64,
    #[serde(serialize_with = "serialize_duration")]
    pub period: Duration,
    /// Share of the period that has data: below 1 until the daemon has counted a whole
    /// period (its counts start when it does).
    pub coverage: f64,
    /// `None` while the period has no request to judge.
    pub values: Option<Values>,
}

/// A period's values (the budget tally's `PeriodValues`), serializable.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Values {
    pub requests: f64,
    pub attainment: Bounded,
    pub consumed: Bounded,
    pub remaining: Bounded,
}

fn serialize_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::duration::format_duration(*d))
}
