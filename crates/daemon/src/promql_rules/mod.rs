//! The PromQL twin of the daemon's SLO math and alert rules, for `goodput rules`: recording
//! rules that compute quantiles, attainment, burn rates and throughput fleet-wide (buckets
//! summed across pods before the quantile), the exact attainment, goodput and burn rate
//! from the sidecars' request counters ([`exact`]), and the same alerts on top of them.
//!
//! Output is either a plain Prometheus rule file or a `monitoring.coreos.com/v1`
//! PrometheusRule. Everything here is pure: config in, YAML text out.

mod alerts;
mod error;
mod exact;
mod expr;
mod recording;
mod scope;
mod types;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::slo::Slo;

pub use error::{RenderError, ScopeError, SelectorError, SelectorProblem};
pub use expr::{Metrics, le_regex, parse_selector};
pub use scope::{ScopeExpr, scope_expr};
pub use types::{PromRule, RuleGroup, RulesSpec};

/// Recording rules, alerts, then the exact recording rules. An error when an SLO's scope
/// cannot be written in PromQL: the rules are never generated wider than the SLO.
pub fn groups(spec: &RulesSpec) -> Result<Vec<RuleGroup>, ScopeError> {
    let m = Metrics::vllm(spec.selector.as_deref());
    let scopes = spec
        .slos
        .iter()
        .map(|s| scope_expr(s, &spec.target_instances).map(|e| (s, e)))
        .collect::<Result<Vec<_>, _>>()?;
    let (_, windows) = recording::windows(spec);
    let slos: Vec<&Slo> = spec.slos.iter().collect();
    Ok(vec![
        RuleGroup { name: "goodput-slo-recording".into(), rules: recording::rules(spec, &scopes, &m) },
        RuleGroup { name: "goodput-slo-alerts".into(), rules: alerts::rules(spec, &scopes, &m) },
        // Its own group, after the alerts: groups are evaluated independently, and the
        // alerts read its series as they read the first group's.
        RuleGroup { name: "goodput-slo-exact-recording".into(), rules: exact::rules(&windows, &slos) },
    ])
}

#[derive(Serialize)]
struct RuleFile<'a> {
    groups: &'a [RuleGroup],
}

#[derive(Serialize)]
struct PrometheusRule<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    spec: RuleFile<'a>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    labels: BTreeMap<&'static str, &'static str>,
}

fn yaml<T: Serialize>(v: &T) -> Result<String, RenderError> {
    serde_saphyr::to_string(v).map_err(|e| RenderError(e.to_string()))
}

/// A plain Prometheus rule file (`rule_files:`).
pub fn render_prometheus(groups: &[RuleGroup]) -> Result<String, RenderError> {
    yaml(&RuleFile { groups })
}

/// A Prometheus Operator `PrometheusRule` named `name`.
pub fn render_prometheusrule(groups: &[RuleGroup], name: &str) -> Result<String, RenderError> {
    let mut labels = BTreeMap::new();
    labels.insert("app.kubernetes.io/name", "goodput");
    yaml(&PrometheusRule {
        api_version: "monitoring.coreos.com/v1",
        kind: "PrometheusRule",
        metadata: Metadata { name, labels },
        spec: RuleFile { groups },
    })
}
