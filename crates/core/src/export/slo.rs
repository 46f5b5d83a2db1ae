//! The SLO values of one window as samples, shared by the histogram-derived series
//! (`source="metrics"`) and the request-derived ones (`source="tap|otlp"`, [`super::requests`]).

use super::emit::{Emit, Label, Labels};
use super::families::{ATTAINMENT, BURN_RATE, GOODPUT_REQUESTS, GOODPUT_TOKENS, SLO_EVALUABLE};
use crate::report::{SloStatus, SloValues};

/// `source="metrics"`: the label that tells the histogram-derived quantiles, throughput,
/// attainment, goodput, burn rate and window counts from the request-derived ones beside
/// them (`tap`, `otlp`; [`super::requests`]).
pub(crate) const METRICS: Label<'static> = ("source", "metrics");

/// Whether one SLO could be evaluated (a window without traffic could; one missing a
/// histogram or a measured clause could not), then its values when it has them; `slo` is
/// the `source` and `slo` labels. Returns the values written.
pub(crate) fn slo_status<'r>(
    base: &[Label<'_>],
    slo: &[Label<'_>; 2],
    status: &'r SloStatus,
    out: &mut impl Emit,
) -> Option<&'r SloValues> {
    let evaluable = !matches!(status, SloStatus::NotEvaluable { .. });
    out.sample(SLO_EVALUABLE, Labels::new(base, slo), if evaluable { 1.0 } else { 0.0 });
    let SloStatus::Evaluated(values) = status else { return None };
    slo_values(base, slo, values, out);
    Some(values)
}

/// Attainment per clause, goodput and burn rate of one SLO, each with its bounds; `slo` is
/// the `source` and `slo` labels.
fn slo_values(base: &[Label<'_>], slo: &[Label<'_>; 2], values: &SloValues, out: &mut impl Emit) {
    for (clause, b) in &values.attainment {
        for (bound, v) in b.labelled() {
            let own = [slo[0], slo[1], ("clause", clause.as_str()), ("bound", bound)];
            out.sample(ATTAINMENT, Labels::new(base, &own), v);
        }
    }
    for (family, b) in
        [(GOODPUT_TOKENS, values.goodput_tokens_per_second), (GOODPUT_REQUESTS, values.goodput_requests_per_second)]
    {
        for (bound, v) in b.iter().flat_map(|b| b.labelled()) {
            out.sample(family, Labels::new(base, &[slo[0], slo[1], ("bound", bound)]), v);
        }
    }
    for (bound, v) in values.burn_rate.labelled() {
        out.sample(BURN_RATE, Labels::new(base, &[slo[0], slo[1], ("bound", bound)]), v);
    }
}
