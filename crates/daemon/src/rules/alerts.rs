//! The daemon's alert rules in PromQL, with the same names, labels and `for`.
//!
//! SLO alerts read the fleet-wide recorded series and carry `target="fleet"`; alerts about
//! one pod (KV cache, down, preemptions, queue) keep that pod's labels and copy `instance`
//! to `target`.

use std::collections::BTreeMap;

use super::expr::{KV_USAGE, Metrics, PREEMPTIONS, WAITING, num, to_model, to_target};
use super::recording::latency_family;
use super::{PromRule, RulesSpec};
use crate::alert::rule::{LatencyClause, Rule, RuleKind, effective_factor, runbook_url};
use crate::duration::format_duration;

/// Labels the recorded series carry that an alert should not.
const DROP: &str = "max without (window, clause, bound, q, direction)";

struct Builder<'a> {
    spec: &'a RulesSpec,
    out: Vec<PromRule>,
}

impl Builder<'_> {
    fn alert(
        &mut self,
        rule: &Rule,
        expr: String,
        slo: Option<&str>,
        fleet: bool,
        summary: String,
        description: String,
    ) {
        let mut labels = BTreeMap::new();
        labels.insert("severity".to_string(), rule.severity.as_str().to_string());
        if let Some(s) = slo {
            labels.insert("slo".to_string(), s.to_string());
        }
        if fleet {
            labels.insert("target".to_string(), "fleet".to_string());
        }
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_string(), summary);
        annotations.insert("description".to_string(), description);
        if let Some(base) = &self.spec.alerting.runbook_base_url {
            annotations.insert("runbook_url".to_string(), runbook_url(base, rule.name.as_str()));
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

/// `>` normally; `>=` at a factor clamped to the highest possible burn.
fn burn_op(factor: f64, objective: f64) -> (String, &'static str) {
    let (f, clamped) = effective_factor(factor, objective);
    (num(f), if clamped { ">=" } else { ">" })
}

pub fn rules(spec: &RulesSpec, m: &Metrics) -> Vec<PromRule> {
    let mut b = Builder { spec, out: Vec::new() };
    for rule in &spec.alerting.rule_set().rules {
        match &rule.kind {
            RuleKind::KvCacheSaturated { threshold } => {
                let usage = format!("({} or {})", m.series(KV_USAGE[0], ""), m.series(KV_USAGE[1], ""));
                b.alert(
                    rule,
                    to_target(&to_model(&format!("{usage} > {}", num(*threshold)))),
                    None,
                    false,
                    "KV cache of {{ $labels.model }} on {{ $labels.target }} is {{ $value | humanizePercentage }} full".into(),
                    format!("KV-cache usage is {{{{ $value | humanizePercentage }}}}, above the critical level {}; preemptions and swapping get likely.", num(*threshold)),
                );
            }
            RuleKind::GoodputDivergence { threshold, window, throughput_floor } => {
                for s in &spec.slos {
                    let expr = format!(
                        "{DROP} (llm_slo:attainment_ratio{{slo=\"{}\", clause=\"joint\", bound=\"estimate\", window=\"{window}\"}} < {} and on (model) llm_slo:tokens_per_second{{direction=\"output\", window=\"{window}\"}} > {})",
                        s.name,
                        num(*threshold),
                        num(*throughput_floor)
                    );
                    b.alert(
                        rule,
                        expr,
                        Some(&s.name),
                        true,
                        format!("Goodput of {{{{ $labels.model }}}} diverges from throughput (SLO {})", s.name),
                        format!(
                            "Over {window}, only {{{{ $value | humanizePercentage }}}} of requests met SLO {} (threshold {}) while output throughput is above {} tokens/s.",
                            s.name,
                            num(*threshold),
                            num(*throughput_floor)
                        ),
                    );
                }
            }
            RuleKind::LatencyAboveSlo { clause, window } => {
                for s in &spec.slos {
                    let limit = match clause {
                        LatencyClause::Ttft => s.ttft,
                        LatencyClause::Tpot => s.tpot,
                    };
                    let Some(limit) = limit else { continue };
                    let expr = format!(
                        "{DROP} ({}{{q=\"0.99\", window=\"{window}\"}} > {})",
                        latency_family(*clause),
                        num(limit)
                    );
                    b.alert(
                        rule,
                        expr,
                        Some(&s.name),
                        true,
                        format!("p99 {} of {{{{ $labels.model }}}} is {{{{ $value | humanizeDuration }}}} (SLO {})", clause.as_str(), s.name),
                        format!(
                            "Over {window}, fleet-wide p99 {} is {{{{ $value | humanizeDuration }}}}, above the {}s threshold of SLO {}.",
                            clause.as_str(),
                            num(limit),
                            s.name
                        ),
                    );
                }
            }
            RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
                for s in &spec.slos {
                    let (f, op) = burn_op(*factor, s.objective);
                    let burn =
                        |w| format!("llm_slo:error_budget_burn_rate{{slo=\"{}\", window=\"{w}\"}} {op} {f}", s.name);
                    let enough = |w| format!("llm_slo:requests_finished{{window=\"{w}\"}} >= {}", num(*min_requests));
                    let expr = format!(
                        "{DROP} ({} and on (model) {} and on (model) {} and on (model) {})",
                        burn(short_window),
                        burn(long_window),
                        enough(short_window),
                        enough(long_window)
                    );
                    b.alert(
                        rule,
                        expr,
                        Some(&s.name),
                        true,
                        format!("{{{{ $labels.model }}}} burns the error budget of SLO {} at {{{{ $value | printf \"%.1f\" }}}}×", s.name),
                        format!(
                            "Burn rate is {{{{ $value | printf \"%.2f\" }}}}× over {short_window} and above {f}× over {long_window} too (objective {}).",
                            num(s.objective)
                        ),
                    );
                }
            }
            RuleKind::TargetDown => {
                b.alert(
                    rule,
                    to_target(&format!("{} == 0", m.series("up", ""))),
                    None,
                    false,
                    "{{ $labels.target }} is down".into(),
                    "Scrapes of {{ $labels.target }} (job {{ $labels.job }}) are failing; nothing about it can be measured.".into(),
                );
            }
            RuleKind::PreemptionsSustained { per_second, window } => {
                let expr = to_target(&format!(
                    "{} > {}",
                    m.sum_by("instance, model", "rate", PREEMPTIONS, "", *window),
                    num(*per_second)
                ));
                b.alert(
                    rule,
                    expr,
                    None,
                    false,
                    "{{ $labels.model }} on {{ $labels.target }} preempts {{ $value | printf \"%.2f\" }} requests/s".into(),
                    format!("Over {window}, the engine preempted {{{{ $value | printf \"%.3f\" }}}} requests/s (threshold {}); KV cache is too small for the load.", num(*per_second)),
                );
            }
            RuleKind::QueueGrowing { min_waiting, window } => {
                let grew = m.sum_by("instance, model", "delta", WAITING, "", *window);
                let now = m.sum_gauge_by("instance, model", WAITING);
                let expr = to_target(&format!("{now} >= {} and on (instance, model) {grew} > 0", num(*min_waiting)));
                b.alert(
                    rule,
                    expr,
                    None,
                    false,
                    "Queue of {{ $labels.model }} on {{ $labels.target }} is growing: {{ $value }} waiting".into(),
                    format!("Waiting requests rose over {window} to {{{{ $value }}}} (alerting from {}); arrivals exceed capacity.", num(*min_waiting)),
                );
            }
        }
    }
    b.out
}
