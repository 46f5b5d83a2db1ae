//! What `goodput check --probe` says about one scraped target: SLO thresholds that fall
//! between bucket boundaries (attainment is then a bracket, not an exact count) and SLO
//! clauses the engine cannot evaluate (docs/config.md). Pure: a snapshot in, findings out.

use std::fmt;

use crate::canonical::Snapshot;
use crate::evaluate::slo::{histogram_of, missing_reason};
use crate::slo::{Slo, threshold_on_boundary};

/// One thing worth telling the user about a target's SLO coverage.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The threshold lies strictly between two boundaries (`upper` is `+Inf` above the
    /// highest finite one; `lower` is 0 below the lowest).
    BetweenBuckets {
        target: String,
        model: String,
        slo: String,
        clause: &'static str,
        threshold: f64,
        lower: f64,
        upper: f64,
    },
    /// The engine exposes no histogram for the clause.
    NotEvaluable { target: String, model: String, slo: String, clause: &'static str, reason: &'static str },
    /// An SLO applies to this target, but none of the models it serves.
    NoModel { target: String, slo: String, served: Vec<String> },
    /// The engine has no latency histograms at all (llama.cpp): every SLO that applies is
    /// judged only from requests. `sources` are the request sources configured for the
    /// target (`tap`, `spans`); none means nothing can judge it.
    RequestPathOnly { target: String, note: String, sources: Vec<&'static str> },
}

/// Seconds the way configs spell them: `250ms`, `12.5ms`, `1.5s`.
pub fn seconds(s: f64) -> String {
    if s < 1.0 { format!("{}ms", round(s * 1000.0)) } else { format!("{}s", round(s)) }
}

/// Drops float noise (0.1 * 1000 = 100.00000000000001) without hiding real digits.
fn round(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::BetweenBuckets { target, model, slo, clause, threshold, lower, upper } => {
                write!(f, "target {target} model {model:?}, slo {slo}: {clause} {} ", seconds(*threshold))?;
                if upper.is_infinite() {
                    return write!(
                        f,
                        "is above the highest bucket {lower}: attainment's upper bound is 1 and its estimate the lower bound; use {} for an exact count",
                        seconds(*lower)
                    );
                }
                // The nearer boundary is the smallest change to the SLO; 0 is not a usable one.
                let nearest = if *lower > 0.0 && threshold - lower <= upper - threshold { *lower } else { *upper };
                write!(
                    f,
                    "is between buckets {lower} and {upper}: attainment is bracketed, not exact; use {} for an exact count",
                    seconds(nearest)
                )
            }
            Finding::NotEvaluable { target, model, slo, clause, reason } => {
                write!(
                    f,
                    "target {target} model {model:?}, slo {slo}: the {clause} clause cannot be evaluated: {reason}"
                )
            }
            Finding::RequestPathOnly { target, note, sources } if sources.is_empty() => write!(
                f,
                "target {target}: {note}; none is configured for it, so its SLOs cannot be judged: add a `tap:` to the target"
            ),
            Finding::RequestPathOnly { target, note, sources } => {
                write!(f, "target {target}: {note}; its SLOs are judged from the {}", sources.join(" and "))
            }
            Finding::NoModel { target, slo, served } => write!(
                f,
                "target {target}, slo {slo}: selects none of the models the target serves ({}); check its `models`",
                served.join(", ")
            ),
        }
    }
}

/// Findings for every SLO that applies to `target`, against the models in `snap`.
/// `request_sources` are the request sources configured for the target (`tap`, `spans`),
/// said once for an engine without latency histograms instead of every clause.
pub fn findings(slos: &[Slo], target: &str, snap: &Snapshot, request_sources: &[&'static str]) -> Vec<Finding> {
    let mut out = Vec::new();
    let applying = || slos.iter().filter(|s| s.scope.applies_to_target(target));
    let request_path_only = snap.engine.request_path_note().filter(|_| applying().next().is_some());
    if let Some(note) = request_path_only.clone() {
        out.push(Finding::RequestPathOnly { target: target.into(), note, sources: request_sources.to_vec() });
    }
    for slo in applying() {
        let models: Vec<_> = snap.models.iter().filter(|(m, _)| slo.scope.applies_to_model(m)).collect();
        if models.is_empty() {
            out.push(Finding::NoModel {
                target: target.into(),
                slo: slo.name.clone(),
                served: snap.models.keys().cloned().collect(),
            });
        }
        for (model, m) in models {
            for (clause, threshold) in slo.clauses() {
                let (kind, threshold) = (histogram_of(clause), threshold.as_secs_f64());
                let Some(h) = m.histogram_total(kind) else {
                    if request_path_only.is_some() {
                        continue;
                    }
                    let reason = missing_reason(kind);
                    out.push(Finding::NotEvaluable {
                        target: target.into(),
                        model: model.clone(),
                        slo: slo.name.clone(),
                        clause: clause.as_str(),
                        reason,
                    });
                    continue;
                };
                if threshold_on_boundary(&h, threshold).is_some() {
                    continue;
                }
                let finite = || h.buckets.iter().map(|b| b.le).filter(|le| le.is_finite());
                let lower = finite().filter(|&le| le < threshold).fold(0.0, f64::max);
                let upper = finite().filter(|&le| le > threshold).fold(f64::INFINITY, f64::min);
                out.push(Finding::BetweenBuckets {
                    target: target.into(),
                    model: model.clone(),
                    slo: slo.name.clone(),
                    clause: clause.as_str(),
                    threshold,
                    lower,
                    upper,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_read_like_config() {
        assert_eq!(seconds(0.25), "250ms");
        assert_eq!(seconds(0.1), "100ms");
        assert_eq!(seconds(0.0125), "12.5ms");
        assert_eq!(seconds(2.5), "2.5s");
    }

    #[test]
    fn nearest_boundary_is_suggested() {
        let f = |threshold, lower, upper| {
            Finding::BetweenBuckets {
                target: "t".into(),
                model: "m".into(),
                slo: "s".into(),
                clause: "ttft",
                threshold,
                lower,
                upper,
            }
            .to_string()
        };
        let s = f(0.2, 0.1, 0.25);
        assert!(
            s.contains("ttft 200ms is between buckets 0.1 and 0.25") && s.ends_with("use 250ms for an exact count")
        );
        assert!(f(0.12, 0.1, 0.25).ends_with("use 100ms for an exact count"));
        // Below the lowest bound the lower neighbour is 0, never a suggestion.
        assert!(f(0.0001, 0.0, 0.001).ends_with("use 1ms for an exact count"));
        assert!(f(9000.0, 2560.0, f64::INFINITY).contains("above the highest bucket 2560"));
    }
}
