//! Exact fleet numbers from the sidecars' request counters (docs/fleet.md#exact-fleet-numbers-from-requests):
//! each daemon with a tap or an OTLP receiver exports `llm_slo_requests_total{source,status}`
//! and `llm_slo_good_requests_total{slo,source}` (docs/metrics.md), and a sum of counts is
//! exact, so fleet-wide attainment and goodput per model and SLO are a ratio of summed
//! increases, with no histogram bracket.
//!
//! The recorded series keep the daemon's family names and labels with `source="tap"` or
//! `"otlp"`, beside the histogram-derived `source="metrics"` ones; the SLO alerts read the
//! first source that has data, tap, then spans, then histograms, as the daemon's do
//! (docs/alerts.md#which-source-alerts-read). A source with no finished request in a window
//! records nothing for it (no 0/0), so that the next source is read instead.

use std::collections::BTreeMap;

use super::expr::num;
use super::scope::{alternation, join};
use super::types::PromRule;
use crate::duration::Window;
use crate::export::requests::{GOOD_REQUESTS_TOTAL, REQUESTS_TOTAL};
use crate::slo::Slo;

/// The request sources, in the order the alerts prefer them.
pub const SOURCES: [&str; 2] = ["tap", "otlp"];
const REQUEST_SOURCES: &str = "source=~\"tap|otlp\"";

fn record(name: &str, expr: String, labels: &[(&str, &str)]) -> PromRule {
    PromRule::Record {
        record: name.to_string(),
        expr,
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }
}

/// The SLO's scope on goodput's own series, which carry the configured target names (no
/// `--target-instance` needed here).
fn scope(s: &Slo) -> String {
    let mut m = Vec::new();
    if !s.scope.targets.is_empty() {
        m.push(format!("target=~\"{}\"", alternation(s.scope.targets.iter().map(String::as_str))));
    }
    if !s.scope.models.is_empty() {
        m.push(format!("model=~\"{}\"", alternation(s.scope.models.iter().map(String::as_str))));
    }
    m.join(", ")
}

/// `sum by (model, source) (increase(name{…}[w]))`.
fn summed(f: &str, name: &str, matchers: &str, w: Window) -> String {
    format!("sum by (model, source) ({f}({name}{{{}}}[{w}]))", join(&[REQUEST_SOURCES, matchers]))
}

/// Recording rules at each of `windows`, for every SLO.
pub fn rules(windows: &[Window], slos: &[&Slo]) -> Vec<PromRule> {
    let mut out = Vec::new();
    for w in windows {
        let wl = w.label();
        out.push(record(
            "llm_slo:window_requests",
            summed("increase", REQUESTS_TOTAL, "", *w),
            &[("outcome", "finished"), ("window", &wl)],
        ));
        out.push(record(
            "llm_slo:window_requests",
            summed("increase", REQUESTS_TOTAL, "status!=\"ok\"", *w),
            &[("outcome", "failed"), ("window", &wl)],
        ));
        // Each source's own throughput, over the requests its goodput counts.
        out.push(record("llm_slo:requests_per_second", summed("rate", REQUESTS_TOTAL, "", *w), &[("window", &wl)]));
        for s in slos {
            slo_rules(&mut out, s, *w);
        }
    }
    out
}

/// One SLO's exact joint attainment, goodput and burn rate at `w`. The population is every
/// request the SLO judges (its good counter's series) that finished in the window, failures
/// included; the daemon also leaves out requests with an unobservable clause, which no
/// counter names (docs/fleet.md).
fn slo_rules(out: &mut Vec<PromRule>, s: &Slo, w: Window) {
    let wl = w.label();
    let good_sel = join(&[&format!("slo=\"{}\"", s.name), &scope(s)]);
    let good = summed("increase", GOOD_REQUESTS_TOTAL, &good_sel, w);
    // Every request of the series the SLO judges: a series without this SLO's good counter
    // is out of its scope.
    let judged = format!(
        "sum by (model, source) (increase({REQUESTS_TOTAL}{{{}}}[{w}]) and ignoring (status, slo) {GOOD_REQUESTS_TOTAL}{{{}}})",
        join(&[REQUEST_SOURCES, &scope(s)]),
        join(&[REQUEST_SOURCES, &good_sel]),
    );
    // The good counter judges a TPOT from a counted token number over the limit as bad: the
    // lower bound and the estimate. The upper bound needs the per-request records.
    for bound in ["lower", "estimate"] {
        out.push(record(
            "llm_slo:attainment_ratio",
            format!("{good} / ({judged} > 0)"),
            &[("slo", &s.name), ("clause", "joint"), ("bound", bound), ("window", &wl)],
        ));
    }
    out.push(record(
        "llm_slo:goodput_requests_per_second",
        format!("{} and on (model, source) ({judged} > 0)", summed("rate", GOOD_REQUESTS_TOTAL, &good_sel, w)),
        &[("slo", &s.name), ("bound", "estimate"), ("window", &wl)],
    ));
    out.push(record(
        "llm_slo:error_budget_burn_rate",
        format!(
            "sum without (clause, bound) ((1 - {}) / (1 - {}))",
            attainment(s, w, REQUEST_SOURCES),
            num(s.objective.get())
        ),
        &[("slo", &s.name), ("window", &wl)],
    ));
}

/// The recorded joint attainment estimate of `s` at `w` from the sources `source` selects.
fn attainment(s: &Slo, w: Window, source: &str) -> String {
    format!(
        "llm_slo:attainment_ratio{{slo=\"{}\", clause=\"joint\", bound=\"estimate\", window=\"{w}\", {source}}}",
        s.name
    )
}

/// A recorded series from the first source that has it: tap, else spans, else the
/// histograms (`selector` without `source`, e.g. `slo="chat", window="5m"`).
pub fn preferred(name: &str, selector: &str) -> String {
    let parts: Vec<String> = SOURCES
        .iter()
        .chain(std::iter::once(&"metrics"))
        .map(|src| format!("{name}{{{}}}", join(&[selector, &format!("source=\"{src}\"")])))
        .collect();
    format!("({})", parts.join(" or ignoring (source) "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promql_rules::scope::tests::slo;

    #[test]
    fn scope_reads_goodput_target_names_and_models() {
        assert_eq!(scope(&slo(&[], &[])), "");
        assert_eq!(scope(&slo(&["a.b"], &["m"])), "target=~\"a\\\\.b\", model=~\"m\"");
    }

    #[test]
    fn preferred_falls_back_from_tap_to_spans_to_histograms() {
        assert_eq!(
            preferred("x", "window=\"5m\""),
            "(x{window=\"5m\", source=\"tap\"} or ignoring (source) x{window=\"5m\", source=\"otlp\"} or ignoring (source) x{window=\"5m\", source=\"metrics\"})"
        );
    }
}
