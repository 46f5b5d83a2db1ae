//! A config in normal form (docs/discovery.md#what-a-reload-changed): every top-level key
//! with its defaults filled in, lists of named things keyed by name, durations and sizes
//! written one way, and every credential masked, so that two configs compare key by key
//! and the running one can be shown.
//!
//! The daemon serves the running config's normal form at `/api/v1/config` and its hash as
//! `llm_slo_config_info{hash}`; `goodput check --against` compares a file with it
//! ([`super::changes`]). Credentials never enter it: URLs are masked (crate::redact), header
//! values are `<secret>`, a bearer token is its file's path. A change of a credential alone
//! therefore leaves the normal form and its hash as they were.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::discovery::Discovery;
use super::types::{Config, ListenerGuards, Target};
use crate::alert::kind::{Rule, RuleKind};
use crate::alert::rule::AlertName;
use crate::duration::format_duration;

/// The top-level keys, in the order the file documents them.
pub const SECTIONS: &[&str] = &[
    "listen",
    "external_labels",
    "evaluation_interval",
    "scrape",
    "server",
    "targets",
    "discovery",
    "discovery_limits",
    "windows",
    "quantiles",
    "slos",
    "kv_cache",
    "alerting",
    "gpu",
    "cost",
    "spec_decode",
    "otlp",
    "state_dir",
    "state_snapshot_interval",
    "state_max_size",
];

/// A config in normal form: one JSON value per top-level key.
#[derive(Debug, Clone, PartialEq)]
pub struct Normal(pub BTreeMap<String, Value>);

impl Normal {
    /// The value of a top-level key (`null` when absent).
    pub fn section(&self, key: &str) -> &Value {
        self.0.get(key).unwrap_or(&Value::Null)
    }

