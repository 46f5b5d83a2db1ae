//! The config's limits as gauges (docs/metrics.md#slo-and-kv-band-limits): each SLO's
//! objective and clause thresholds, and the KV-cache band limits.
//!
//! They are exported once per report, without `target`, `model` or `window`: a limit is
//! the same wherever it applies, and repeating it per target would multiply series for
//! nothing. Which targets and models an SLO judges is not a label here; it is the set of
//! (`target`, `model`) pairs whose `llm_slo_evaluable{slo}` exists, and a query restricts
//! a limit to a target with `and on (slo) llm_slo_evaluable{target="…"}`.

use super::emit::{Collect, Emit, ExportSample, Labels};
use super::registry::{Family, Unit};
use crate::report::ConfiguredLimits;

pub const OBJECTIVE: &str = "llm_slo_objective_ratio";
pub const THRESHOLD: &str = "llm_slo_threshold_seconds";
pub const KV_BAND_LIMIT: &str = "llm_slo_kv_cache_band_limit_ratio";

crate::label_set! {
    pub Slo = [slo];
    pub SloClause = [slo, clause];
    pub Limit = [limit];
}

/// The limit families, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Slo>(
        OBJECTIVE,
        Unit::Ratio,
        "The SLO's objective from the config: the share of requests that must meet every clause (no target or window).",
    ),
    Family::gauge::<SloClause>(
        THRESHOLD,
        Unit::Seconds,
        "The latency limit of one SLO clause (ttft, tpot, e2e) from the config (no target or window).",
    ),
    Family::gauge::<Limit>(
        KV_BAND_LIMIT,
        Unit::Ratio,
        "KV-cache band limits from the config (0-1): usage below underloaded is underloaded, target_low to target_high is the target band, above critical is critical.",
    ),
];

/// Every limit of the config, family by family, SLOs in config order.
pub fn samples(limits: &ConfiguredLimits) -> Vec<ExportSample> {
    let mut out = Collect::new(|name| FAMILIES.iter().position(|f| f.name == name));
    emit(limits, &mut out);
    out.finish()
}

/// Emits every limit of the config, family by family, SLOs in config order.
pub fn emit(limits: &ConfiguredLimits, out: &mut impl Emit) {
    for s in &limits.slos {
        out.sample(OBJECTIVE, Labels::new(&[("slo", s.name.as_str())], &[]), s.objective.get());
    }
    for s in &limits.slos {
        for (clause, limit) in s.clauses() {
            let labels = [("slo", s.name.as_str()), ("clause", clause.as_str())];
            out.sample(THRESHOLD, Labels::new(&labels, &[]), limit.as_secs_f64());
        }
    }
    let kv = &limits.kv;
    for (limit, value) in [
        ("underloaded", kv.underloaded),
        ("target_low", kv.target_low),
        ("target_high", kv.target_high),
        ("critical", kv.critical),
    ] {
        out.sample(KV_BAND_LIMIT, Labels::new(&[("limit", limit)], &[]), value);
    }
}
