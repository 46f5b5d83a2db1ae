//! The daemon's alert rules in PromQL, with the same names, labels, `for` and texts (the
//! alert table, [`crate::alert::table`]).
//!
//! SLO alerts read the recorded series of the SLO's scope and carry `target="fleet"`; their
//! attainment and burn rate come from the first source that has them: the exact numbers
//! from the sidecars' request counters (tap, then spans, [`super::exact`]), else the
//! histograms, as the daemon's alerts choose;
//! alerts about one pod (KV cache, down, preemptions, queue) keep that pod's labels and
//! copy `instance` to `target`. `LLMTargetDown` reads `up`, which every job in Prometheus
//! has: it is scoped to the engines ([`Metrics::engines_down`]).
//!
//! `LLMCapacityHeadroomLow` has no PromQL version: it reads the daemon's capacity
//! estimate, which PromQL cannot compute.
//!
//! The SLO alerts also wait until their windows are covered by data, as the daemon's do
//! (docs/alerts.md#after-a-restart). The per-pod preemption and queue alerts do not: their
//! default `for` (10m) is longer than their window (5m), so they cannot fire before it is
//! full anyway.

use std::collections::BTreeMap;

use super::exact::preferred;
use super::expr::{KV_USAGE, Metrics, PREEMPTIONS, WAITING, num, to_model, to_target};
use super::scope::{Fleet, ScopeExpr, join};
use super::types::{PromRule, RulesSpec};
use crate::alert::rule::{Rule, RuleKind, effective_factor, runbook_url};
use crate::alert::table::{limit, pct, render, spec as row};
use crate::duration::{Window, format_duration};
use crate::slo::Slo;

/// Labels the recorded series carry that an alert should not.
const DROP: &str = "max without (window, clause, bound, q, direction, source)";

struct Builder<'a> {
    spec: &'a RulesSpec,
    out: Vec<PromRule>,
}

impl Builder<'_> {
    /// One alert with the table's texts, filled from `vars`.
    fn alert(&mut self, rule: &Rule, expr: String, slo: Option<&str>, fleet: bool, vars: &[(&str, &str)]) {
        let mut labels = BTreeMap::new();
        labels.insert("severity".to_string(), rule.severity.as_str().to_string());
        if let Some(s) = slo {
            labels.insert("slo".to_string(), s.to_string());
        }
        if fleet {
            labels.insert("target".to_string(), "fleet".to_string());
        }
        let texts = row(rule.name);
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_string(), render(texts.summary, vars));
        annotations.insert("description".to_string(), render(texts.description, vars));
        // No daemon serves these alerts' runbooks: without `alerting.runbook_url` there is
        // no address known to work, and no link beats a dead one (docs/fleet.md#runbook-links).
        if let Some(page) = self.spec.alerting.runbook_page() {
            annotations.insert("runbook_url".to_string(), runbook_url(&page, rule.name));
        }
        self.out.push(PromRule::Alert {
            alert: rule.name.as_str().to_string(),
            expr,
            for_: format_duration(rule.for_),
            labels,
            annotations,
        });
    }
}

/// ` and on (model) llm_slo:window_coverage_ratio{window="w"} >= min` for each window, so a
/// fleet rule waits for data as the daemon's does; nothing when the rule needs no coverage.
fn covered(rule: &Rule, windows: &[Window]) -> String {
    if rule.min_coverage <= 0.0 {
        return String::new();
    }
    windows
        .iter()
        .map(|w| {
            format!(" and on (model) llm_slo:window_coverage_ratio{{window=\"{w}\"}} >= {}", num(rule.min_coverage))
        })
        .collect()
}

/// `>` normally; `>=` at a factor clamped to the highest possible burn.
fn burn_op(factor: f64, objective: f64) -> (String, &'static str) {
    let (f, clamped) = effective_factor(factor, objective);
    (num(f), if clamped { ">=" } else { ">" })
}

