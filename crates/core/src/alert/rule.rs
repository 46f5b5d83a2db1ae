//! The alert rules and the conditions they test: a pure function from one tick's inputs to
//! the set of alerts whose condition holds right now (before `for` is applied).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::input::{AlertInput, Clause, SloSpec};
use crate::duration::Window;

/// Every alert this daemon raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlertName {
    KvCacheSaturated,
    GoodputDivergence,
    TtftAboveSlo,
    TpotAboveSlo,
    ErrorBudgetBurnFast,
    ErrorBudgetBurnSlow,
    TargetDown,
    PreemptionsSustained,
    QueueGrowing,
}

impl AlertName {
    pub const ALL: [AlertName; 9] = [
        AlertName::KvCacheSaturated,
        AlertName::GoodputDivergence,
        AlertName::TtftAboveSlo,
        AlertName::TpotAboveSlo,
        AlertName::ErrorBudgetBurnFast,
        AlertName::ErrorBudgetBurnSlow,
        AlertName::TargetDown,
        AlertName::PreemptionsSustained,
        AlertName::QueueGrowing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertName::KvCacheSaturated => "LLMKVCacheSaturated",
            AlertName::GoodputDivergence => "LLMGoodputDivergence",
            AlertName::TtftAboveSlo => "LLMTTFTAboveSLO",
            AlertName::TpotAboveSlo => "LLMTPOTAboveSLO",
            AlertName::ErrorBudgetBurnFast => "LLMErrorBudgetBurnFast",
            AlertName::ErrorBudgetBurnSlow => "LLMErrorBudgetBurnSlow",
            AlertName::TargetDown => "LLMTargetDown",
            AlertName::PreemptionsSustained => "LLMPreemptionsSustained",
            AlertName::QueueGrowing => "LLMQueueGrowing",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyClause {
    Ttft,
    Tpot,
}

impl LatencyClause {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyClause::Ttft => "TTFT",
            LatencyClause::Tpot => "TPOT",
        }
    }
}

/// What a rule tests, with its knobs.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleKind {
    /// Last KV usage above `threshold`.
    KvCacheSaturated {
        threshold: f64,
    },
    /// Joint attainment estimate below `threshold` while output tokens/s exceed the floor.
    GoodputDivergence {
        threshold: f64,
        window: Window,
        throughput_floor: f64,
    },
    /// p99 above the SLO's threshold for that clause.
    LatencyAboveSlo {
        clause: LatencyClause,
        window: Window,
    },
    /// Burn rate above `factor` in both windows, each with at least `min_requests` finished.
    ErrorBudgetBurn {
        factor: f64,
        long_window: Window,
        short_window: Window,
        min_requests: f64,
    },
    TargetDown,
    PreemptionsSustained {
        per_second: f64,
        window: Window,
    },
    /// Waiting requests rose over the window and are at least `min_waiting`.
    QueueGrowing {
        min_waiting: f64,
        window: Window,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: AlertName,
    pub for_: Duration,
    pub severity: Severity,
    pub kind: RuleKind,
}

/// The enabled rules.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}

/// The highest burn rate an SLO can show: every request bad.
pub fn max_burn(objective: f64) -> f64 {
    1.0 / (1.0 - objective)
}

/// The factor actually used, and whether it was clamped to the highest possible burn.
pub fn effective_factor(factor: f64, objective: f64) -> (f64, bool) {
    let max = max_burn(objective);
    if factor > max { (max, true) } else { (factor, false) }
}

/// Burn above the factor; at a clamped factor only a burn equal to the maximum can reach it.
pub fn burn_exceeds(burn: f64, factor: f64, clamped: bool) -> bool {
    if clamped { burn >= factor } else { burn > factor }
}

/// One alert whose condition holds at this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub name: AlertName,
    pub for_: Duration,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The measured value that crossed the threshold.
    pub value: f64,
}

struct Ctx<'a> {
    rule: &'a Rule,
    input: &'a AlertInput,
    runbook_base_url: Option<&'a str>,
}

