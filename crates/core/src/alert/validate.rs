//! Checks of the `alerting:` section for `goodput check`: errors that make the config
//! unusable and warnings about rules that cannot behave as written.

use super::config::AlertingConfig;
use super::rule::{RuleKind, RuleSet, effective_factor, max_burn};
use super::table::LATENCY_ALERT_QUANTILE;
use crate::duration::Window;
use crate::slo::Slo;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Windows the enabled rules read; the daemon must evaluate each of them.
pub fn required_windows(rules: &RuleSet) -> Vec<Window> {
    let mut out = Vec::new();
    for r in &rules.rules {
        out.extend(r.kind.windows());
    }
    out.sort();
    out.dedup();
    out
}

/// Latency quantiles the enabled rules read; the daemon evaluates each of them whatever
/// `quantiles` lists, as it does for windows.
pub fn required_quantiles(rules: &RuleSet) -> Vec<f64> {
    if rules.rules.iter().any(|r| matches!(r.kind, RuleKind::LatencyAboveSlo { .. })) {
        vec![LATENCY_ALERT_QUANTILE]
    } else {
        Vec::new()
    }
}

/// The latency quantiles the enabled rules read of `window` (the p99 a latency rule
/// compares), so a window only the rules read computes no other.
pub fn required_quantiles_at(rules: &RuleSet, window: Window) -> Vec<f64> {
    let reads =
        rules.rules.iter().any(|r| matches!(r.kind, RuleKind::LatencyAboveSlo { window: w, .. } if w == window));
    if reads { vec![LATENCY_ALERT_QUANTILE] } else { Vec::new() }
}

/// Validates `cfg` against the configured SLOs and windows.
pub fn validate(cfg: &AlertingConfig, slos: &[Slo], windows: &[Window]) -> Findings {
    let mut f = Findings::default();
    let urls = cfg.alertmanager_urls().into_iter().map(|u| ("alertmanager", u));
    for (what, raw) in urls.chain(cfg.webhook.iter().map(|w| ("webhook", w.url.clone()))) {
        let u = crate::redact::url_str(&raw);
        match url::Url::parse(&raw) {
            Ok(p) if matches!(p.scheme(), "http" | "https") => {}
            Ok(_) => f.errors.push(format!("alerting: {what} url {u:?} must start with http:// or https://")),
            Err(e) => f.errors.push(format!("alerting: {what} url {u:?} is not a URL ({e})")),
        }
    }
    if cfg.queue_capacity == 0 {
        f.errors.push("alerting.queue_capacity must be at least 1".into());
    }
    if cfg.resend_interval.is_zero() {
        f.errors.push("alerting.resend_interval must be longer than 0s, e.g. 1m".into());
    }
    let share = |v: f64| (0.0..=1.0).contains(&v);
    if !share(cfg.min_window_coverage) {
        f.errors.push(format!(
            "alerting.min_window_coverage is {}; it is a share of each window, write a value in [0, 1], e.g. 0.9",
            cfg.min_window_coverage
        ));
    }
    let rules = cfg.rule_set();
    for r in &rules.rules {
        let name = r.name.as_str();
        if !share(r.min_coverage) && r.min_coverage != cfg.min_window_coverage {
            f.errors.push(format!(
                "alerting.rules.{name}.min_coverage is {}; it is a share of each window, write a value in [0, 1], e.g. 0.9",
                r.min_coverage
            ));
        }
        let ratio = |f: &mut Findings, what: &str, v: f64| {
            if !(v > 0.0 && v <= 1.0) {
                f.errors.push(format!("alerting.rules.{name}.{what} is {v}; it is a ratio, write a value in (0, 1]"));
            }
        };
        let non_negative = |f: &mut Findings, what: &str, v: f64| {
            if v.is_nan() || v < 0.0 {
                f.errors.push(format!("alerting.rules.{name}.{what} is {v}; write a number ≥ 0"));
            }
        };
        match &r.kind {
            RuleKind::KvCacheSaturated { threshold } => ratio(&mut f, "threshold", *threshold),
            RuleKind::GoodputDivergence { threshold, throughput_floor, .. } => {
                ratio(&mut f, "threshold", *threshold);
                non_negative(&mut f, "throughput_floor", *throughput_floor);
            }
            RuleKind::PreemptionsSustained { per_second: v, .. } | RuleKind::QueueGrowing { min_waiting: v, .. } => {
                non_negative(&mut f, "threshold", *v)
            }
            RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => {
                if factor.is_nan() || *factor <= 0.0 {
                    f.errors
                        .push(format!("alerting.rules.{name}.factor is {factor}; write a burn factor > 0, e.g. 14.4"));
                }
                non_negative(&mut f, "min_requests", *min_requests);
                if short_window >= long_window {
                    f.warnings.push(format!(
                        "alerting.rules.{name}: short_window {short_window} is not shorter than long_window {long_window}; the short window is meant to be about 1/12 of the long one"
                    ));
                }
                for s in slos {
                    let objective = s.objective.get();
                    let (eff, clamped) = effective_factor(*factor, objective);
                    if clamped {
                        f.warnings.push(format!(
                            "alerting.rules.{name}.factor {factor} exceeds the highest possible burn rate of SLO {} (1/(1 − {}) = {:.4}); clamped to {eff:.4}, so it fires only when every request fails. Lower the factor or raise the objective.",
                            s.name,
                            objective,
                            max_burn(objective)
                        ));
                    }
                }
            }
            RuleKind::CapacityHeadroomLow { factor } => {
                if factor.is_nan() || *factor <= 0.0 {
                    f.errors.push(format!(
                        "alerting.rules.{name}.threshold is {factor}; write a headroom factor > 0, e.g. 1.2"
                    ));
                }
            }
            RuleKind::LatencyAboveSlo { .. } | RuleKind::TargetDown => {}
        }
    }
    // The daemon adds the windows the rules read to those it evaluates
    // (`Config::eval_windows`), so a rule window missing from `windows` is not an error.
    let _ = windows;
    f
}
