//! The config file as written: serde structs that keep each value's position.
//!
//! Everything that is checked beyond its YAML type is a `Spanned` string or number, so
//! the checks in `validate` can point at the offending value. Every struct denies
//! unknown keys; [`section_of`] names the section for the error message.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

pub type S<T> = Spanned<T>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Option<S<String>>,
    pub evaluation_interval: Option<S<String>>,
    pub scrape: Option<RawScrape>,
    pub targets: Option<S<Vec<RawTarget>>>,
    pub windows: Option<S<Vec<S<String>>>>,
    pub quantiles: Option<S<Vec<S<f64>>>>,
    pub slos: Option<Vec<RawSlo>>,
    pub kv_cache: Option<RawKv>,
    pub alerting: Option<S<crate::alert::config::AlertingConfig>>,
    pub gpu: Option<S<crate::gpu::config::GpuConfig>>,
    pub cost: Option<S<crate::gpu::config::CostConfig>>,
    pub spec_decode: Option<RawSpecDecode>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpecDecode {
    pub draft_cost_ratio: Option<S<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScrape {
    pub interval: Option<S<String>>,
    pub timeout: Option<S<String>>,
    pub body_limit: Option<S<Scalar>>,
    pub gzip: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub name: S<String>,
    pub url: S<String>,
    pub engine: Option<S<String>>,
    pub model: Option<S<String>>,
    pub bearer_token_file: Option<S<String>>,
    pub headers: Option<BTreeMap<String, S<String>>>,
    pub interval: Option<S<String>>,
    pub timeout: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlo {
    pub name: S<String>,
    pub ttft: Option<S<String>>,
    pub tpot: Option<S<String>>,
    pub e2e: Option<S<String>>,
    pub objective: Option<S<f64>>,
    pub targets: Option<Vec<S<String>>>,
    pub models: Option<Vec<S<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKv {
    pub underloaded: Option<S<f64>>,
    pub target_low: Option<S<f64>>,
    pub target_high: Option<S<f64>>,
    pub critical: Option<S<f64>>,
}

/// A scalar that may be written as a number or a string (`body_limit: 1048576` or `16MiB`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of bytes or a size like 16MiB")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Each section's keys, in the order the docs list them. serde's unknown-field error
/// carries only the expected keys; they identify the section uniquely.
pub const SECTIONS: &[(&str, &[&str])] = &[
    (
        "the top level",
        &[
            "listen",
            "evaluation_interval",
            "scrape",
            "targets",
            "windows",
            "quantiles",
            "slos",
            "kv_cache",
            "alerting",
            "gpu",
            "cost",
            "spec_decode",
        ],
    ),
    ("scrape", &["interval", "timeout", "body_limit", "gzip"]),
    ("targets[]", &["name", "url", "engine", "model", "bearer_token_file", "headers", "interval", "timeout"]),
    ("slos[]", &["name", "ttft", "tpot", "e2e", "objective", "targets", "models"]),
    ("kv_cache", &["underloaded", "target_low", "target_high", "critical"]),
    (
        "alerting",
        &[
            "alertmanager",
            "alertmanagers",
            "resend_interval",
            "timeout",
            "runbook_base_url",
            "webhook",
            "queue_capacity",
            "min_window_coverage",
            "rules",
        ],
    ),
    ("an alertmanager or webhook entry", &["url"]),
    (
        "alerting.rules",
        &[
            "LLMKVCacheSaturated",
            "LLMGoodputDivergence",
            "LLMTTFTAboveSLO",
            "LLMTPOTAboveSLO",
            "LLMErrorBudgetBurnFast",
            "LLMErrorBudgetBurnSlow",
            "LLMTargetDown",
            "LLMPreemptionsSustained",
            "LLMQueueGrowing",
        ],
    ),
    ("alerting.rules.<AlertName>", &["enabled", "for", "severity"]),
    ("alerting.rules.<AlertName>", &["enabled", "for", "severity", "threshold"]),
    ("alerting.rules.<AlertName>", &["enabled", "for", "severity", "threshold", "window", "min_coverage"]),
    ("alerting.rules.<AlertName>", &["enabled", "for", "severity", "window", "min_coverage"]),
    (
        "alerting.rules.<AlertName>",
        &["enabled", "for", "severity", "threshold", "window", "throughput_floor", "min_coverage"],
    ),
    (
        "alerting.rules.<AlertName>",
        &["enabled", "for", "severity", "factor", "long_window", "short_window", "min_requests", "min_coverage"],
    ),
    ("spec_decode", &["draft_cost_ratio"]),
    ("cost", &["gpu_hour_dollars", "gpus"]),
];

/// The section whose keys are exactly `expected`.
pub fn section_of(expected: &[&str]) -> Option<&'static str> {
    SECTIONS.iter().find(|(_, keys)| *keys == expected).map(|(name, _)| *name)
}