impl Ctx<'_> {
    fn condition(&self, slo: Option<&str>, value: f64, summary: String, description: String) -> Condition {
        let mut labels = BTreeMap::new();
        let name = self.rule.name.as_str();
        labels.insert("alertname".to_string(), name.to_string());
        labels.insert("severity".to_string(), self.rule.severity.as_str().to_string());
        labels.insert("target".to_string(), self.input.target.clone());
        if !self.input.model.is_empty() {
            labels.insert("model".to_string(), self.input.model.clone());
        }
        if let Some(slo) = slo {
            labels.insert("slo".to_string(), slo.to_string());
        }
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_string(), summary);
        annotations.insert("description".to_string(), description);
        annotations.insert("runbook_url".to_string(), runbook_url(self.runbook_base_url, self.rule.name));
        Condition { name: self.rule.name, for_: self.rule.for_, labels, annotations, value }
    }

    fn who(&self) -> String {
        if self.input.model.is_empty() {
            format!("target {}", self.input.target)
        } else {
            format!("{} on {}", self.input.model, self.input.target)
        }
    }
}

/// The runbooks page of this repository (docs/runbooks.md), one section per alert. Every
/// alert links into it unless `alerting.runbook_base_url` names another place.
pub const DEFAULT_RUNBOOK_PAGE: &str = "https://github.com/goodput/goodput/blob/main/docs/runbooks.md";

impl AlertName {
    /// The anchor of this alert's section of docs/runbooks.md. The section's heading is the
    /// alert name, and GitHub's anchor for a heading without punctuation or spaces is the
    /// heading in lowercase.
    pub fn runbook_anchor(self) -> String {
        self.as_str().to_ascii_lowercase()
    }
}

