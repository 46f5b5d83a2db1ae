//! The `alerting:` section of the config: where alerts go and how each rule is tuned.
//!
//! Users write partial overrides (`rules.LLMKVCacheSaturated: {for: 1m}`); [`AlertingConfig::rule_set`]
//! merges them over each rule's defaults into a [`RuleSet`] of fully specified rules, leaving
//! disabled ones out. Unknown keys and unknown alert names are errors, so typos never silently
//! fall back to defaults. Each value is checked as it is read (the `deserialize_with`
//! functions below), so the config loader reports a bad one at its line and column.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::rule::{ALERTNAME, AlertName, Rule, RuleKind, RuleSet, Severity};
use super::table::spec;
use crate::duration::{Window, de};

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
    #[serde(default = "default_resend", deserialize_with = "de::interval")]
    pub resend_interval: Duration,
    /// Per-request HTTP timeout for deliveries.
    #[serde(default = "default_timeout", deserialize_with = "de::positive")]
    pub timeout: Duration,
    /// The runbooks each alert's `runbook_url` annotation points into (docs/alerts.md#runbooks):
    /// `<this>#<anchor>`, or this with `{alertname}` replaced. Without it, the daemon links
    /// to its own `/runbooks/` page.
    #[serde(default, deserialize_with = "runbook_page")]
    pub runbook_url: Option<String>,
    /// Deprecated spelling of `runbook_url: <this>/{alertname}` ([`base_as_page`]); `goodput
    /// check` warns where it is written.
    #[serde(default)]
    pub runbook_base_url: Option<String>,
    /// A generic JSON webhook that gets the same alerts as Alertmanager.
    #[serde(default)]
    pub webhook: Option<Endpoint>,
    /// Most distinct alerts held per destination while it is unreachable.
    #[serde(default = "default_queue_capacity", deserialize_with = "at_least_one")]
    pub queue_capacity: usize,
    /// Share of each window a rule reads that must be covered by data before the rule may
    /// fire (docs/alerts.md#after-a-restart); a rule's own `min_coverage` overrides it.
    #[serde(default = "default_min_window_coverage", deserialize_with = "window_share")]
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
            runbook_url: None,
            runbook_base_url: None,
            webhook: None,
            queue_capacity: default_queue_capacity(),
            min_window_coverage: default_min_window_coverage(),
            rules: RulesConfig::default(),
        }
    }
}

/// An Alertmanager or webhook. `Debug` masks the URL's credentials (crate::redact).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    #[serde(deserialize_with = "http_url")]
    pub url: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("url", &crate::redact::url_str(&self.url)).finish()
    }
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
    #[serde(rename = "LLMCapacityHeadroomLow", default)]
    pub capacity_headroom_low: HeadroomRule,
}

/// Capacity headroom under a factor while arrivals rise (docs/capacity.md#the-alert).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadroomRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    /// Conservative capacity over the current arrival rate under this fires: 1.2 leaves
    /// 20 % of load to grow into.
    #[serde(default, deserialize_with = "positive")]
    pub threshold: Option<f64>,
}

/// Knobs every rule has.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
}

/// A rule on a level (KV usage).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default, deserialize_with = "ratio")]
    pub threshold: Option<f64>,
}

/// A threshold on a quantity measured over a window.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowedRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default, deserialize_with = "non_negative")]
    pub threshold: Option<f64>,
    #[serde(default, deserialize_with = "de::opt_window")]
    pub window: Option<Window>,
    #[serde(default, deserialize_with = "share")]
    pub min_coverage: Option<f64>,
}

/// p99 against the SLO's own threshold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default, deserialize_with = "de::opt_window")]
    pub window: Option<Window>,
    #[serde(default, deserialize_with = "share")]
    pub min_coverage: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivergenceRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    /// Joint attainment estimate below this fires.
    #[serde(default, deserialize_with = "ratio")]
    pub threshold: Option<f64>,
    #[serde(default, deserialize_with = "de::opt_window")]
    pub window: Option<Window>,
    /// Output tokens/s that must be exceeded, so idle engines stay quiet.
    #[serde(default, deserialize_with = "non_negative")]
    pub throughput_floor: Option<f64>,
    #[serde(default, deserialize_with = "share")]
    pub min_coverage: Option<f64>,
}

