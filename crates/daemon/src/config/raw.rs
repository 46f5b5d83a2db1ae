//! The config file as written: serde structs that keep each value's position.
//!
//! Everything that is checked beyond its YAML type is a `Spanned` string or number, so
//! the checks in `validate` can point at the offending value. The keys each section
//! accepts are its fields: [`super::de`] reads them from the derived `Deserialize`.

use std::collections::BTreeMap;

use super::de::Spanned;
use serde::Deserialize;

pub type S<T> = Spanned<T>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Option<S<String>>,
    pub evaluation_interval: Option<S<String>>,
    pub scrape: Option<RawScrape>,
    pub server: Option<RawServer>,
    pub targets: Option<S<Vec<RawTarget>>>,
    pub discovery: Option<S<Vec<S<RawDiscovery>>>>,
    pub discovery_limits: Option<RawDiscoveryLimits>,
    pub windows: Option<S<Vec<S<String>>>>,
    pub quantiles: Option<S<Vec<S<f64>>>>,
    pub slos: Option<Vec<S<RawSlo>>>,
    pub kv_cache: Option<RawKv>,
    pub alerting: Option<S<crate::alert::config::AlertingConfig>>,
    pub gpu: Option<S<crate::gpu::config::GpuConfig>>,
    pub cost: Option<S<crate::gpu::config::CostConfig>>,
    pub external_labels: Option<S<BTreeMap<String, S<String>>>>,
    pub spec_decode: Option<RawSpecDecode>,
    pub otlp: Option<S<RawOtlp>>,
    pub state_dir: Option<S<String>>,
    pub state_snapshot_interval: Option<S<String>>,
    pub state_max_size: Option<S<String>>,
}

/// `otlp:`, the engine-trace receiver.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOtlp {
    pub listen: S<String>,
    pub body_limit: Option<S<Scalar>>,
    pub max_connections: Option<S<u64>>,
    pub header_read_timeout: Option<S<String>>,
    pub idle_timeout: Option<S<String>>,
    pub body_read_timeout: Option<S<String>>,
}

/// `targets[].traces:`, which spans belong to the target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTraces {
    pub service_name: S<String>,
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
    pub follow_redirects: Option<bool>,
    pub max_models: Option<S<u64>>,
    pub max_series: Option<S<u64>>,
    pub target_grace: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub max_connections: Option<S<u64>>,
    pub header_read_timeout: Option<S<String>>,
    pub idle_timeout: Option<S<String>>,
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
    pub follow_redirects: Option<bool>,
    pub max_models: Option<S<u64>>,
    pub max_series: Option<S<u64>>,
    pub traces: Option<S<RawTraces>>,
    pub tap: Option<S<RawTap>>,
}

/// One `discovery:` entry (docs/discovery.md): exactly one of its sources is set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDiscovery {
    pub file_sd: Option<S<RawFileSd>>,
    pub dns: Option<S<RawDns>>,
    pub kubernetes: Option<S<RawKubernetes>>,
}

/// `discovery_limits:`, bounds on what the discovery sources together may add.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDiscoveryLimits {
    pub max_targets: Option<S<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFileSd {
    pub files: S<Vec<S<String>>>,
    pub refresh: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDns {
    pub names: S<Vec<S<String>>>,
    #[serde(rename = "type")]
    pub record: Option<S<String>>,
    pub port: Option<S<u64>>,
    pub refresh: Option<S<String>>,
    pub nameserver: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKubernetes {
    pub namespace: S<String>,
    pub selector: Option<S<String>>,
    pub port: S<String>,
}

/// `targets[].tap` (docs/request-path.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTap {
    pub listen: S<String>,
    pub upstream: S<String>,
    pub inject_usage: Option<bool>,
    pub max_connections: Option<S<u64>>,
    pub header_read_timeout: Option<S<String>>,
    pub idle_timeout: Option<S<String>>,
    pub body_read_timeout: Option<S<String>>,
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
    pub period: Option<S<String>>,
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