/// The `runbook_url` annotation of an alert: its section of [`DEFAULT_RUNBOOK_PAGE`], or,
/// with a `runbook_base_url`, that base + the alert name (a `/` between unless the base ends
/// in `/` or `#`), for a wiki with one page per alert.
pub fn runbook_url(base: Option<&str>, name: AlertName) -> String {
    match base {
        None => format!("{DEFAULT_RUNBOOK_PAGE}#{}", name.runbook_anchor()),
        Some(base) if base.ends_with('/') || base.ends_with('#') => format!("{base}{}", name.as_str()),
        Some(base) => format!("{base}/{}", name.as_str()),
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn secs(x: f64) -> String {
    if x < 1.0 { format!("{:.0}ms", x * 1000.0) } else { format!("{x:.3}s") }
}

/// Every condition that holds for these inputs. Missing or NaN measurements never fire.
pub fn conditions(
    rules: &RuleSet,
    slos: &[SloSpec],
    inputs: &[AlertInput],
    runbook_base_url: Option<&str>,
) -> Vec<Condition> {
    let mut out = Vec::new();
    for input in inputs {
        for rule in &rules.rules {
            let cx = Ctx { rule, input, runbook_base_url };
            eval_rule(&cx, slos, &mut out);
        }
    }
    out
}

fn eval_rule(cx: &Ctx<'_>, slos: &[SloSpec], out: &mut Vec<Condition>) {
    let input = cx.input;
    match &cx.rule.kind {
        RuleKind::TargetDown => {
            if !input.up {
                out.push(cx.condition(
                    None,
                    0.0,
                    format!("{} is down", cx.who()),
                    format!("Scrapes of target {} are failing; nothing about it can be measured.", input.target),
                ));
            }
        }
        _ if !input.up => {}
        RuleKind::KvCacheSaturated { threshold } => {
            let last = input.windows.iter().filter_map(|w| w.kv_usage.map(|k| (w.window, k))).min_by_key(|(w, _)| *w);
            if let Some((_, kv)) = last
                && kv.last > *threshold
            {
                out.push(cx.condition(
                    None,
                    kv.last,
                    format!("KV cache of {} is {} full", cx.who(), pct(kv.last)),
                    format!(
                        "KV-cache usage is {} (window max {}), above the critical level {}; preemptions and swapping get likely.",
                        pct(kv.last),
                        pct(kv.max),
                        pct(*threshold)
                    ),
                ));
            }
        }
        RuleKind::GoodputDivergence { threshold, window, throughput_floor } => {
            let Some(w) = input.window(*window) else { return };
            let Some(tps) = w.output_tokens_per_second.filter(|t| *t > *throughput_floor) else { return };
            for s in w.slos.iter().filter(|s| s.evaluable) {
                let Some(joint) = s.attainment.get(&Clause::Joint) else { continue };
                if joint.estimate < *threshold {
                    out.push(cx.condition(
                        Some(&s.slo),
                        joint.estimate,
                        format!("Goodput of {} diverges from throughput (SLO {})", cx.who(), s.slo),
                        format!(
                            "Over {window}, only {} of requests met SLO {} (bounds {}–{}, threshold {}) while output throughput is {tps:.1} tokens/s{}.",
                            pct(joint.estimate),
                            s.slo,
                            pct(joint.lower),
                            pct(joint.upper),
                            pct(*threshold),
                            s.goodput_tokens_per_second
                                .map(|g| format!("; goodput is {:.1} tokens/s", g.estimate))
                                .unwrap_or_default(),
                        ),
                    ));
                }
            }
        }
        RuleKind::LatencyAboveSlo { clause, window } => {
            let Some(w) = input.window(*window) else { return };
            let p99 = match clause {
                LatencyClause::Ttft => w.ttft_p99,
                LatencyClause::Tpot => w.tpot_p99,
            };
            let Some(p99) = p99 else { return };
            for spec in slos {
                let limit = match clause {
                    LatencyClause::Ttft => spec.ttft,
                    LatencyClause::Tpot => spec.tpot,
                };
                if let Some(limit) = limit
                    && p99 > limit
                {
                    out.push(cx.condition(
                        Some(&spec.name),
                        p99,
                        format!(
                            "p99 {} of {} is {} (SLO {}: {})",
                            clause.as_str(),
                            cx.who(),
                            secs(p99),
                            spec.name,
                            secs(limit)
                        ),
                        format!(
                            "Over {window}, p99 {} is {}, above the {} threshold of SLO {}.",
                            clause.as_str(),
                            secs(p99),
                            secs(limit),
                            spec.name
                        ),
                    ));
                }
            }
        }
        RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
            for spec in slos {
                let (Some(long), Some(short)) =
                    (input.slo(*long_window, &spec.name), input.slo(*short_window, &spec.name))
                else {
                    continue;
                };
                let (f, clamped) = effective_factor(*factor, spec.objective);
                let ok = [long, short].iter().all(|s| {
                    s.evaluable && s.requests >= *min_requests && burn_exceeds(s.burn_rate.estimate, f, clamped)
                });
                if ok {
                    out.push(cx.condition(
                        Some(&spec.name),
                        short.burn_rate.estimate,
                        format!("{} burns the error budget of SLO {} at {:.1}×", cx.who(), spec.name, long.burn_rate.estimate),
                        format!(
                            "Burn rate is {:.2}× over {long_window} and {:.2}× over {short_window} (threshold {f:.2}×{}, objective {}); {:.0} and {:.0} requests finished.",
                            long.burn_rate.estimate,
                            short.burn_rate.estimate,
                            if clamped { ", clamped to the highest possible burn" } else { "" },
                            pct(spec.objective),
                            long.requests,
                            short.requests,
                        ),
                    ));
                }
            }
        }
        RuleKind::PreemptionsSustained { per_second, window } => {
            let Some(rate) = input.window(*window).and_then(|w| w.preemptions_per_second) else { return };
            if rate > *per_second {
                out.push(cx.condition(
                    None,
                    rate,
                    format!("{} preempts {rate:.2} requests/s", cx.who()),
                    format!(
                        "Over {window}, the engine preempted {rate:.3} requests/s (threshold {per_second}); KV cache is too small for the load."
                    ),
                ));
            }
        }
        RuleKind::QueueGrowing { min_waiting, window } => {
            let (Some(now), Some(start)) = (input.waiting_now, input.window(*window).and_then(|w| w.waiting_at_start))
            else {
                return;
            };
            if now > start && now >= *min_waiting {
                out.push(cx.condition(
                    None,
                    now,
                    format!("Queue of {} is growing: {now:.0} waiting", cx.who()),
                    format!(
                        "Waiting requests rose from {start:.0} to {now:.0} over {window} (alerting from {min_waiting:.0}); arrivals exceed capacity."
                    ),
                ));
            }
        }
    }
}