/// A multi-window, multi-burn-rate pair.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurnRule {
    pub enabled: Option<bool>,
    #[serde(rename = "for", default, deserialize_with = "de::opt_duration")]
    pub for_: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default, deserialize_with = "positive")]
    pub factor: Option<f64>,
    #[serde(default, deserialize_with = "de::opt_window")]
    pub long_window: Option<Window>,
    #[serde(default, deserialize_with = "de::opt_window")]
    pub short_window: Option<Window>,
    /// Requests that must have finished in *each* window before the rule may fire.
    #[serde(default, deserialize_with = "non_negative")]
    pub min_requests: Option<f64>,
    /// Coverage each of the two windows needs; defaults to `alerting.min_window_coverage`.
    #[serde(default, deserialize_with = "share")]
    pub min_coverage: Option<f64>,
}

fn number<'de, D: Deserializer<'de>>(d: D, ok: fn(f64) -> bool, expected: &str) -> Result<Option<f64>, D::Error> {
    let v = f64::deserialize(d)?;
    if ok(v) { Ok(Some(v)) } else { Err(serde::de::Error::custom(format!("{v} is out of range; expected {expected}"))) }
}

fn ratio<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    number(d, |v| v > 0.0 && v <= 1.0, "a ratio in (0, 1], like 0.9")
}

/// A share of a window, where 0 (judge from the first scrape) and 1 (the whole window) are
/// both meaningful.
fn share<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    number(d, |v| (0.0..=1.0).contains(&v), "a share of the window in [0, 1], like 0.9")
}

fn window_share<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    share(d).map(|v| v.unwrap_or_else(default_min_window_coverage))
}

fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    number(d, |v| v >= 0.0, "a number ≥ 0")
}

fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    number(d, |v| v > 0.0 && v.is_finite(), "a number > 0, like 14.4")
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(serde::de::Error::custom("0 is out of range; expected at least 1, like 1024")),
        n => Ok(n),
    }
}

/// An Alertmanager or webhook URL: http or https, with a host.
fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    crate::redact::check_http_url(&s, "http://127.0.0.1:9093").map_err(serde::de::Error::custom)?;
    Ok(s)
}

/// `alerting.runbook_url`: an http or https URL with a host. Without `{alertname}` it must
/// have no `#fragment`, since each alert adds its own anchor.
fn runbook_page<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?.trim().to_string();
    let example = "https://goodput.example.com/runbooks/";
    crate::redact::check_http_url(&s.replace(ALERTNAME, "LLMTargetDown"), example).map_err(serde::de::Error::custom)?;
    if !s.contains(ALERTNAME) && s.contains('#') {
        return Err(serde::de::Error::custom(format!(
            "{:?} has a #fragment, but each alert adds its own (#llmtargetdown): write the page's address without it, like {example}, or put {ALERTNAME} where the alert name goes",
            crate::redact::url_str(&s)
        )));
    }
    Ok(Some(s))
}

/// The `runbook_url` that gives the links a deprecated `runbook_base_url` gave: the base, a
/// `/` unless it ends in `/` or `#`, and the alert name.
pub fn base_as_page(base: &str) -> String {
    let sep = if base.ends_with('/') || base.ends_with('#') { "" } else { "/" };
    format!("{base}{sep}{ALERTNAME}")
}

/// A rule's knobs that every kind has, as the user wrote them.
struct Common {
    enabled: Option<bool>,
    for_: Option<Duration>,
    severity: Option<Severity>,
    min_coverage: Option<f64>,
}

