//! The alert rules and the conditions they test: a pure function from one tick's inputs to
//! the set of alerts whose condition holds right now (before `for` is applied), with the
//! texts of the alert table ([`super::table`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::input::{AlertInput, Clause, DataSource, WindowInput};
use super::table::{AlertSpec, pct, render, secs, spec};
use crate::report::RuleReadiness;

pub use super::condition::Condition;
pub use super::kind::{AlertName, LatencyClause, Rule, RuleKind, RuleSet, Severity};

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
        self.kind.windows().iter().all(|&w| input.window(w).is_some_and(|x| self.coverage(x) >= self.min_coverage))
    }

    /// How much of a window this rule's data covers: the SLO sources' coverage for the SLO
    /// rules, the scrapes' for the others.
    pub fn coverage(&self, w: &WindowInput) -> f64 {
        if self.kind.reads_slos() { w.slo_coverage } else { w.coverage }
    }
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

struct Ctx<'a> {
    rule: &'a Rule,
    row: &'static AlertSpec,
    input: &'a AlertInput,
    /// `alerting.runbook_url` as [`super::config::AlertingConfig::runbook_page`] gives it;
    /// `None` (no page is known, as in a replay) leaves the annotation out.
    runbook_page: Option<&'a str>,
}

impl Ctx<'_> {
    /// The condition with the table's texts filled from `vars` (plus `who`).
    fn condition(&self, slo: Option<&str>, value: f64, vars: &[(&str, &str)]) -> Condition {
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
        let who = self.who();
        let mut all = vec![("who", who.as_str())];
        all.extend_from_slice(vars);
        let mut annotations = BTreeMap::new();
        annotations.insert("summary".to_string(), render(self.row.summary, &all));
        annotations.insert("description".to_string(), render(self.row.description, &all));
        if let Some(page) = self.runbook_page {
            annotations.insert("runbook_url".to_string(), runbook_url(page, self.rule.name));
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

/// Where the daemon serves its runbooks (docs/runbooks.md rendered, one section per alert):
/// the default `alerting.runbook_url` is this path on the daemon's own address.
pub const RUNBOOKS_PATH: &str = "/runbooks/";

/// The placeholder of `alerting.runbook_url` for a wiki with one page per alert.
pub const ALERTNAME: &str = "{alertname}";

impl AlertName {
    /// The anchor of this alert's section of the runbooks: the alert name in lowercase, as
    /// the daemon's `/runbooks/` page and GitHub's rendering of docs/runbooks.md both make
    /// it from the section's heading (the alert name).
    pub fn runbook_anchor(self) -> String {
        self.as_str().to_ascii_lowercase()
    }
}

/// The `runbook_url` annotation of an alert, from `alerting.runbook_url` (docs/alerts.md#runbooks):
/// the page + `#` + the alert's anchor, or, where the page holds [`ALERTNAME`], the page with
/// the alert name in its place.
pub fn runbook_url(page: &str, name: AlertName) -> String {
    if page.contains(ALERTNAME) {
        page.replace(ALERTNAME, name.as_str())
    } else {
        format!("{page}#{}", name.runbook_anchor())
    }
}

/// Per enabled rule, target and model that is up, and window the rule reads: how much of
/// the window is covered and whether that is enough for the rule to judge it.
pub fn readiness(rules: &RuleSet, inputs: &[AlertInput]) -> Vec<RuleReadiness> {
    let mut out = Vec::new();
    for input in inputs.iter().filter(|i| i.up) {
        // A model only requests name (a client's spelling of it) has no scrapes: the scrape
        // rules have nothing to wait for there, and would wait forever.
        let requests_only = input.windows.iter().all(|w| w.coverage == 0.0 && w.slo_source != DataSource::Metrics);
        for rule in &rules.rules {
            if requests_only && !rule.kind.reads_slos() {
                continue;
            }
            let mut windows = rule.kind.windows();
            windows.dedup();
            for w in windows {
                let coverage = input.window(w).map_or(0.0, |x| rule.coverage(x));
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
/// neither does a rule whose windows are not yet covered enough ([`Rule::ready_for`]). SLO
/// rules judge only the SLOs each input carries: those that apply to its target and model.
pub fn conditions(rules: &RuleSet, inputs: &[AlertInput], runbook_page: Option<&str>) -> Vec<Condition> {
    let mut out = Vec::new();
    for input in inputs {
        for rule in rules.rules.iter().filter(|r| r.ready_for(input)) {
            let cx = Ctx { rule, row: spec(rule.name), input, runbook_page };
            eval_rule(&cx, &mut out);
        }
    }
    out
}

fn eval_rule(cx: &Ctx<'_>, out: &mut Vec<Condition>) {
    let input = cx.input;
    match &cx.rule.kind {
        RuleKind::TargetDown => {
            if !input.up {
                let mut c = cx.condition(None, 0.0, &[("detail", "")]);
                super::down::still_measured(&mut c, input);
                out.push(c);
            }
        }
        _ if !input.up => {}
        RuleKind::KvCacheSaturated { threshold } => {
            let last = input.windows.iter().filter_map(|w| w.kv_usage.map(|k| (w.window, k))).min_by_key(|(w, _)| *w);
            if let Some((window, kv)) = last
                && kv.last > *threshold
            {
                let detail = format!(" (window max {})", pct(kv.max));
                let vars = [("value", pct(kv.last)), ("detail", detail), ("threshold", pct(*threshold))];
                out.push(cx.condition(None, kv.last, &borrow(&vars)).read(DataSource::Metrics, window));
            }
        }
        RuleKind::GoodputDivergence { threshold, window, throughput_floor } => {
            let Some(w) = input.window(*window) else { return };
            for slo in &input.slos {
                let Some(s) = w.slos.iter().find(|s| s.slo == slo.name && s.evaluable) else { continue };
                let Some(joint) = s.attainment.get(&Clause::Joint) else { continue };
                // Goodput beside the throughput of its own source: the same requests.
                let source = w.sources.slo(&slo.name);
                let own = w.sources.tokens_per_second.get(&source).copied();
                // `output_tokens_per_second` is the throughput of `slo_source`.
                let Some(tps) = own.or(w.output_tokens_per_second.filter(|_| source == w.slo_source)) else {
                    continue;
                };
                if tps > *throughput_floor && joint.estimate < *threshold {
                    let goodput = s.goodput_tokens_per_second.map(|g| format!(" (goodput {:.1} tokens/s)", g.estimate));
                    let vars = [
                        ("window", window.label()),
                        ("value", pct(joint.estimate)),
                        ("slo", slo.name.clone()),
                        ("detail", evidence(source, *joint)),
                        ("threshold", pct(*threshold)),
                        ("throughput", format!("{tps:.1} tokens/s{}", goodput.unwrap_or_default())),
                    ];
                    out.push(cx.condition(Some(&slo.name), joint.estimate, &borrow(&vars)).read(source, *window));
                }
            }
        }
        RuleKind::LatencyAboveSlo { clause, window } => {
            let Some(w) = input.window(*window) else { return };
            let (p99, source) = match clause {
                LatencyClause::Ttft => (w.ttft_p99, w.sources.ttft_p99),
                LatencyClause::Tpot => (w.tpot_p99, w.sources.tpot_p99),
            };
            let Some(p99) = p99 else { return };
            for slo in &input.slos {
                let Some(limit) = slo.threshold(clause.clause()) else { continue };
                if p99 > limit.as_secs_f64() {
                    let vars = [
                        ("clause", clause.as_str().to_string()),
                        ("value", secs(p99)),
                        ("slo", slo.name.clone()),
                        ("threshold", super::table::limit(limit)),
                        ("window", window.label()),
                    ];
                    out.push(cx.condition(Some(&slo.name), p99, &borrow(&vars)).read(source, *window));
                }
            }
        }
        RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
            for slo in &input.slos {
                let (Some(long), Some(short)) =
                    (input.slo(*long_window, &slo.name), input.slo(*short_window, &slo.name))
                else {
                    continue;
                };
                let short_src = input.window(*short_window).map_or(DataSource::Metrics, |w| w.sources.slo(&slo.name));
                let (f, clamped) = effective_factor(*factor, slo.objective.get());
                let ok = [long, short].iter().all(|s| {
                    s.evaluable && s.requests >= *min_requests && burn_exceeds(s.burn_rate.estimate, f, clamped)
                });
                if ok {
                    let clamp_note = if clamped { ", clamped to the highest possible burn" } else { "" };
                    let vars = [
                        ("slo", slo.name.clone()),
                        ("value", format!("{:.2}", short.burn_rate.estimate)),
                        ("window", short_window.label()),
                        ("long_value", format!("{:.2}", long.burn_rate.estimate)),
                        ("long_window", long_window.label()),
                        ("threshold", format!("{f:.2}×{clamp_note}")),
                        ("objective", pct(slo.objective.get())),
                        (
                            "detail",
                            format!(
                                "; {:.0} and {:.0} requests finished{}",
                                short.requests,
                                long.requests,
                                from(short_src)
                            ),
                        ),
                    ];
                    let c = cx.condition(Some(&slo.name), short.burn_rate.estimate, &borrow(&vars));
                    out.push(c.read(short_src, *short_window));
                }
            }
        }
        RuleKind::PreemptionsSustained { per_second, window } => {
            let Some(rate) = input.window(*window).and_then(|w| w.preemptions_per_second) else { return };
            if rate > *per_second {
                let vars = [
                    ("value", format!("{rate:.3}")),
                    ("window", window.label()),
                    ("threshold", per_second.to_string()),
                ];
                out.push(cx.condition(None, rate, &borrow(&vars)).read(DataSource::Metrics, *window));
            }
        }
        RuleKind::CapacityHeadroomLow { factor } => {
            // A censored capacity is only a lower bound: it cannot say the knee is near.
            for c in input.capacity.iter().filter(|c| c.rising && !c.censored && c.headroom < *factor) {
                let vars = [
                    ("value", format!("{:.2}", c.headroom)),
                    ("slo", c.slo.clone()),
                    ("threshold", format!("{factor}")),
                    ("throughput", format!("{:.2} requests/s", c.arrival_rate)),
                    ("detail", format!("{:.2} requests/s ({}, p10)", c.capacity, c.method)),
                ];
                out.push(cx.condition(Some(&c.slo), c.headroom, &borrow(&vars)));
            }
        }
        RuleKind::QueueGrowing { min_waiting, window } => {
            let (Some(now), Some(start)) = (input.waiting_now, input.window(*window).and_then(|w| w.waiting_at_start))
            else {
                return;
            };
            if now > start && now >= *min_waiting {
                let vars = [
                    ("value", format!("{now:.0}")),
                    ("detail", format!("from {start:.0} ")),
                    ("window", window.label()),
                    ("threshold", format!("{min_waiting:.0}")),
                ];
                out.push(cx.condition(None, now, &borrow(&vars)).read(DataSource::Metrics, *window));
            }
        }
    }
}

/// What the divergence alert says of its evidence: exact from requests, or the bracket.
fn evidence(source: DataSource, joint: super::input::Bounded) -> String {
    match source {
        DataSource::Metrics => format!("bounds {}–{}, ", pct(joint.lower), pct(joint.upper)),
        s if joint.is_exact() => format!("exact, from {} requests, ", s.as_str()),
        s => format!("from {} requests, bounds {}–{}, ", s.as_str(), pct(joint.lower), pct(joint.upper)),
    }
}

/// ` (from tap requests)` when the burn was measured on requests; nothing for histograms.
fn from(source: DataSource) -> String {
    match source {
        DataSource::Metrics => String::new(),
        s => format!(" (from {} requests)", s.as_str()),
    }
}

fn borrow<'a>(vars: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
}