    /// The normal form as one JSON object, keys in [`SECTIONS`] order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for key in SECTIONS {
            m.insert((*key).to_string(), self.section(key).clone());
        }
        Value::Object(m)
    }

    /// Reads what [`Normal::to_json`] wrote (from a running daemon's `/api/v1/config`).
    pub fn from_json(v: &Value) -> Result<Normal, NotAnObject> {
        let m = v.as_object().ok_or(NotAnObject)?;
        Ok(Normal(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
    }

    /// 16 hex digits that change whenever the normal form does: FNV-1a over its JSON text.
    pub fn hash(&self) -> String {
        let text = self.to_json().to_string();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

/// What [`Normal::from_json`] was given is not what [`Normal::to_json`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the config is not a JSON object")]
pub struct NotAnObject;

fn dur(d: Duration) -> Value {
    Value::String(format_duration(d))
}

/// `c` in normal form.
pub fn normalize(c: &Config) -> Normal {
    let mut m: BTreeMap<String, Value> = BTreeMap::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("listen", json!(c.listen.to_string()));
    put("external_labels", Value::Object(c.external_labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
    put("evaluation_interval", dur(c.evaluation_interval));
    let s = &c.scrape;
    put(
        "scrape",
        json!({
            "interval": dur(s.interval), "timeout": dur(s.timeout), "body_limit": s.body_limit,
            "gzip": s.gzip, "follow_redirects": s.follow_redirects,
            "max_models": s.cardinality.max_models, "max_series": s.cardinality.max_series,
            "target_grace": dur(s.target_grace),
        }),
    );
    put(
        "server",
        json!({
            "max_connections": c.server.max_connections,
            "header_read_timeout": dur(c.server.header_read_timeout),
            "idle_timeout": dur(c.server.idle_timeout),
        }),
    );
    put("targets", Value::Object(c.targets.iter().map(|t| (t.name.clone(), target(t))).collect()));
    put("discovery", Value::Array(c.discovery.iter().map(discovery).collect()));
    put("discovery_limits", json!({"max_targets": c.discovery_limits.max_targets}));
    put("windows", Value::Array(c.windows.iter().map(|w| json!(w.label())).collect()));
    put("quantiles", json!(c.quantiles));
    put(
        "slos",
        Value::Object(
            c.budget_specs()
                .into_iter()
                .map(|b| {
                    let s = b.slo;
                    let list = |v: &[String]| if v.is_empty() { Value::Null } else { json!(v) };
                    let v = json!({
                        "ttft": s.ttft.map(dur), "tpot": s.tpot.map(dur), "e2e": s.e2e.map(dur),
                        "objective": s.objective.get(),
                        "targets": list(&s.scope.targets), "models": list(&s.scope.models),
                        "period": dur(b.period),
                    });
                    (s.name, v)
                })
                .collect(),
        ),
    );
    let kv = c.kv_cache;
    put(
        "kv_cache",
        json!({"underloaded": kv.underloaded, "target_low": kv.target_low, "target_high": kv.target_high, "critical": kv.critical}),
    );
    put("alerting", alerting(c));
    put("gpu", c.gpu.as_ref().map_or(Value::Null, |g| json!(format!("{g:?}"))));
    put(
        "cost",
        c.cost.as_ref().map_or(Value::Null, |k| json!({"gpu_hour_dollars": k.gpu_hour_dollars, "gpus": k.gpus})),
    );
    put("spec_decode", c.spec_draft_cost_ratio.map_or(Value::Null, |r| json!({"draft_cost_ratio": r})));
    put(
        "otlp",
        c.otlp.as_ref().map_or(Value::Null, |o| {
            let mut v = guards(&o.guards);
            v.insert("listen".into(), json!(o.listen.to_string()));
            v.insert("body_limit".into(), json!(o.body_limit));
            Value::Object(v)
        }),
    );
    let state = c.state.as_ref();
    put("state_dir", state.map_or(Value::Null, |s| json!(s.dir.display().to_string())));
    put("state_snapshot_interval", state.map_or(Value::Null, |s| dur(s.snapshot_interval)));
    put("state_max_size", state.map_or(Value::Null, |s| json!(s.max_size)));
    Normal(m)
}

fn guards(g: &ListenerGuards) -> Map<String, Value> {
    let v = json!({
        "max_connections": g.max_connections,
        "header_read_timeout": dur(g.header_read_timeout),
        "idle_timeout": dur(g.idle_timeout),
        "body_read_timeout": dur(g.body_read_timeout),
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn target(t: &Target) -> Value {
    let engine = match t.engine {
        crate::adapt::EngineHint::Auto => "auto".to_string(),
        crate::adapt::EngineHint::Is(e) => e.as_str().to_string(),
    };
    let headers: Map<String, Value> = t.headers.iter().map(|(k, _)| (k.clone(), json!("<secret>"))).collect();
    json!({
        "url": crate::redact::url(&t.url),
        "engine": engine,
        "model": t.model,
        "bearer_token_file": t.bearer_token_file.as_ref().map(|p| p.display().to_string()),
        "headers": headers,
        "interval": dur(t.interval),
        "timeout": dur(t.timeout),
        "follow_redirects": t.follow_redirects,
        "max_models": t.cardinality.max_models,
        "max_series": t.cardinality.max_series,
        "traces": t.traces.as_ref().map(|tr| json!({"service_name": tr.service_name})),
        "tap": t.tap.as_ref().map(|tap| {
            let mut v = guards(&tap.guards);
            v.insert("listen".into(), json!(tap.listen.to_string()));
            v.insert("upstream".into(), json!(crate::redact::url(&tap.upstream)));
            v.insert("inject_usage".into(), json!(tap.inject_usage));
            Value::Object(v)
        }),
    })
}

/// A discovery source as one line: its kind and settings (none of which is a credential).
fn discovery(d: &Discovery) -> Value {
    let settings = match d {
        Discovery::FileSd(f) => format!("{f:?}"),
        Discovery::Dns(s) => format!("{s:?}"),
        Discovery::Kubernetes(k) => format!("{k:?}"),
    };
    json!(format!("{}: {settings}", d.kind()))
}

fn alerting(c: &Config) -> Value {
    let a = &c.alerting;
    let rules = a.rule_set();
    let rules: Map<String, Value> = AlertName::ALL
        .iter()
        .map(|n| {
            let v = rules.rules.iter().find(|r| r.name == *n).map_or(json!("disabled"), rule);
            (n.as_str().to_string(), v)
        })
        .collect();
    json!({
        "alertmanagers": a.alertmanager_urls().iter().map(|u| crate::redact::url_str(u)).collect::<Vec<_>>(),
        "webhook": a.webhook.as_ref().map(|w| crate::redact::url_str(&w.url)),
        "resend_interval": dur(a.resend_interval),
        "timeout": dur(a.timeout),
        "queue_capacity": a.queue_capacity,
        "min_window_coverage": a.min_window_coverage,
        "runbook_url": a.runbook_page().map(|u| crate::redact::url_str(&u)),
        "rules": rules,
    })
}

/// A rule as it is in force: its config keys with defaults and overrides applied.
fn rule(r: &Rule) -> Value {
    let mut v = json!({"for": dur(r.for_), "severity": r.severity.as_str(), "min_coverage": r.min_coverage});
    let extra = match &r.kind {
        RuleKind::KvCacheSaturated { threshold } => json!({"threshold": threshold}),
        RuleKind::GoodputDivergence { threshold, window, throughput_floor } => {
            json!({"threshold": threshold, "window": window.label(), "throughput_floor": throughput_floor})
        }
        RuleKind::LatencyAboveSlo { window, .. } => json!({"window": window.label()}),
        RuleKind::ErrorBudgetBurn { factor, long_window, short_window, min_requests } => json!({
            "factor": factor, "long_window": long_window.label(), "short_window": short_window.label(),
            "min_requests": min_requests,
        }),
        RuleKind::TargetDown => json!({}),
        RuleKind::PreemptionsSustained { per_second, window } => {
            json!({"threshold": per_second, "window": window.label()})
        }
        RuleKind::QueueGrowing { min_waiting, window } => json!({"threshold": min_waiting, "window": window.label()}),
        RuleKind::CapacityHeadroomLow { factor } => json!({"threshold": factor}),
    };
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        super::super::from_str(text, "t.yaml").expect("valid").config
    }

    const BASE: &str = "targets:\n  - {name: a, url: 'http://user:sEcReT@127.0.0.1:8000/metrics?access_token=sEcReT', headers: {X-Api-Key: sEcReT}}\n\
        slos:\n  - {name: fast, ttft: 200ms, objective: 0.99}\n\
        alerting:\n  alertmanager: {url: 'http://am:sEcReT@127.0.0.1:9093'}\n";

    #[test]
    fn the_normal_form_fills_defaults_masks_credentials_and_hashes_what_it_shows() {
        let n = normalize(&config(BASE));
        let text = n.to_json().to_string();
        assert!(!text.contains("sEcReT"), "{text}");
        assert_eq!(n.section("slos")["fast"]["period"], "28d");
        assert_eq!(n.section("scrape")["interval"], "5s");
        assert_eq!(n.section("targets")["a"]["headers"]["X-Api-Key"], "<secret>");
        assert_eq!(n.section("alerting")["rules"]["LLMTargetDown"]["for"], "1m");
        assert_eq!(n.section("state_dir"), &Value::Null);
        assert_eq!(n.to_json().as_object().unwrap().len(), SECTIONS.len());

        // The same config gives the same hash; a visible change another; a credential alone none.
        assert_eq!(n.hash(), normalize(&config(BASE)).hash());
        assert_ne!(n.hash(), normalize(&config(&BASE.replace("200ms", "250ms"))).hash());
        assert_eq!(n.hash(), normalize(&config(&BASE.replace("X-Api-Key: sEcReT", "X-Api-Key: other"))).hash());
        assert_eq!(n.hash().len(), 16);

        // What the daemon serves reads back the same.
        assert_eq!(Normal::from_json(&n.to_json()).unwrap().hash(), n.hash());
    }
}