/// The rule `name` with the overrides given, over the table's defaults; `None` if disabled.
/// Rules that read no window need no coverage; the others default to `min_window_coverage`.
fn rule(name: AlertName, c: Common, min_window_coverage: f64, kind: impl FnOnce(RuleKind) -> RuleKind) -> Option<Rule> {
    if c.enabled == Some(false) {
        return None;
    }
    let row = spec(name);
    let kind = kind(row.defaults.clone());
    let min_coverage = if kind.windows().is_empty() { 0.0 } else { c.min_coverage.unwrap_or(min_window_coverage) };
    Some(Rule {
        name,
        for_: c.for_.unwrap_or(row.for_),
        severity: c.severity.unwrap_or(row.severity),
        kind,
        min_coverage,
    })
}

impl AlertingConfig {
    /// Where each alert's `runbook_url` points, as written: `runbook_url`, or the deprecated
    /// `runbook_base_url` turned into one; `None` when neither is set.
    pub fn runbook_page(&self) -> Option<String> {
        self.runbook_url.clone().or_else(|| self.runbook_base_url.as_deref().map(base_as_page))
    }

    /// Every destination URL of the Alertmanager API, in config order.
    pub fn alertmanager_urls(&self) -> Vec<String> {
        self.alertmanager.iter().chain(&self.alertmanagers).map(|e| e.url.clone()).collect()
    }

    /// The enabled rules with every knob filled in: the override where one is written,
    /// else the default from the alert table (docs/alerts.md).
    pub fn rule_set(&self) -> RuleSet {
        let r = &self.rules;
        let mut rules = Vec::new();
        let cov = self.min_window_coverage;
        let k = &r.kv_cache_saturated;
        rules.extend(rule(
            AlertName::KvCacheSaturated,
            Common { enabled: k.enabled, for_: k.for_, severity: k.severity, min_coverage: None },
            cov,
            |d| match d {
                RuleKind::KvCacheSaturated { threshold } => {
                    RuleKind::KvCacheSaturated { threshold: k.threshold.unwrap_or(threshold) }
                }
                other => other,
            },
        ));
        let g = &r.goodput_divergence;
        rules.extend(rule(
            AlertName::GoodputDivergence,
            Common { enabled: g.enabled, for_: g.for_, severity: g.severity, min_coverage: g.min_coverage },
            cov,
            |d| match d {
                RuleKind::GoodputDivergence { threshold, window, throughput_floor } => RuleKind::GoodputDivergence {
                    threshold: g.threshold.unwrap_or(threshold),
                    window: g.window.unwrap_or(window),
                    throughput_floor: g.throughput_floor.unwrap_or(throughput_floor),
                },
                other => other,
            },
        ));
        for (name, l) in [(AlertName::TtftAboveSlo, &r.ttft_above_slo), (AlertName::TpotAboveSlo, &r.tpot_above_slo)] {
            rules.extend(rule(
                name,
                Common { enabled: l.enabled, for_: l.for_, severity: l.severity, min_coverage: l.min_coverage },
                cov,
                |d| match d {
                    RuleKind::LatencyAboveSlo { clause, window } => {
                        RuleKind::LatencyAboveSlo { clause, window: l.window.unwrap_or(window) }
                    }
                    other => other,
                },
            ));
        }
        for (name, b) in
            [(AlertName::ErrorBudgetBurnFast, &r.burn_fast), (AlertName::ErrorBudgetBurnSlow, &r.burn_slow)]
        {
            rules.extend(rule(
                name,
                Common { enabled: b.enabled, for_: b.for_, severity: b.severity, min_coverage: b.min_coverage },
                cov,
                |d| match d {
                    RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
                        RuleKind::ErrorBudgetBurn {
                            factor: b.factor.unwrap_or(factor),
                            long_window: b.long_window.unwrap_or(long_window),
                            short_window: b.short_window.unwrap_or(short_window),
                            min_requests: b.min_requests.unwrap_or(min_requests),
                        }
                    }
                    other => other,
                },
            ));
        }
        let t = &r.target_down;
        rules.extend(rule(
            AlertName::TargetDown,
            Common { enabled: t.enabled, for_: t.for_, severity: t.severity, min_coverage: None },
            cov,
            |d| d,
        ));
        let p = &r.preemptions;
        rules.extend(rule(
            AlertName::PreemptionsSustained,
            Common { enabled: p.enabled, for_: p.for_, severity: p.severity, min_coverage: p.min_coverage },
            cov,
            |d| match d {
                RuleKind::PreemptionsSustained { per_second, window } => RuleKind::PreemptionsSustained {
                    per_second: p.threshold.unwrap_or(per_second),
                    window: p.window.unwrap_or(window),
                },
                other => other,
            },
        ));
        let q = &r.queue_growing;
        rules.extend(rule(
            AlertName::QueueGrowing,
            Common { enabled: q.enabled, for_: q.for_, severity: q.severity, min_coverage: q.min_coverage },
            cov,
            |d| match d {
                RuleKind::QueueGrowing { min_waiting, window } => RuleKind::QueueGrowing {
                    min_waiting: q.threshold.unwrap_or(min_waiting),
                    window: q.window.unwrap_or(window),
                },
                other => other,
            },
        ));
        let h = &r.capacity_headroom_low;
        rules.extend(rule(
            AlertName::CapacityHeadroomLow,
            Common { enabled: h.enabled, for_: h.for_, severity: h.severity, min_coverage: None },
            cov,
            |d| match d {
                RuleKind::CapacityHeadroomLow { factor } => {
                    RuleKind::CapacityHeadroomLow { factor: h.threshold.unwrap_or(factor) }
                }
                other => other,
            },
        ));
        RuleSet { rules }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::rule::runbook_url;

