//! The `alerting:` section of the config: where alerts go and how each rule is tuned.
//!
//! Users write partial overrides (`rules.LLMKVCacheSaturated: {for: 1m}`); [`AlertingConfig::rule_set`]
//! merges them over each rule's defaults into a [`RuleSet`] of fully specified rules, leaving
//! disabled ones out. Unknown keys and unknown alert names are errors, so typos never silently
//! fall back to defaults.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::rule::{AlertName, LatencyClause, Rule, RuleKind, RuleSet, Severity};
use crate::duration::{Window, parse_duration};

/// `alerting:`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertingConfig {
    /// One Alertmanager.
    #[serde(default)]
    pub alertmanager: Option<Endpoint>,
    /// Several Alertmanagers (an HA cluster gets every alert at each member).
    #[serde(default)]
    pub alertmanagers: Vec<Endpoint>,
    /// How often a firing alert is sent again.
    #[serde(default = "default_resend", deserialize_with = "de_duration")]
    pub resend_interval: Duration,
    /// Per-request HTTP timeout for deliveries.
    #[serde(default = "default_timeout", deserialize_with = "de_duration")]
    pub timeout: Duration,
    /// `runbook_url` = this + alert name.
    #[serde(default)]
    pub runbook_base_url: Option<String>,
    /// A generic JSON webhook that gets the same alerts as Alertmanager.
    #[serde(default)]
    pub webhook: Option<Endpoint>,
    /// Most distinct alerts held per destination while it is unreachable.
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: usize,
    /// Share of each window a rule reads that must be covered by data before the rule may
    /// fire (docs/alerts.md#after-a-restart); a rule's own `min_coverage` overrides it.
    #[serde(default = "default_min_window_coverage")]
    pub min_window_coverage: f64,
    #[serde(default)]
    pub rules: RulesConfig,
}

impl Default for AlertingConfig {
    fn default() -> Self {
        AlertingConfig {
            alertmanager: None,
            alertmanagers: Vec::new(),
            resend_interval: default_resend(),
            timeout: default_timeout(),
            runbook_base_url: None,
            webhook: None,
            queue_capacity: default_queue_capacity(),
            min_window_coverage: default_min_window_coverage(),
            rules: RulesConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub url: String,
}

fn default_resend() -> Duration {
    Duration::from_secs(60)
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_queue_capacity() -> usize {
    1024
}
/// A "6h" burn rate then spans at least 5h24m of data: the SRE workbook's factors keep
/// their meaning within 10%, and a fresh daemon says nothing it cannot back.
pub const DEFAULT_MIN_WINDOW_COVERAGE: f64 = 0.9;
fn default_min_window_coverage() -> f64 {
    DEFAULT_MIN_WINDOW_COVERAGE
}

/// `alerting.rules`: one optional override per alert.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesConfig {
    #[serde(rename = "LLMKVCacheSaturated", default)]
    pub kv_cache_saturated: LevelRule,
    #[serde(rename = "LLMGoodputDivergence", default)]
    pub goodput_divergence: DivergenceRule,
    #[serde(rename = "LLMTTFTAboveSLO", default)]
    pub ttft_above_slo: LatencyRule,
    #[serde(rename = "LLMTPOTAboveSLO", default)]
    pub tpot_above_slo: LatencyRule,
    #[serde(rename = "LLMErrorBudgetBurnFast", default)]
    pub burn_fast: BurnRule,
    #[serde(rename = "LLMErrorBudgetBurnSlow", default)]
    pub burn_slow: BurnRule,
    #[serde(rename = "LLMTargetDown", default)]
    pub target_down: BasicRule,
    #[serde(rename = "LLMPreemptionsSustained", default)]
    pub preemptions: WindowedRule,
    #[serde(rename = "LLMQueueGrowing", default)]
    pub queue_growing: WindowedRule,
}

/// Knobs every rule has.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
}

/// A rule on a level (KV usage).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    pub threshold: Option<f64>,
}

/// A threshold on a quantity measured over a window.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowedRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    pub threshold: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_window")]
    pub window: Option<Window>,
    pub min_coverage: Option<f64>,
}

/// p99 against the SLO's own threshold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default, deserialize_with = "de_opt_window")]
    pub window: Option<Window>,
    pub min_coverage: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivergenceRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    /// Joint attainment estimate below this fires.
    pub threshold: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_window")]
    pub window: Option<Window>,
    /// Output tokens/s that must be exceeded, so idle engines stay quiet.
    pub throughput_floor: Option<f64>,
    pub min_coverage: Option<f64>,
}

/// A multi-window, multi-burn-rate pair.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurnRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de_opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    pub factor: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_window")]
    pub long_window: Option<Window>,
    #[serde(default, deserialize_with = "de_opt_window")]
    pub short_window: Option<Window>,
    /// Requests that must have finished in *each* window before the rule may fire.
    pub min_requests: Option<f64>,
    /// Coverage each of the two windows needs; defaults to `alerting.min_window_coverage`.
    pub min_coverage: Option<f64>,
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

fn de_opt_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Window>, D::Error> {
    let dur = de_duration(d)?;
    Window::new(dur).map(Some).ok_or_else(|| serde::de::Error::custom("a window must be longer than 0s"))
}

fn mins(m: u64) -> Duration {
    Duration::from_secs(60 * m)
}

