//! The error-budget families: each SLO's budget over its period, per target, model and
//! source (docs/metrics.md#error-budget-over-a-period).

use super::emit::{Collect, Emit, ExportSample, Finite, Labels};
use super::registry::{Family, Unit};
use crate::budget::BudgetReport;
use crate::duration::format_duration;

pub const REMAINING: &str = "llm_slo_error_budget_remaining_ratio";
pub const CONSUMED: &str = "llm_slo_error_budget_consumed_ratio";
pub const PERIOD_REQUESTS: &str = "llm_slo_error_budget_period_requests";
pub const PERIOD_COVERAGE: &str = "llm_slo_error_budget_period_coverage_ratio";

crate::label_set! {
    pub Bounded = [target, model, slo, source, period, bound];
    pub Period = [target, model, slo, source, period];
}

/// Every family this module emits, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Bounded>(
        REMAINING,
        Unit::Ratio,
        "Share of the SLO's error budget left over its period: 1 - consumed; negative once overspent.",
    ),
    Family::gauge::<Bounded>(
        CONSUMED,
        Unit::Ratio,
        "Share of the SLO's error budget spent over its period: (1 - attainment over the period) / (1 - objective).",
    ),
    Family::gauge::<Period>(PERIOD_REQUESTS, Unit::Requests, "Requests the SLO judged over its period."),
    Family::gauge::<Period>(
        PERIOD_COVERAGE,
        Unit::Ratio,
        "Share of the SLO's period the budget has data for: below 1 until the daemon has counted a whole period.",
    ),
];

/// The samples of every budget, grouped by family.
pub fn samples(budgets: &[BudgetReport]) -> Vec<ExportSample> {
    let mut out = Collect::new(|name| FAMILIES.iter().position(|f| f.name == name));
    emit(budgets, &mut Finite(&mut out));
    out.finish()
}

/// Emits every budget's samples, budget by budget.
pub fn emit(budgets: &[BudgetReport], out: &mut impl Emit) {
    for b in budgets {
        let period = format_duration(b.period);
        let labels = [
            ("target", b.target.as_str()),
            ("model", b.model.as_str()),
            ("slo", b.slo.as_str()),
            ("source", b.source.as_str()),
            ("period", period.as_str()),
        ];
        out.sample(PERIOD_COVERAGE, Labels::new(&labels, &[]), b.coverage);
        let Some(v) = &b.values else { continue };
        for (family, bounded) in [(REMAINING, v.remaining), (CONSUMED, v.consumed)] {
            for (bound, value) in bounded.labelled() {
                out.sample(family, Labels::new(&labels, &[("bound", bound)]), value);
            }
        }
        out.sample(PERIOD_REQUESTS, Labels::new(&labels, &[]), v.requests);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::budget::Values;
    use crate::request::DataSource;
    use crate::slo::Bounded;

    fn report(values: Option<Values>) -> BudgetReport {
        BudgetReport {
            target: "t".into(),
            model: "m".into(),
            slo: "chat".into(),
            source: DataSource::Metrics,
            objective: 0.99,
            period: Duration::from_secs(28 * 86_400),
            coverage: 0.25,
            values,
        }
    }

    #[test]
    fn each_budget_is_four_families_with_bounds_where_bracketed() {
        let consumed = Bounded { lower: 0.5, estimate: 0.75, upper: 1.5 };
        let remaining = Bounded { lower: -0.5, estimate: 0.25, upper: 0.5 };
        let v = Values { requests: 1000.0, attainment: Bounded::exact(0.99), consumed, remaining };
        let s = samples(&[report(Some(v))]);
        let names: Vec<&str> = s.iter().map(|x| x.name).collect();
        assert_eq!(
            names,
            [REMAINING, REMAINING, REMAINING, CONSUMED, CONSUMED, CONSUMED, PERIOD_REQUESTS, PERIOD_COVERAGE]
        );
        let lower = &s[0];
        assert_eq!(lower.value, -0.5);
        let label = |x: &ExportSample, k: &str| x.labels.iter().find(|l| l.0 == k).map(|l| l.1.clone());
        assert_eq!(label(lower, "bound").as_deref(), Some("lower"));
        assert_eq!(label(lower, "period").as_deref(), Some("28d"));
        assert_eq!(label(lower, "source").as_deref(), Some("metrics"));
        assert_eq!(label(&s[7], "bound"), None);
        assert_eq!((s[6].value, s[7].value), (1000.0, 0.25));
        // Nothing to judge yet: only how much of the period is covered.
        let s = samples(&[report(None)]);
        assert_eq!(s.iter().map(|x| x.name).collect::<Vec<_>>(), [PERIOD_COVERAGE]);
        assert!(FAMILIES.iter().all(|f| super::super::family_meta(f.name) == Some(f.meta())));
    }
}
