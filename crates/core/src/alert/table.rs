//! Every alert in one table: its name, default severity, `for` and thresholds, and the
//! summary and description templates (docs/alerts.md).
//!
//! The daemon's rules ([`super::rule`]) and the PromQL generator (`goodput rules`) both
//! read this table, so an alert reads the same whichever path raised it. A template names
//! what it shows as `{placeholder}`s; each path fills them its own way: the daemon with the
//! values it measured, the generator with Prometheus template expressions such as
//! `{{ $value | humanizePercentage }}`.

use std::time::Duration;

use super::kind::{AlertName, LatencyClause, RuleKind, Severity};
use crate::duration::Window;

// The name is a row of the table, so it is defined here, beside the rest of the row.
impl AlertName {
    pub fn as_str(self) -> &'static str {
        spec(self).alertname
    }
}

/// One alert's row.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSpec {
    pub name: AlertName,
    /// The `alertname` label.
    pub alertname: &'static str,
    pub severity: Severity,
    pub for_: Duration,
    /// The rule's knobs when the config overrides none.
    pub defaults: RuleKind,
    pub summary: &'static str,
    pub description: &'static str,
}

/// The quantile the latency alerts compare with each SLO's threshold. The daemon evaluates
/// it whatever `quantiles` says (docs/config.md#top-level).
pub const LATENCY_ALERT_QUANTILE: f64 = 0.99;

/// The placeholders templates may use. What each holds is up to the row:
/// `who` names the target and model (or the fleet), `value` is the measured value that
/// crossed `threshold`, and `detail` is what only the daemon knows (bounds, window maxima,
/// request counts), empty in the generated rules.
pub const PLACEHOLDERS: [&str; 11] = [
    "who",
    "value",
    "threshold",
    "window",
    "slo",
    "clause",
    "detail",
    "throughput",
    "long_value",
    "long_window",
    "objective",
];

const fn mins(m: u64) -> Duration {
    Duration::from_secs(60 * m)
}

const LATENCY_SUMMARY: &str = "p99 {clause} of {who} is {value} (SLO {slo}: {threshold})";
const LATENCY_DESCRIPTION: &str =
    "Over {window}, p99 {clause} is {value}, above the {threshold} threshold of SLO {slo}.";
const BURN_SUMMARY: &str = "{who} burns the error budget of SLO {slo} at {value}×";
const BURN_DESCRIPTION: &str = "Burn rate is {value}× over {window} and {long_value}× over {long_window} (threshold {threshold}, objective {objective}){detail}.";

/// In [`AlertName::ALL`] order.
pub static TABLE: [AlertSpec; 10] = [
    AlertSpec {
        name: AlertName::KvCacheSaturated,
        alertname: "LLMKVCacheSaturated",
        severity: Severity::Page,
        for_: mins(2),
        defaults: RuleKind::KvCacheSaturated { threshold: 0.90 },
        summary: "KV cache of {who} is {value} full",
        description: "KV-cache usage is {value}{detail}, above the critical level {threshold}; preemptions and swapping get likely.",
    },
    AlertSpec {
        name: AlertName::GoodputDivergence,
        alertname: "LLMGoodputDivergence",
        severity: Severity::Page,
        for_: mins(5),
        defaults: RuleKind::GoodputDivergence {
            threshold: 0.90,
            window: Window::from_secs(300),
            throughput_floor: 10.0,
        },
        summary: "Goodput of {who} diverges from throughput (SLO {slo})",
        description: "Over {window}, only {value} of requests met SLO {slo} ({detail}threshold {threshold}) while output throughput is {throughput}.",
    },
    AlertSpec {
        name: AlertName::TtftAboveSlo,
        alertname: "LLMTTFTAboveSLO",
        severity: Severity::Ticket,
        for_: mins(5),
        defaults: RuleKind::LatencyAboveSlo { clause: LatencyClause::Ttft, window: Window::from_secs(300) },
        summary: LATENCY_SUMMARY,
        description: LATENCY_DESCRIPTION,
    },
    AlertSpec {
        name: AlertName::TpotAboveSlo,
        alertname: "LLMTPOTAboveSLO",
        severity: Severity::Ticket,
        for_: mins(5),
        defaults: RuleKind::LatencyAboveSlo { clause: LatencyClause::Tpot, window: Window::from_secs(300) },
        summary: LATENCY_SUMMARY,
        description: LATENCY_DESCRIPTION,
    },
    AlertSpec {
        name: AlertName::ErrorBudgetBurnFast,
        alertname: "LLMErrorBudgetBurnFast",
        severity: Severity::Page,
        for_: mins(2),
        defaults: RuleKind::ErrorBudgetBurn {
            factor: 14.4,
            long_window: Window::from_secs(3600),
            short_window: Window::from_secs(300),
            min_requests: 10.0,
        },
        summary: BURN_SUMMARY,
        description: BURN_DESCRIPTION,
    },
    AlertSpec {
        name: AlertName::ErrorBudgetBurnSlow,
        alertname: "LLMErrorBudgetBurnSlow",
        severity: Severity::Page,
        for_: mins(15),
        defaults: RuleKind::ErrorBudgetBurn {
            factor: 6.0,
            long_window: Window::from_secs(6 * 3600),
            short_window: Window::from_secs(1800),
            min_requests: 10.0,
        },
        summary: BURN_SUMMARY,
        description: BURN_DESCRIPTION,
    },
    AlertSpec {
        name: AlertName::TargetDown,
        alertname: "LLMTargetDown",
        severity: Severity::Page,
        for_: mins(1),
        defaults: RuleKind::TargetDown,
        summary: "{who} is down",
        description: "Scrapes of {who}{detail} are failing; nothing about it can be measured.",
    },
    AlertSpec {
        name: AlertName::PreemptionsSustained,
        alertname: "LLMPreemptionsSustained",
        severity: Severity::Ticket,
        for_: mins(10),
        defaults: RuleKind::PreemptionsSustained { per_second: 0.1, window: Window::from_secs(300) },
        summary: "{who} preempts {value} requests/s",
        description: "Over {window}, the engine preempted {value} requests/s (threshold {threshold}); KV cache is too small for the load.",
    },
    AlertSpec {
        name: AlertName::QueueGrowing,
        alertname: "LLMQueueGrowing",
        severity: Severity::Ticket,
        for_: mins(10),
        defaults: RuleKind::QueueGrowing { min_waiting: 10.0, window: Window::from_secs(300) },
        summary: "Queue of {who} is growing: {value} waiting",
        description: "Waiting requests rose {detail}over {window} to {value} (alerting from {threshold}); arrivals exceed capacity.",
    },
    AlertSpec {
        name: AlertName::CapacityHeadroomLow,
        alertname: "LLMCapacityHeadroomLow",
        severity: Severity::Ticket,
        for_: mins(1),
        defaults: RuleKind::CapacityHeadroomLow { factor: 1.2 },
        summary: "{who} is near its capacity for SLO {slo}: headroom {value}",
        description: "Arrivals are rising ({throughput}) and the conservative capacity for SLO {slo} is {detail}: headroom {value}, under {threshold}. Past it, attainment fell below the objective before.",
    },
];