    fn alerting(json: &str) -> Result<AlertingConfig, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn runbook_links_follow_one_rule() {
        let page = "https://goodput.example.com/runbooks/";
        assert_eq!(runbook_url(page, AlertName::TargetDown), "https://goodput.example.com/runbooks/#llmtargetdown");
        let wiki = "https://wiki.example.com/llm/{alertname}?from=goodput";
        assert_eq!(runbook_url(wiki, AlertName::TargetDown), "https://wiki.example.com/llm/LLMTargetDown?from=goodput");
        let c = alerting(&format!(r#"{{"runbook_url": " {page} "}}"#)).unwrap();
        assert_eq!(c.runbook_page().as_deref(), Some(page));
        assert_eq!(AlertingConfig::default().runbook_page(), None);
    }

    #[test]
    fn the_deprecated_base_gives_the_links_it_gave() {
        for (base, link) in [
            ("https://rb.example/llm/", "https://rb.example/llm/LLMQueueGrowing"),
            ("https://rb.example/llm", "https://rb.example/llm/LLMQueueGrowing"),
            ("https://rb.example/all#", "https://rb.example/all#LLMQueueGrowing"),
        ] {
            let c = alerting(&format!(r#"{{"runbook_base_url": "{base}"}}"#)).unwrap();
            assert_eq!(runbook_url(&c.runbook_page().unwrap(), AlertName::QueueGrowing), link, "{base}");
        }
    }

    #[test]
    fn a_runbook_url_that_cannot_link_is_refused() {
        let e = alerting(r#"{"runbook_url": "https://rb.example/runbooks.md#top"}"#).unwrap_err();
        assert!(e.contains("has a #fragment") && e.contains("{alertname}"), "{e}");
        let e = alerting(r#"{"runbook_url": "wiki/llm"}"#).unwrap_err();
        assert!(e.contains("is not a URL"), "{e}");
        let e = alerting(r#"{"runbook_url": "ftp://rb.example/"}"#).unwrap_err();
        assert!(e.contains("must start with http:// or https://"), "{e}");
        assert!(alerting(r#"{"runbook_url": "https://rb.example/all#{alertname}"}"#).is_ok());
    }
}
