//! The config's limits as gauges (docs/metrics.md#slo-and-kv-band-limits): each SLO's
//! objective and clause thresholds, and the KV-cache band limits.
//!
//! They are exported once per report, without `target`, `model` or `window`: a limit is
//! the same wherever it applies, and repeating it per target would multiply series for
//! nothing. Which targets and models an SLO judges is not a label here; it is the set of
//! (`target`, `model`) pairs whose `llm_slo_evaluable{slo}` exists, and a query restricts
//! a limit to a target with `and on (slo) llm_slo_evaluable{target="…"}`.

use super::{Collect, Emit, ExportSample, Labels};
use crate::report::Limits;

pub const OBJECTIVE: &str = "llm_slo_objective_ratio";
pub const THRESHOLD: &str = "llm_slo_threshold_seconds";
pub const KV_BAND_LIMIT: &str = "llm_slo_kv_cache_band_limit_ratio";

/// The limit families, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        OBJECTIVE,
        "The SLO's objective from the config: the share of requests that must meet every clause (no target or window).",
        "gauge",
    ),
    (
        THRESHOLD,
        "The latency limit of one SLO clause (ttft, tpot, e2e) from the config (no target or window).",
        "gauge",
    ),
    (
        KV_BAND_LIMIT,
        "KV-cache band limits from the config (0-1): usage below underloaded is underloaded, target_low to target_high is the target band, above critical is critical.",
        "gauge",
    ),
];

/// HELP text and TYPE of a limit family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}

/// Every limit of the config, family by family, SLOs in config order.
pub fn samples(limits: &Limits) -> Vec<ExportSample> {
    let mut out = Collect::new(|name| FAMILIES.iter().position(|f| f.0 == name));
    emit(limits, &mut out);
    out.finish()
}

/// Emits every limit of the config, family by family, SLOs in config order.
pub fn emit(limits: &Limits, out: &mut impl Emit) {
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
