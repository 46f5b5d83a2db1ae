//! What the rules are generated from ([`RulesSpec`]) and what they are ([`RuleGroup`]s of
//! [`PromRule`]s, serialized as Prometheus writes them).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::alert::config::AlertingConfig;
use crate::duration::Window;
use crate::slo::Slo;

/// What the rules are generated from.
#[derive(Debug, Clone)]
pub struct RulesSpec {
    pub slos: Vec<Slo>,
    /// The daemon's windows; quantiles and attainment are recorded for each, plus every
    /// window an alert reads.
    pub windows: Vec<Window>,
    pub alerting: AlertingConfig,
    /// Extra label matchers put on every engine series, e.g. `job="vllm"`.
    pub selector: Option<String>,
    /// The `instance` label of each configured target's series in Prometheus, by target
    /// name: what an SLO's `targets` scope becomes (docs/fleet.md#scoped-slos).
    pub target_instances: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleGroup {
    pub name: String,
    pub rules: Vec<PromRule>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PromRule {
    Record {
        record: String,
        expr: String,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        labels: BTreeMap<String, String>,
    },
    Alert {
        alert: String,
        expr: String,
        #[serde(rename = "for")]
        for_: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
}
