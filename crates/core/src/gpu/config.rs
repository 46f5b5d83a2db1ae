//! The `gpu:` and `cost:` configuration sections (embedded by the main config).
//!
//! ```yaml
//! gpu:
//!   nvml: {enabled: true, library: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1, devices: [GPU-…], interval: 5s}
//!   dcgm: {url: http://10.0.0.5:9400/metrics, pod: vllm-0, namespace: serving, uuids: []}
//!   peaks: [{match: "a10g", bf16_tflops: 70, hbm_gbps: 600}]
//!   models: [{match: "my-finetune-8b", active_params: 8.03e9}]
//! cost: {gpu_hour_dollars: 2.5}
//! ```
//!
//! Each value is checked as it is read (the `deserialize_with` functions below), so the
//! config loader reports a bad one at its line and column, as in every other section.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::duration::de;

fn check<T: PartialOrd + Default + std::fmt::Display, E: serde::de::Error>(v: T) -> Result<T, E> {
    if v > T::default() { Ok(v) } else { Err(E::custom(format!("{v} is out of range; expected a number > 0"))) }
}

/// A price, a peak rate or a parameter count: a finite number above zero.
fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() {
        return Err(serde::de::Error::custom(format!("{v} is out of range; expected a finite number > 0")));
    }
    check(v)
}

fn opt_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    positive(d).map(Some)
}

fn opt_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    check(u32::deserialize(d)?).map(Some)
}

/// dcgm-exporter's metrics URL: http or https, with a host.
fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    crate::redact::check_http_url(&s, "http://10.0.0.5:9400/metrics").map_err(serde::de::Error::custom)?;
    Ok(s)
}

fn default_interval() -> Duration {
    Duration::from_secs(5)
}

fn yes() -> bool {
    true
}

/// `gpu:`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    #[serde(default)]
    pub nvml: NvmlConfig,
    #[serde(default)]
    pub dcgm: Option<DcgmConfig>,
    /// Peak overrides, checked before the built-in table.
    #[serde(default)]
    pub peaks: Vec<PeakOverride>,
    /// Model overrides, checked before the built-in table.
    #[serde(default)]
    pub models: Vec<ModelOverride>,
}

/// `gpu.nvml:`. NVML is optional at runtime: without a driver the sampler logs once and idles.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmlConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Path of `libnvidia-ml.so.1`; default: the dynamic loader's search path.
    #[serde(default)]
    pub library: Option<PathBuf>,
    /// UUIDs or indices to report; empty means `NVIDIA_VISIBLE_DEVICES` decides.
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default = "default_interval", deserialize_with = "de::interval")]
    pub interval: Duration,
}

impl Default for NvmlConfig {
    fn default() -> Self {
        NvmlConfig { enabled: true, library: None, devices: Vec::new(), interval: default_interval() }
    }
}

/// `gpu.dcgm:`: scrape a node-local dcgm-exporter and keep this pod's GPUs. `Debug` masks
/// the URL's credentials (crate::redact).
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcgmConfig {
    #[serde(deserialize_with = "http_url")]
    pub url: String,
    /// Own pod name; default `$POD_NAME` (Downward API).
    #[serde(default)]
    pub pod: Option<String>,
    /// Own namespace; default `$POD_NAMESPACE`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Explicit GPU UUIDs; when set they win over the pod join.
    #[serde(default)]
    pub uuids: Vec<String>,
}

impl std::fmt::Debug for DcgmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcgmConfig")
            .field("url", &crate::redact::url_str(&self.url))
            .field("pod", &self.pod)
            .field("namespace", &self.namespace)
            .field("uuids", &self.uuids)
            .finish()
    }
}

/// A peak-spec override for GPUs whose name contains all the words of `match`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeakOverride {
    #[serde(rename = "match")]
    pub matches: String,
    /// Dense BF16/FP16 tensor TFLOP/s.
    #[serde(deserialize_with = "positive")]
    pub bf16_tflops: f64,
    #[serde(default, deserialize_with = "opt_positive")]
    pub fp8_tflops: Option<f64>,
    /// Peak memory bandwidth in GB/s (10^9 bytes).
    #[serde(deserialize_with = "positive")]
    pub hbm_gbps: f64,
}

/// A model override for served model names containing all the words of `match`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    #[serde(rename = "match")]
    pub matches: String,
    #[serde(deserialize_with = "positive")]
    pub active_params: f64,
    /// Total parameters (weights resident in HBM); default `active_params`.
    #[serde(default, deserialize_with = "opt_positive")]
    pub total_params: Option<f64>,
    #[serde(default, deserialize_with = "opt_positive")]
    pub bytes_per_param: Option<f64>,
    #[serde(default, deserialize_with = "opt_count")]
    pub layers: Option<u32>,
    /// Attention width n_heads × head_dim.
    #[serde(default, deserialize_with = "opt_count")]
    pub attention_dim: Option<u32>,
    #[serde(default, deserialize_with = "opt_positive")]
    pub kv_bytes_per_token: Option<f64>,
    /// `bf16` (default) or `fp8`: which peak MFU divides by.
    #[serde(default)]
    pub precision: Option<crate::gpu::precision::Precision>,
}

/// `cost:`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// Price of one GPU for one hour, in dollars.
    #[serde(deserialize_with = "positive")]
    pub gpu_hour_dollars: f64,
    /// GPUs per target, when GPU telemetry does not say (no NVML, no dcgm-exporter).
    #[serde(default, deserialize_with = "opt_count")]
    pub gpus: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_unknown_keys() {
        let c: GpuConfig = serde_saphyr::from_str(
            "nvml: {library: /opt/libnvidia-ml.so.1, devices: [GPU-a, '1'], interval: 2s}\n\
             dcgm: {url: 'http://127.0.0.1:9400/metrics', uuids: [GPU-a]}\n\
             peaks: [{match: a10g, bf16_tflops: 70, hbm_gbps: 600}]\n",
        )
        .unwrap();
        assert!(c.nvml.enabled);
        assert_eq!(c.nvml.interval, Duration::from_secs(2));
        assert_eq!(c.nvml.devices, vec!["GPU-a".to_string(), "1".to_string()]);
        assert_eq!(c.dcgm.unwrap().uuids, vec!["GPU-a".to_string()]);
        assert_eq!(c.peaks[0].hbm_gbps, 600.0);
        assert!(serde_saphyr::from_str::<GpuConfig>("nvml: {intervall: 2s}").is_err());
        assert!(serde_saphyr::from_str::<GpuConfig>("nvml: {interval: 2}").is_err());
        let d: GpuConfig = serde_saphyr::from_str("{}").unwrap();
        assert_eq!(d.nvml.interval, Duration::from_secs(5));
    }
}