fn win(secs: u64) -> Window {
    Window::new(Duration::from_secs(secs)).unwrap_or_else(|| unreachable!("non-zero constant"))
}

/// A rule's knobs that every kind has, as the user wrote them.
struct Common {
    enabled: Option<bool>,
    for_: Option<Duration>,
    severity: Option<Severity>,
    min_coverage: Option<f64>,
}

impl AlertingConfig {
    /// Fills a rule's common knobs from the override or the defaults. Rules that read no
    /// window need no coverage.
    fn rule(&self, name: AlertName, c: Common, kind: RuleKind) -> Option<Rule> {
        if c.enabled == Some(false) {
            return None;
        }
        let (default_for, default_sev) = name.defaults();
        let min_coverage =
            if kind.windows().is_empty() { 0.0 } else { c.min_coverage.unwrap_or(self.min_window_coverage) };
        Some(Rule {
            name,
            for_: c.for_.unwrap_or(default_for),
            severity: c.severity.unwrap_or(default_sev),
            kind,
            min_coverage,
        })
    }
}

impl AlertName {
    /// Default `for` and severity.
    pub fn defaults(self) -> (Duration, Severity) {
        match self {
            AlertName::KvCacheSaturated => (mins(2), Severity::Page),
            AlertName::GoodputDivergence => (mins(5), Severity::Page),
            AlertName::TtftAboveSlo | AlertName::TpotAboveSlo => (mins(5), Severity::Ticket),
            AlertName::ErrorBudgetBurnFast => (mins(2), Severity::Page),
            AlertName::ErrorBudgetBurnSlow => (mins(15), Severity::Page),
            AlertName::TargetDown => (mins(1), Severity::Page),
            AlertName::PreemptionsSustained | AlertName::QueueGrowing => (mins(10), Severity::Ticket),
        }
    }
}

impl AlertingConfig {
    /// Every destination URL of the Alertmanager API, in config order.
    pub fn alertmanager_urls(&self) -> Vec<String> {
        self.alertmanager.iter().chain(&self.alertmanagers).map(|e| e.url.clone()).collect()
    }

    /// The enabled rules with every knob filled in.
    pub fn rule_set(&self) -> RuleSet {
        let r = &self.rules;
        let mut rules = Vec::new();
        let k = &r.kv_cache_saturated;
        rules.extend(self.rule(
            AlertName::KvCacheSaturated,
            Common { enabled: k.enabled, for_: k.for_, severity: k.severity, min_coverage: None },
            RuleKind::KvCacheSaturated { threshold: k.threshold.unwrap_or(0.90) },
        ));
        let g = &r.goodput_divergence;
        rules.extend(self.rule(
            AlertName::GoodputDivergence,
            Common { enabled: g.enabled, for_: g.for_, severity: g.severity, min_coverage: g.min_coverage },
            RuleKind::GoodputDivergence {
                threshold: g.threshold.unwrap_or(0.90),
                window: g.window.unwrap_or(win(300)),
                throughput_floor: g.throughput_floor.unwrap_or(10.0),
            },
        ));
        for (name, l, clause) in [
            (AlertName::TtftAboveSlo, &r.ttft_above_slo, LatencyClause::Ttft),
            (AlertName::TpotAboveSlo, &r.tpot_above_slo, LatencyClause::Tpot),
        ] {
            rules.extend(self.rule(
                name,
                Common { enabled: l.enabled, for_: l.for_, severity: l.severity, min_coverage: l.min_coverage },
                RuleKind::LatencyAboveSlo { clause, window: l.window.unwrap_or(win(300)) },
            ));
        }
        for (name, b, (factor, long, short)) in [
            (AlertName::ErrorBudgetBurnFast, &r.burn_fast, (14.4, 3600, 300)),
            (AlertName::ErrorBudgetBurnSlow, &r.burn_slow, (6.0, 6 * 3600, 1800)),
        ] {
            rules.extend(self.rule(
                name,
                Common { enabled: b.enabled, for_: b.for_, severity: b.severity, min_coverage: b.min_coverage },
                RuleKind::ErrorBudgetBurn {
                    factor: b.factor.unwrap_or(factor),
                    long_window: b.long_window.unwrap_or(win(long)),
                    short_window: b.short_window.unwrap_or(win(short)),
                    min_requests: b.min_requests.unwrap_or(10.0),
                },
            ));
        }
        let t = &r.target_down;
        rules.extend(self.rule(
            AlertName::TargetDown,
            Common { enabled: t.enabled, for_: t.for_, severity: t.severity, min_coverage: None },
            RuleKind::TargetDown,
        ));
        let p = &r.preemptions;
        rules.extend(self.rule(
            AlertName::PreemptionsSustained,
            Common { enabled: p.enabled, for_: p.for_, severity: p.severity, min_coverage: p.min_coverage },
            RuleKind::PreemptionsSustained {
                per_second: p.threshold.unwrap_or(0.1),
                window: p.window.unwrap_or(win(300)),
            },
        ));
        let q = &r.queue_growing;
        rules.extend(self.rule(
            AlertName::QueueGrowing,
            Common { enabled: q.enabled, for_: q.for_, severity: q.severity, min_coverage: q.min_coverage },
            RuleKind::QueueGrowing { min_waiting: q.threshold.unwrap_or(10.0), window: q.window.unwrap_or(win(300)) },
        ));
        RuleSet { rules }
    }
}