pub fn rules(spec: &RulesSpec, slos: &[(&Slo, ScopeExpr)], m: &Metrics) -> Vec<PromRule> {
    let mut b = Builder { spec, out: Vec::new() };
    // What the pod alerts name: one pod and model.
    let pod = "{{ $labels.model }} on {{ $labels.target }}";
    for rule in &spec.alerting.rule_set().rules {
        match &rule.kind {
            RuleKind::KvCacheSaturated { threshold } => {
                let usage = format!("({} or {})", m.series(KV_USAGE[0], ""), m.series(KV_USAGE[1], ""));
                let vars = [
                    ("who", pod),
                    ("value", "{{ $value | humanizePercentage }}"),
                    ("detail", ""),
                    ("threshold", &pct(*threshold)),
                ];
                b.alert(rule, to_target(&to_model(&format!("{usage} > {}", num(*threshold)))), None, false, &vars);
            }
            RuleKind::GoodputDivergence { threshold, window, throughput_floor } => {
                for (s, scope) in slos {
                    let fleet = Fleet { m, scope };
                    // Exact from requests where a tap or spans saw some, else the histograms.
                    let att = preferred(
                        "llm_slo:attainment_ratio",
                        &join(&[
                            &format!("slo=\"{}\", clause=\"joint\", bound=\"estimate\", window=\"{window}\"", s.name),
                            &scope.recorded,
                        ]),
                    );
                    let expr = format!(
                        "{DROP} ({att} < {} and on (model) {} > {}{})",
                        num(*threshold),
                        fleet.output_tokens(*window),
                        num(*throughput_floor),
                        covered(rule, &[*window])
                    );
                    let vars = [
                        ("who", scope.who.as_str()),
                        ("slo", &s.name),
                        ("window", &window.label()),
                        ("value", "{{ $value | humanizePercentage }}"),
                        ("detail", ""),
                        ("threshold", &pct(*threshold)),
                        ("throughput", &format!("above {} tokens/s", num(*throughput_floor))),
                    ];
                    b.alert(rule, expr, Some(&s.name), true, &vars);
                }
            }
            RuleKind::LatencyAboveSlo { clause, window } => {
                for (s, scope) in slos {
                    let Some(threshold) = s.threshold(clause.clause()) else { continue };
                    let p99 = Fleet { m, scope }.latency_p99(*clause, *window);
                    let expr =
                        format!("{DROP} ({p99} > {}{})", num(threshold.as_secs_f64()), covered(rule, &[*window]));
                    let vars = [
                        ("who", scope.who.as_str()),
                        ("clause", clause.as_str()),
                        ("slo", &s.name),
                        ("window", &window.label()),
                        ("value", "{{ $value | humanizeDuration }}"),
                        ("threshold", &limit(threshold)),
                    ];
                    b.alert(rule, expr, Some(&s.name), true, &vars);
                }
            }
            RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
                for (s, scope) in slos {
                    let fleet = Fleet { m, scope };
                    let (f, op) = burn_op(*factor, s.objective.get());
                    let burn = |w| {
                        let sel = join(&[&format!("slo=\"{}\", window=\"{w}\"", s.name), &scope.recorded]);
                        format!("{} {op} {f}", preferred("llm_slo:error_budget_burn_rate", &sel))
                    };
                    let enough = |w| format!("{} >= {}", fleet.requests_finished(w), num(*min_requests));
                    let expr = format!(
                        "{DROP} ({} and on (model) {} and on (model) {} and on (model) {}{})",
                        burn(*short_window),
                        burn(*long_window),
                        enough(*short_window),
                        enough(*long_window),
                        covered(rule, &[*long_window, *short_window])
                    );
                    let vars = [
                        ("who", scope.who.as_str()),
                        ("slo", &s.name),
                        ("value", "{{ $value | printf \"%.2f\" }}"),
                        ("window", &short_window.label()),
                        ("long_value", &format!("above {f}")),
                        ("long_window", &long_window.label()),
                        ("threshold", &format!("{f}×")),
                        ("objective", &pct(s.objective.get())),
                        ("detail", ""),
                    ];
                    b.alert(rule, expr, Some(&s.name), true, &vars);
                }
            }
            RuleKind::TargetDown => {
                let vars = [("who", "{{ $labels.target }}"), ("detail", " (job {{ $labels.job }})")];
                b.alert(rule, to_target(&m.engines_down()), None, false, &vars);
            }
            RuleKind::PreemptionsSustained { per_second, window } => {
                let expr = to_target(&format!(
                    "{} > {}",
                    m.sum_by("instance, model", "rate", PREEMPTIONS, "", *window),
                    num(*per_second)
                ));
                let vars = [
                    ("who", pod),
                    ("value", "{{ $value | printf \"%.3f\" }}"),
                    ("window", &window.label()),
                    ("threshold", &per_second.to_string()),
                ];
                b.alert(rule, expr, None, false, &vars);
            }
            // The capacity estimate is the daemon's own (a history of intervals, an isotonic
            // fit and a bootstrap): PromQL cannot compute it, so there is no twin
            // (docs/alerts.md#alerts-without-a-promql-twin).
            RuleKind::CapacityHeadroomLow { .. } => {}
            RuleKind::QueueGrowing { min_waiting, window } => {
                let grew = m.sum_by("instance, model", "delta", WAITING, "", *window);
                let now = m.sum_gauge_by("instance, model", WAITING);
                let expr = to_target(&format!("{now} >= {} and on (instance, model) {grew} > 0", num(*min_waiting)));
                let vars = [
                    ("who", pod),
                    ("value", "{{ $value }}"),
                    ("detail", ""),
                    ("window", &window.label()),
                    ("threshold", &format!("{min_waiting:.0}")),
                ];
                b.alert(rule, expr, None, false, &vars);
            }
        }
    }
    b.out
}
