//! The `alerting:` section of the config: where alerts go and how each rule is tuned.
//!
//! Users write partial overrides (`rules.LLMKVCacheSaturated: {for: 1m}`); [`AlertingConfig::rule_set`]
//! merges them over each rule's defaults into a [`RuleSet`] of fully specified rules, leaving
//! disabled ones out. Unknown keys and unknown alert names are errors, so typos never silently
//! fall back to defaults.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::rule::{AlertName, Rule, RuleKind, RuleSet, Severity};
use super::table::spec;
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

/// The rule `name` with the overrides given, over the table's defaults; `None` if disabled.
fn rule(
    name: AlertName,
    enabled: Option<bool>,
    for_: Option<Duration>,
    sev: Option<Severity>,
    kind: impl FnOnce(RuleKind) -> RuleKind,
) -> Option<Rule> {
    if enabled == Some(false) {
        return None;
    }
    let row = spec(name);
    Some(Rule {
        name,
        for_: for_.unwrap_or(row.for_),
        severity: sev.unwrap_or(row.severity),
        kind: kind(row.defaults.clone()),
    })
}

impl AlertingConfig {
    /// Every destination URL of the Alertmanager API, in config order.
    pub fn alertmanager_urls(&self) -> Vec<String> {
        self.alertmanager.iter().chain(&self.alertmanagers).map(|e| e.url.clone()).collect()
    }

    /// The enabled rules with every knob filled in: the override where one is written,
    /// else the default from the alert table (docs/alerts.md).
    pub fn rule_set(&self) -> RuleSet {
        let r = &self.rules;
        let mut rules = Vec::new();
        let k = &r.kv_cache_saturated;
        rules.extend(rule(AlertName::KvCacheSaturated, k.enabled, k.for_, k.severity, |d| match d {
            RuleKind::KvCacheSaturated { threshold } => {
                RuleKind::KvCacheSaturated { threshold: k.threshold.unwrap_or(threshold) }
            }
            other => other,
        }));
        let g = &r.goodput_divergence;
        rules.extend(rule(AlertName::GoodputDivergence, g.enabled, g.for_, g.severity, |d| match d {
            RuleKind::GoodputDivergence { threshold, window, throughput_floor } => RuleKind::GoodputDivergence {
                threshold: g.threshold.unwrap_or(threshold),
                window: g.window.unwrap_or(window),
                throughput_floor: g.throughput_floor.unwrap_or(throughput_floor),
            },
            other => other,
        }));
        for (name, l) in [(AlertName::TtftAboveSlo, &r.ttft_above_slo), (AlertName::TpotAboveSlo, &r.tpot_above_slo)] {
            rules.extend(rule(name, l.enabled, l.for_, l.severity, |d| match d {
                RuleKind::LatencyAboveSlo { clause, window } => {
                    RuleKind::LatencyAboveSlo { clause, window: l.window.unwrap_or(window) }
                }
                other => other,
            }));
        }
        for (name, b) in
            [(AlertName::ErrorBudgetBurnFast, &r.burn_fast), (AlertName::ErrorBudgetBurnSlow, &r.burn_slow)]
        {
            rules.extend(rule(name, b.enabled, b.for_, b.severity, |d| match d {
                RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
                    RuleKind::ErrorBudgetBurn {
                        factor: b.factor.unwrap_or(factor),
                        long_window: b.long_window.unwrap_or(long_window),
                        short_window: b.short_window.unwrap_or(short_window),
                        min_requests: b.min_requests.unwrap_or(min_requests),
                    }
                }
                other => other,
            }));
        }
        let t = &r.target_down;
        rules.extend(rule(AlertName::TargetDown, t.enabled, t.for_, t.severity, |d| d));
        let p = &r.preemptions;
        rules.extend(rule(AlertName::PreemptionsSustained, p.enabled, p.for_, p.severity, |d| match d {
            RuleKind::PreemptionsSustained { per_second, window } => RuleKind::PreemptionsSustained {
                per_second: p.threshold.unwrap_or(per_second),
                window: p.window.unwrap_or(window),
            },
            other => other,
        }));
        let q = &r.queue_growing;
        rules.extend(rule(AlertName::QueueGrowing, q.enabled, q.for_, q.severity, |d| match d {
            RuleKind::QueueGrowing { min_waiting, window } => RuleKind::QueueGrowing {
                min_waiting: q.threshold.unwrap_or(min_waiting),
                window: q.window.unwrap_or(window),
            },
            other => other,
        }));
        RuleSet { rules }
    }
}
