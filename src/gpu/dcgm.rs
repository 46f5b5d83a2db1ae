//! dcgm-exporter scrapes → per-GPU readings in SI units.
//!
//! dcgm-exporter labels vary by version and flags (gpu-telemetry.md §2.3): `UUID` or
//! `uuid`, `pod`/`namespace`/`container` or `pod_name`/`pod_namespace`/`container_name`,
//! `Hostname` (≤ 4.8.2) or `hostname`. Units are converted here so that callers never see
//! MiB, MHz or percent: utilizations become 0–1 ratios, memory bytes, clocks Hz.
//! DCGM's "blank" sentinels (values ≥ 0x7FFFFFFFFFFFFFF0) mean "not supported" and are
//! dropped.

use std::collections::BTreeMap;

use crate::parse::{Exposition, Label};

/// One GPU as dcgm-exporter describes it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DcgmGpu {
    pub uuid: String,
    /// The `gpu` index label.
    pub index: String,
    pub model_name: String,
    pub hostname: Option<String>,
    /// The pod the GPU is allocated to, when dcgm-exporter mapped it.
    pub pod: Option<PodRef>,
    /// Readings by canonical name (see [`READINGS`]).
    pub readings: BTreeMap<&'static str, f64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

/// dcgm-exporter field → (canonical reading, factor to SI units).
pub const READINGS: &[(&str, &str, f64)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization_ratio", 0.01),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "memory_controller_utilization_ratio", 0.01),
    ("DCGM_FI_DEV_FB_USED", "memory_used_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_FREE", "memory_free_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_RESERVED", "memory_reserved_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_POWER_USAGE", "power_watts", 1.0),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_hertz", 1e6),
    ("DCGM_FI_DEV_MEM_CLOCK", "memory_clock_hertz", 1e6),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_celsius", 1.0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "graphics_engine_active_ratio", 1.0),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active_ratio", 1.0),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_ratio", 1.0),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active_ratio", 1.0),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_ratio", 1.0),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_second", 1.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_second", 1.0),
];

const BLANK: f64 = 9.223_372_036_854_775e18;

fn first<'s>(labels: &'s [Label<'_>], names: &[&str]) -> Option<&'s str> {
    names.iter().find_map(|n| labels.iter().find(|l| l.name == *n).map(|l| l.value.as_ref()))
}

/// Whether a scrape looks like dcgm-exporter's.
pub fn is_dcgm(exp: &Exposition<'_>) -> bool {
    exp.families.iter().any(|f| f.name.starts_with("DCGM_FI_") && f.samples > 0)
}

/// Every GPU in a dcgm-exporter scrape, ordered by UUID.
pub fn gpus(exp: &Exposition<'_>) -> Vec<DcgmGpu> {
    let mut by_uuid: BTreeMap<String, DcgmGpu> = BTreeMap::new();
    for s in &exp.samples {
        let Some(&(_, reading, factor)) = READINGS.iter().find(|(n, _, _)| *n == s.name) else { continue };
        let labels = exp.labels_of(s);
        let Some(uuid) = first(labels, &["UUID", "uuid"]) else { continue };
        let gpu = by_uuid.entry(uuid.to_string()).or_insert_with(|| DcgmGpu {
            uuid: uuid.to_string(),
            index: first(labels, &["gpu"]).unwrap_or_default().to_string(),
            model_name: first(labels, &["modelName"]).unwrap_or_default().to_string(),
            hostname: first(labels, &["Hostname", "hostname"]).map(str::to_string),
            pod: None,
            readings: BTreeMap::new(),
        });
        let pod = first(labels, &["pod", "pod_name"]).filter(|p| !p.is_empty());
        let ns = first(labels, &["namespace", "pod_namespace"]).filter(|p| !p.is_empty());
        if let (Some(pod), Some(namespace)) = (pod, ns) {
            gpu.pod = Some(PodRef {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                container: first(labels, &["container", "container_name"]).map(str::to_string),
            });
        }
        if s.value.is_finite() && s.value.abs() < BLANK * 0.999 && s.value < 1.4e14 {
            gpu.readings.insert(reading, s.value * factor);
        }
    }
    by_uuid.into_values().collect()
}
