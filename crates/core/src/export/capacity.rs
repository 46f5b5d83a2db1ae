//! The capacity families: each SLO's capacity with its spread, headroom, the data it rests
//! on, and the saturation signal, per target and model (docs/metrics.md#capacity).

use super::emit::{Collect, Emit, ExportSample, Finite, Labels};
use super::families::{QUANTILE_LABEL, quantile_label};
use super::registry::{Family, LabelValue, Unit};
use crate::capacity::{CapacityReport, Reason};

pub const REQUEST_RATE: &str = "llm_slo_capacity_request_rate";
pub const HEADROOM: &str = "llm_slo_capacity_headroom_ratio";
pub const INTERVALS_USED: &str = "llm_slo_capacity_intervals_used";
pub const AGE: &str = "llm_slo_capacity_age_seconds";
pub const ARRIVAL_RATE: &str = "llm_slo_capacity_arrival_rate";
pub const SATURATED: &str = "llm_slo_saturated";

crate::label_set! {
    /// `bound` only for `method="bounds"`.
    pub Rate = [target, model, slo, q, method, censored, bound];
    pub Slo = [target, model, slo];
    pub Model = [target, model];
    pub Saturated = [target, model, reason: Reason];
}

impl LabelValue for Reason {
    const ALL: &'static [Reason] = &Reason::ALL;
    fn as_str(self) -> &'static str {
        Reason::as_str(self)
    }
}

/// Every family this module emits, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Rate>(
        REQUEST_RATE,
        Unit::RequestsPerSecond,
        "Highest request rate (requests/s) at which the SLO's attainment still met its objective, quantile q of its posterior; method=empirical from requests, bounds from each end of the histogram bracket (bound=lower|upper); censored=true: no failing load seen yet, a lower bound.",
    ),
    Family::gauge::<Slo>(
        HEADROOM,
        Unit::Ratio,
        "Conservative capacity (q=0.1, lower end) over the current arrival rate: below 1 the engine is past the load at which it met the SLO.",
    ),
    Family::gauge::<Slo>(
        INTERVALS_USED,
        Unit::Count,
        "Evaluation intervals of the current workload the capacity estimate rests on.",
    ),
    Family::gauge::<Slo>(
        AGE,
        Unit::Seconds,
        "Request-weighted mean age of the intervals the capacity estimate rests on.",
    ),
    Family::gauge::<Model>(
        ARRIVAL_RATE,
        Unit::RequestsPerSecond,
        "Requests arriving per second in the newest interval: completions plus the change in requests in flight.",
    ),
    Family::gauge::<Saturated>(
        SATURATED,
        Unit::Flag,
        "1 for each reason while the engine is saturated (queue growing while completions lag arrivals, with hysteresis); 0 otherwise.",
    ),
];

/// The samples of every target and model's capacity, grouped by family.
pub fn samples(reports: &[CapacityReport]) -> Vec<ExportSample> {
    let mut out = Collect::new(|name| FAMILIES.iter().position(|f| f.name == name));
    emit(reports, &mut Finite(&mut out));
    out.finish()
}

/// Emits every target and model's capacity, one after the other.
pub fn emit(reports: &[CapacityReport], out: &mut impl Emit) {
    for r in reports {
        let model = [("target", r.target.as_str()), ("model", r.model.as_str())];
        for c in &r.slos {
            let slo = [model[0], model[1], ("slo", c.slo.as_str())];
            for e in &c.estimates {
                for (q, v) in [(0.1, e.p10), (0.5, e.p50), (0.9, e.p90)] {
                    let q = quantile_label(q);
                    let censored = if e.censored { "true" } else { "false" };
                    let own = [(QUANTILE_LABEL, q.as_str()), ("method", c.method.as_str()), ("censored", censored)];
                    match e.end {
                        Some(end) => {
                            let own = [own[0], own[1], own[2], ("bound", end.as_str())];
                            out.sample(REQUEST_RATE, Labels::new(&slo, &own), v);
                        }
                        None => out.sample(REQUEST_RATE, Labels::new(&slo, &own), v),
                    }
                }
            }
            if let Some(h) = c.headroom {
                out.sample(HEADROOM, Labels::new(&slo, &[]), h);
            }
            out.sample(INTERVALS_USED, Labels::new(&slo, &[]), c.intervals_used as f64);
            if let Some(a) = c.age_seconds {
                out.sample(AGE, Labels::new(&slo, &[]), a);
            }
        }
        if let Some(rate) = r.arrival_rate {
            out.sample(ARRIVAL_RATE, Labels::new(&model, &[]), rate);
        }
        for reason in Reason::ALL {
            let value = if r.saturated && r.reasons.contains(&reason) { 1.0 } else { 0.0 };
            out.sample(SATURATED, Labels::new(&model, &[("reason", reason.as_str())]), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{End, Method, RateEstimate, SloCapacity};

    #[test]
    fn bounds_carry_their_end_and_saturation_every_reason() {
        let e = |end, p10| RateEstimate {
            end: Some(end),
            p10,
            p50: p10 + 1.0,
            p90: p10 + 2.0,
            censored: false,
            below_data: false,
            bins: 4,
        };
        let r = CapacityReport {
            target: "a".into(),
            model: "m".into(),
            arrival_rate: Some(4.0),
            rising: true,
            saturated: true,
            reasons: vec![Reason::QueueGrowing, Reason::CompletionsLag],
            slos: vec![SloCapacity {
                slo: "chat".into(),
                objective: 0.95,
                method: Method::Bounds,
                estimates: vec![e(End::Lower, 3.0), e(End::Upper, 4.0)],
                headroom: Some(0.75),
                intervals_used: 40,
                age_seconds: Some(120.0),
            }],
            intervals: 40,
        };
        let s = samples(&[r]);
        let rates: Vec<_> = s.iter().filter(|x| x.name == REQUEST_RATE).collect();
        assert_eq!(rates.len(), 6);
        assert!(rates.iter().any(|x| x.value == 3.0
            && x.labels.contains(&("bound", "lower".into()))
            && x.labels.contains(&("q", "0.1".into()))
            && x.labels.contains(&("censored", "false".into()))));
        let sat: Vec<_> = s.iter().filter(|x| x.name == SATURATED).collect();
        assert_eq!(sat.len(), Reason::ALL.len());
        assert_eq!(sat.iter().filter(|x| x.value == 1.0).count(), 2);
        assert!(s.iter().any(|x| x.name == HEADROOM && x.value == 0.75));
        assert!(FAMILIES.iter().all(|f| super::super::family_meta(f.name) == Some(f.meta())));
    }
}
