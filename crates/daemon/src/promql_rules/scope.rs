//! An SLO's scope in PromQL (docs/fleet.md#scoped-slos).
//!
//! A model scope is a matcher: `model_name=~"a|b"` on vLLM's series, `model=~"a|b"` on the
//! recorded ones. A target scope needs to know which series belong to a configured target,
//! and goodput's target names are on no series in Prometheus: the generated rules tell pods
//! apart by their `instance` label (as `to_target` does), so each scoped target must be
//! mapped to its `instance` with `--target-instance NAME=INSTANCE`. Without that mapping
//! the generator refuses rather than widen the SLO to the whole fleet.
//!
//! The fleet-wide recorded series (success ratio, throughput, quantiles) sum every pod of
//! a model, so an SLO scoped to targets reads its own sums, written inline over its pods.

use std::collections::BTreeMap;

use super::error::ScopeError;
use super::expr::latency_family;
use super::expr::{FINISHED, GENERATION_TOKENS, Metrics, TPOT, TTFT, good_finish, num};
use crate::alert::LATENCY_ALERT_QUANTILE;
use crate::alert::rule::LatencyClause;
use crate::duration::Window;
use crate::export::QUANTILE_LABEL;
use crate::slo::Slo;

/// One SLO's scope, as label matchers.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeExpr {
    /// Matchers for vLLM's series (`model_name`, `instance`); empty when unscoped.
    pub engine: String,
    /// Matchers for recorded series (`model`); empty without a model scope.
    pub recorded: String,
    /// True when a target scope narrows the pods: fleet-wide recordings do not apply.
    pub by_target: bool,
    /// How the alert texts name what the SLO covers.
    pub who: String,
}

/// The scope of `slo`, or why it cannot be written in PromQL and what to do about it.
pub fn scope_expr(slo: &Slo, instances: &BTreeMap<String, String>) -> Result<ScopeExpr, ScopeError> {
    let mut engine = Vec::new();
    let mut recorded = String::new();
    if !slo.scope.models.is_empty() {
        let re = alternation(slo.scope.models.iter().map(String::as_str));
        engine.push(format!("model_name=~\"{re}\""));
        recorded = format!("model=~\"{re}\"");
    }
    let targets = &slo.scope.targets;
    let mut who = "{{ $labels.model }} across the fleet".to_string();
    if !targets.is_empty() {
        let missing: Vec<&str> = targets.iter().filter(|t| !instances.contains_key(*t)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(ScopeError::TargetsWithoutInstance {
                slo: slo.name.clone(),
                targets: targets.clone(),
                missing: missing.into_iter().map(String::from).collect(),
            });
        }
        let re = alternation(targets.iter().map(|t| instances[t].as_str()));
        engine.push(format!("instance=~\"{re}\""));
        who = format!("{{{{ $labels.model }}}} on {}", targets.join(", "));
    }
    Ok(ScopeExpr { engine: engine.join(", "), recorded, by_target: !targets.is_empty(), who })
}

/// `a|b` with each value matched literally, as the body of a PromQL double-quoted string.
pub fn alternation<'a>(values: impl Iterator<Item = &'a str>) -> String {
    values.map(|v| promql_string(&regex_escape(v))).collect::<Vec<_>>().join("|")
}

/// Escapes RE2's metacharacters so the value matches only itself.
fn regex_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Escapes a value for the inside of a PromQL `"…"` string.
fn promql_string(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Matchers joined with `, `, leaving out empty ones.
pub fn join(parts: &[&str]) -> String {
    parts.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(", ")
}

/// The per-model quantities an SLO's rules read, over the SLO's pods and models only.
pub struct Fleet<'a> {
    pub m: &'a Metrics,
    pub scope: &'a ScopeExpr,
}

