//! Recording rules: the daemon's quantities, fleet-wide, one series per model and window.
//!
//! Names mirror the daemon's families with a `:` (`llm_slo_attainment_ratio` →
//! `llm_slo:attainment_ratio`) and carry the same `window`, `slo`, `clause`, `bound` and
//! `q` labels, so one dashboard query works on both. Rules are ordered so each reads only series recorded before it.
//! Each latency histogram's bucket rates are recorded once per window
//! (`llm_slo:ttft_seconds_bucket:rate`) and every quantile of it reads them.
//! Quantiles, throughput, attainment, goodput and burn rate carry `source="metrics"` as the
//! daemon's histogram-derived series do. `llm_slo:window_coverage_ratio` records how much of each window holds data, so that
//! the alerts can wait for it as the daemon does (docs/alerts.md#after-a-restart).

use std::collections::BTreeMap;

use super::expr::{
    E2E, FINISHED, GENERATION_TOKENS, Metrics, TPOT, TTFT, clause_histogram, good_finish, le_regex, num,
};
use super::scope::{Fleet, ScopeExpr, join};
use super::types::{PromRule, RulesSpec};
use crate::alert::rule::RuleKind;
use crate::alert::validate::required_windows;
use crate::duration::Window;
use crate::export::QUANTILE_LABEL;
use crate::slo::Slo;

pub const QUANTILES: [&str; 4] = ["0.5", "0.9", "0.95", "0.99"];

/// The daemon's histogram-derived series say `source="metrics"` (its request-derived ones
/// `tap` or `otlp`); the recorded twins say the same, so one query reads both.
const METRICS: (&str, &str) = ("source", "metrics");

fn record(name: &str, expr: String, labels: &[(&str, &str)]) -> PromRule {
    PromRule::Record {
        record: name.to_string(),
        expr,
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }
}

/// The recorded per-model bucket rates of a latency family, with `le`, `model` and `window`:
/// `llm_slo:ttft_seconds` → `llm_slo:ttft_seconds_bucket:rate`.
pub fn bucket_rate(family: &str) -> String {
    format!("{family}_bucket:rate")
}

/// Windows at which quantiles are recorded, and at which SLO quantities are.
pub fn windows(spec: &RulesSpec) -> (Vec<Window>, Vec<Window>) {
    let rules = spec.alerting.rule_set();
    let mut q = spec.windows.clone();
    for r in &rules.rules {
        if let RuleKind::LatencyAboveSlo { window, .. } = r.kind {
            q.push(window);
        }
    }
    let mut all = spec.windows.clone();
    all.extend(required_windows(&rules));
    for v in [&mut q, &mut all] {
        v.sort();
        v.dedup();
    }
    (q, all)
}

pub fn rules(spec: &RulesSpec, slos: &[(&Slo, ScopeExpr)], m: &Metrics) -> Vec<PromRule> {
    let (qwins, wins) = windows(spec);
    let mut out = Vec::new();
    for w in &qwins {
        let wl = w.label();
        for (name, metric) in
            [("llm_slo:ttft_seconds", TTFT), ("llm_slo:tpot_seconds", TPOT), ("llm_slo:e2e_seconds", E2E)]
        {
            // The fleet's bucket rates once per histogram and window; every quantile reads
            // them rather than computing the rate again.
            let rates = bucket_rate(name);
            out.push(record(
                &rates,
                m.sum_by("le, model", "rate", &format!("{metric}_bucket"), "", *w),
                &[("window", &wl)],
            ));
            for q in QUANTILES {
                out.push(record(
                    name,
                    format!("histogram_quantile({q}, {rates}{{window=\"{wl}\"}})"),
                    &[(QUANTILE_LABEL, q), ("window", &wl), METRICS],
                ));
            }
        }
    }
    for w in &wins {
        let wl = w.label();
        let win = [("window", wl.as_str())];
        out.push(record("llm_slo:window_coverage_ratio", m.coverage(*w), &win));
        out.push(record(
            "llm_slo:tokens_per_second",
            m.sum_by("model", "rate", GENERATION_TOKENS, "", *w),
            &[("direction", "output"), ("window", &wl), METRICS],
        ));
        out.push(record(
            "llm_slo:requests_per_second",
            m.sum_by("model", "rate", FINISHED, "", *w),
            &[("window", &wl), METRICS],
        ));
        out.push(record("llm_slo:requests_finished", m.sum_by("model", "increase", FINISHED, "", *w), &win));
        let good = m.sum_by("model", "rate", FINISHED, &good_finish(), *w);
        let all = m.sum_by("model", "rate", FINISHED, "", *w);
        out.push(record("llm_slo:success_ratio", format!("{good} / {all}"), &win));
        for (s, scope) in slos {
            slo_rules(&mut out, &Fleet { m, scope }, s, *w);
        }
    }
    out
}