impl AlertName {
    /// Whether `goodput rules` can write this alert in PromQL. The capacity alert reads the
    /// daemon's own estimate (a history, an isotonic fit, a bootstrap), which PromQL cannot
    /// compute (docs/alerts.md#alerts-without-a-promql-twin).
    pub fn has_promql_twin(self) -> bool {
        self != AlertName::CapacityHeadroomLow
    }
}

/// The row of `name`.
pub fn spec(name: AlertName) -> &'static AlertSpec {
    &TABLE[name as usize]
}

/// Fills the `{placeholder}`s of `template` from `vars` in one pass, so that values may
/// hold braces of their own (Prometheus templates do). A placeholder without a value is a
/// bug in the caller: debug builds panic, release builds leave it as written.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            rest = &rest[open..];
            break;
        };
        let key = &after[..close];
        match vars.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => out.push_str(v),
            None => {
                debug_assert!(false, "no value for {{{key}}} in {template:?}");
                out.push_str(&rest[open..open + close + 2]);
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The placeholders `template` uses, in order of appearance.
pub fn placeholders(template: &str) -> Vec<&str> {
    template.split('{').skip(1).filter_map(|p| p.split_once('}').map(|(k, _)| k)).collect()
}

/// A share as a percentage with one decimal, `0.953` → `95.3%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// Seconds the way the config writes durations: `500ms`, `2.5s`.
pub fn secs(x: f64) -> String {
    if x < 1.0 { format!("{:.0}ms", x * 1000.0) } else { format!("{x:.3}s") }
}

/// An SLO threshold as the config writes it: `500ms`, `1s`, `2.5s`.
pub fn limit(d: Duration) -> String {
    if d < Duration::from_secs(1) && d.as_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_alert_in_order_with_matching_defaults() {
        for (i, name) in AlertName::ALL.iter().enumerate() {
            let row = &TABLE[i];
            assert_eq!(row.name, *name);
            let kind_fits = matches!(
                (name, &row.defaults),
                (AlertName::KvCacheSaturated, RuleKind::KvCacheSaturated { .. })
                    | (AlertName::GoodputDivergence, RuleKind::GoodputDivergence { .. })
                    | (AlertName::TtftAboveSlo, RuleKind::LatencyAboveSlo { clause: LatencyClause::Ttft, .. })
                    | (AlertName::TpotAboveSlo, RuleKind::LatencyAboveSlo { clause: LatencyClause::Tpot, .. })
                    | (
                        AlertName::ErrorBudgetBurnFast | AlertName::ErrorBudgetBurnSlow,
                        RuleKind::ErrorBudgetBurn { .. }
                    )
                    | (AlertName::TargetDown, RuleKind::TargetDown)
                    | (AlertName::PreemptionsSustained, RuleKind::PreemptionsSustained { .. })
                    | (AlertName::QueueGrowing, RuleKind::QueueGrowing { .. })
                    | (AlertName::CapacityHeadroomLow, RuleKind::CapacityHeadroomLow { .. })
            );
            assert!(kind_fits, "{name:?}: {:?}", row.defaults);
        }
    }

    #[test]
    fn templates_use_only_known_placeholders() {
        for row in &TABLE {
            for t in [row.summary, row.description] {
                for p in placeholders(t) {
                    assert!(PLACEHOLDERS.contains(&p), "{}: unknown {{{p}}} in {t:?}", row.alertname);
                }
            }
        }
    }

    #[test]
    fn render_fills_once_and_keeps_braces_in_values() {
        let got = render("{who} is {value}", &[("who", "{{ $labels.model }}"), ("value", "95%")]);
        assert_eq!(got, "{{ $labels.model }} is 95%");
        assert_eq!(render("no placeholders", &[]), "no placeholders");
        assert_eq!(placeholders(BURN_SUMMARY), ["who", "slo", "value"]);
    }

    #[test]
    fn limits_read_like_the_config() {
        assert_eq!(limit(Duration::from_millis(500)), "500ms");
        assert_eq!(limit(Duration::from_millis(50)), "50ms");
        assert_eq!(limit(Duration::from_secs(1)), "1s");
        assert_eq!(limit(Duration::from_millis(2500)), "2.5s");
    }
}
