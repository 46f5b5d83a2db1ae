//! The alert rules and the conditions they test: a pure function from one tick's inputs to
//! the set of alerts whose condition holds right now (before `for` is applied).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::input::{AlertInput, Clause, SloSpec};
use crate::duration::Window;
use crate::report::RuleReadiness;

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
    /// Share of each window it reads that must be covered by data before the rule may
    /// judge a target and model (docs/alerts.md#after-a-restart).
    pub min_coverage: f64,
}

impl RuleKind {
    /// The windows the rule reads; none for the rules on the last scrape or scrape health.
    pub fn windows(&self) -> Vec<Window> {
        match *self {
            RuleKind::GoodputDivergence { window, .. }
            | RuleKind::LatencyAboveSlo { window, .. }
            | RuleKind::PreemptionsSustained { window, .. }
            | RuleKind::QueueGrowing { window, .. } => vec![window],
            RuleKind::ErrorBudgetBurn { long_window, short_window, .. } => vec![long_window, short_window],
            RuleKind::KvCacheSaturated { .. } | RuleKind::TargetDown => Vec::new(),
        }
    }
}

impl Rule {
    /// How long a fresh daemon scrapes before this rule may judge anything: until its
    /// longest window is covered to `min_coverage`. Zero for rules that read no window.
    pub fn warmup(&self) -> Duration {
        let longest = self.kind.windows().iter().map(|w| w.millis()).max().unwrap_or_default();
        // Whole milliseconds, so that 90% of 6h prints as 5h24m, not 5h23m59s999ms.
        Duration::from_millis((longest as f64 * self.min_coverage.clamp(0.0, 1.0)).round() as u64)
    }

    /// Whether every window the rule reads is covered enough in `input`. A rule that reads
    /// no window is always ready.
    pub fn ready_for(&self, input: &AlertInput) -> bool {
        self.kind.windows().iter().all(|&w| input.window(w).is_some_and(|x| x.coverage >= self.min_coverage))
    }
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
        if let Some(base) = self.runbook_base_url {
            annotations.insert("runbook_url".to_string(), runbook_url(base, name));
        }
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

/// `base` + alert name, with a `/` between unless `base` already ends in `/` or `#`.
pub fn runbook_url(base: &str, alertname: &str) -> String {
    if base.ends_with('/') || base.ends_with('#') {
        format!("{base}{alertname}")
    } else {
        format!("{base}/{alertname}")
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn secs(x: f64) -> String {
    if x < 1.0 { format!("{:.0}ms", x * 1000.0) } else { format!("{x:.3}s") }
}

/// Per enabled rule, target and model that is up, and window the rule reads: how much of
/// the window is covered and whether that is enough for the rule to judge it.
pub fn readiness(rules: &RuleSet, inputs: &[AlertInput]) -> Vec<RuleReadiness> {
    let mut out = Vec::new();
    for input in inputs.iter().filter(|i| i.up) {
        for rule in &rules.rules {
            let mut windows = rule.kind.windows();
            windows.dedup();
            for w in windows {
                let coverage = input.window(w).map_or(0.0, |x| x.coverage);
                let ready = coverage >= rule.min_coverage;
                let missing = if ready { 0.0 } else { (rule.min_coverage - coverage) * w.duration().as_secs_f64() };
                out.push(RuleReadiness {
                    alertname: rule.name.as_str(),
                    target: input.target.clone(),
                    model: input.model.clone(),
                    window: w,
                    coverage,
                    min_coverage: rule.min_coverage,
                    ready,
                    ready_in_seconds: missing.max(0.0),
                });
            }
        }
    }
    out
}

/// Every condition that holds for these inputs. Missing or NaN measurements never fire, and
/// neither does a rule whose windows are not yet covered enough ([`Rule::ready_for`]).
pub fn conditions(
    rules: &RuleSet,
    slos: &[SloSpec],
    inputs: &[AlertInput],
    runbook_base_url: Option<&str>,
) -> Vec<Condition> {
    let mut out = Vec::new();
    for input in inputs {
        for rule in rules.rules.iter().filter(|r| r.ready_for(input)) {
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