/// One SLO's attainment, goodput and burn rate at `w`, over the pods and models of its
/// scope only: an out-of-scope model gets no series, so no alert can read one.
fn slo_rules(out: &mut Vec<PromRule>, fleet: &Fleet<'_>, s: &Slo, w: Window) {
    let (m, scope) = (fleet.m, &fleet.scope.engine);
    let wl = w.label();
    let clauses: Vec<(&str, &str, f64)> =
        s.clauses().map(|(c, t)| (c.as_str(), clause_histogram(c), t.as_secs_f64())).collect();
    let att = |clause: &str, bound: Option<&str>| {
        let b = bound.map(|b| format!(", bound=\"{b}\"")).unwrap_or_default();
        format!(
            "llm_slo:attainment_ratio{{slo=\"{}\", clause=\"{clause}\", window=\"{wl}\"{b}, source=\"metrics\"}}",
            s.name
        )
    };
    for (clause, metric, t) in &clauses {
        let le = format!("le=~\"{}\"", le_regex(*t));
        let good = m.sum_by("model", "rate", &format!("{metric}_bucket"), &join(&[&le, scope]), w);
        let all = m.sum_by("model", "rate", &format!("{metric}_count"), scope, w);
        out.push(record(
            "llm_slo:attainment_ratio",
            format!("{good} / {all}"),
            &[("slo", &s.name), ("clause", clause), ("window", &wl), METRICS],
        ));
    }
    // Joint: every clause and a successful finish, as `slo::HistogramCounts::attainment`
    // defines it for the daemon. With `s` the success share (1 − failed), the Fréchet
    // bounds `max(0, Σ lᵢ − (n − 1) − f)` and `min(min uᵢ, 1 − f)` are `Σ aᵢ + s − n`
    // and `min(aᵢ, s)` over the exact clause shares, the estimate `s · Π aᵢ`. The rules
    // do not restate TTFT for the finished population (the daemon does, with the
    // requests in flight at the window's start), so they are the narrower of the two.
    let success = fleet.success(w);
    let mut parts: Vec<String> = clauses.iter().map(|(c, _, _)| att(c, None)).collect();
    parts.push(success.clone());
    let k = parts.len();
    let joint = |bound: &str, expr: String| {
        record(
            "llm_slo:attainment_ratio",
            expr,
            &[("slo", &s.name), ("clause", "joint"), ("bound", bound), ("window", &wl), METRICS],
        )
    };
    out.push(joint("estimate", parts.join(" * on (model) ")));
    out.push(joint("lower", format!("clamp_min({} - {}, 0)", parts.join(" + on (model) "), k - 1)));
    let clause_re: Vec<&str> = clauses.iter().map(|(c, _, _)| *c).collect();
    out.push(joint(
        "upper",
        format!(
            "min by (model) (llm_slo:attainment_ratio{{slo=\"{}\", clause=~\"{}\", window=\"{wl}\", source=\"metrics\"}} or {success})",
            s.name,
            clause_re.join("|")
        ),
    ));
    for b in ["lower", "estimate", "upper"] {
        out.push(record(
            "llm_slo:goodput_tokens_per_second",
            format!("{} * on (model) {}", att("joint", Some(b)), fleet.output_tokens(w)),
            &[("slo", &s.name), ("bound", b), ("window", &wl), METRICS],
        ));
    }
    out.push(record(
        "llm_slo:error_budget_burn_rate",
        format!(
            "sum without (clause, bound) ((1 - {}) / (1 - {}))",
            att("joint", Some("estimate")),
            num(s.objective.get())
        ),
        &[("slo", &s.name), ("window", &wl), METRICS],
    ));
}