impl Fleet<'_> {
    /// A recorded fleet-wide series narrowed to the SLO's models.
    fn recorded(&self, name: &str, matchers: &str) -> String {
        format!("{name}{{{}}}", join(&[matchers, &self.scope.recorded]))
    }

    /// Share of finished requests that finished successfully.
    pub fn success(&self, w: Window) -> String {
        if !self.scope.by_target {
            return self.recorded("llm_slo:success_ratio", &format!("window=\"{w}\""));
        }
        let good = good_finish();
        let good = self.m.sum_by("model", "rate", FINISHED, &join(&[&good, &self.scope.engine]), w);
        let all = self.m.sum_by("model", "rate", FINISHED, &self.scope.engine, w);
        format!("({good} / {all})")
    }

    /// Output tokens per second.
    pub fn output_tokens(&self, w: Window) -> String {
        if !self.scope.by_target {
            return self.recorded(
                "llm_slo:tokens_per_second",
                &format!("direction=\"output\", window=\"{w}\", source=\"metrics\""),
            );
        }
        self.m.sum_by("model", "rate", GENERATION_TOKENS, &self.scope.engine, w)
    }

    /// Requests finished in the window.
    pub fn requests_finished(&self, w: Window) -> String {
        if !self.scope.by_target {
            return self.recorded("llm_slo:requests_finished", &format!("window=\"{w}\""));
        }
        self.m.sum_by("model", "increase", FINISHED, &self.scope.engine, w)
    }

    /// The quantile the latency alerts compare with the SLO's threshold.
    pub fn latency_p99(&self, clause: LatencyClause, w: Window) -> String {
        let q = num(LATENCY_ALERT_QUANTILE);
        if !self.scope.by_target {
            return self.recorded(latency_family(clause), &format!("{QUANTILE_LABEL}=\"{q}\", window=\"{w}\""));
        }
        let metric = match clause {
            LatencyClause::Ttft => TTFT,
            LatencyClause::Tpot => TPOT,
        };
        let buckets = self.m.sum_by("le, model", "rate", &format!("{metric}_bucket"), &self.scope.engine, w);
        format!("histogram_quantile({q}, {buckets})")
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::slo::{Objective, Scope};

    /// A TTFT-only SLO named `chat` over these targets and models (the rules modules' tests share it).
    pub(in crate::promql_rules) fn slo(targets: &[&str], models: &[&str]) -> Slo {
        Slo {
            name: "chat".into(),
            ttft: Some(std::time::Duration::from_millis(500)),
            tpot: None,
            e2e: None,
            objective: Objective::new(0.99).unwrap(),
            scope: Scope {
                targets: targets.iter().map(|s| s.to_string()).collect(),
                models: models.iter().map(|s| s.to_string()).collect(),
            },
        }
    }

    #[test]
    fn models_become_escaped_matchers() {
        let s = scope_expr(&slo(&[], &["llama-3.1-8b", "a|b"]), &BTreeMap::new()).unwrap();
        assert_eq!(s.engine, r#"model_name=~"llama-3\\.1-8b|a\\|b""#);
        assert_eq!(s.recorded, r#"model=~"llama-3\\.1-8b|a\\|b""#);
        assert!(!s.by_target);
        let all = scope_expr(&slo(&[], &[]), &BTreeMap::new()).unwrap();
        assert_eq!((all.engine.as_str(), all.recorded.as_str()), ("", ""));
    }

    #[test]
    fn targets_need_their_instance_or_the_generator_refuses() {
        let err = scope_expr(&slo(&["chat-pod"], &[]), &BTreeMap::new()).unwrap_err().to_string();
        assert!(err.contains("--target-instance chat-pod=HOST:PORT") && err.contains("models:"), "{err}");
        let map = BTreeMap::from([("chat-pod".to_string(), "10.0.0.5:8000".to_string())]);
        let s = scope_expr(&slo(&["chat-pod"], &["m"]), &map).unwrap();
        assert_eq!(s.engine, r#"model_name=~"m", instance=~"10\\.0\\.0\\.5:8000""#);
        assert!(s.by_target && s.who.ends_with("on chat-pod"));
    }
}
