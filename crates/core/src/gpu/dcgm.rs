//! dcgm-exporter scrapes → per-GPU readings in SI units, and the join to the sidecar's pod.
//!
//! dcgm-exporter labels vary by version and flags (docs/gpu.md#dcgm-exporter-gpudcgm): `UUID` or
//! `uuid`, `pod`/`namespace`/`container` or `pod_name`/`pod_namespace`/`container_name`,
//! `Hostname` (≤ 4.8.2) or `hostname`. Units are converted here so that callers never see
//! MiB, MHz or percent: utilizations become 0–1 ratios, memory bytes, clocks Hz.
//!
//! dcgm-exporter 4.9 switched units (clocks Hz, memory bytes, utilization 0–1). Where a
//! family's `# HELP` states its unit (`(in MHz)`, `(in MiB)`, `(in %)`, bytes, Hz), that unit
//! wins over the table's default, so one table reads both schemes. The exact 4.9 field *names*
//! were not available when this was written; only `DCGM_FI_DEV_FB_CAPACITY_BYTES` is known.
//! DCGM's "blank" sentinels (int32 0x7FFFFFF0–0x7FFFFFFF, FP64 ≥ 1.4e14, int64 ≥ 0x7FFFFFFFFFFFFFF0)
//! mean "not supported" and are dropped.

use std::collections::BTreeMap;

use crate::gpu::reading::GpuReading;
use crate::parse::{Exposition, Label, Limits, ParseError, parse};

/// One GPU as dcgm-exporter describes it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DcgmGpu {
    pub uuid: String,
    /// The `gpu` index label.
    pub index: String,
    pub model_name: String,
    pub hostname: Option<String>,
    /// The pod the GPU is allocated to, when dcgm-exporter mapped it (the first seen).
    pub pod: Option<PodRef>,
    /// Every pod seen on this GPU (several with time-slicing and `--kubernetes-virtual-gpus`).
    pub pods: Vec<PodRef>,
    /// Readings by canonical name (see [`READINGS`]).
    pub readings: BTreeMap<&'static str, f64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

/// dcgm-exporter field → (canonical reading, factor to SI units when HELP states no unit).
pub const READINGS: &[(&str, &str, f64)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization_ratio", 0.01),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "memory_controller_utilization_ratio", 0.01),
    ("DCGM_FI_DEV_FB_USED", "memory_used_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_FREE", "memory_free_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_RESERVED", "memory_reserved_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_TOTAL", "memory_total_bytes", 1_048_576.0),
    ("DCGM_FI_DEV_FB_CAPACITY_BYTES", "memory_capacity_bytes", 1.0),
    ("DCGM_FI_DEV_POWER_USAGE", "power_watts", 1.0),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "power_limit_watts", 1.0),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_management_limit_watts", 1.0),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_hertz", 1e6),
    ("DCGM_FI_DEV_MEM_CLOCK", "memory_clock_hertz", 1e6),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_celsius", 1.0),
    ("DCGM_FI_DEV_MEMORY_TEMP", "memory_temperature_celsius", 1.0),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "throttle_reasons", 1.0),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle_reasons", 1.0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "graphics_engine_active_ratio", 1.0),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active_ratio", 1.0),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_ratio", 1.0),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active_ratio", 1.0),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_ratio", 1.0),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_second", 1.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_second", 1.0),
];

fn first<'s>(labels: &'s [Label<'_>], names: &[&str]) -> Option<&'s str> {
    names.iter().find_map(|n| labels.iter().find(|l| l.name == *n).map(|l| l.value.as_ref()))
}

/// DCGM's "no value" sentinels.
pub fn is_blank(v: f64) -> bool {
    !v.is_finite() || (2_147_483_632.0..=2_147_483_647.0).contains(&v) || v.abs() >= 1.4e14
}

/// The factor to SI units stated by a HELP text such as `SM clock frequency (in MHz).`
pub fn help_factor(help: &str) -> Option<f64> {
    let unit = help.rsplit_once("(in ").and_then(|(_, rest)| rest.split_once(')')).map(|(u, _)| u.trim());
    match unit {
        Some("MHz") => Some(1e6),
        Some("Hz") => Some(1.0),
        Some("MiB" | "MB") => Some(1_048_576.0),
        Some("B" | "bytes") => Some(1.0),
        Some("%") => Some(0.01),
        Some("W" | "C" | "ratio") => Some(1.0),
        Some("mW") => Some(0.001),
        _ => None,
    }
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
        let Some(uuid) = first(labels, &["UUID", "uuid"]).filter(|u| !u.is_empty()) else { continue };
        let gpu = by_uuid.entry(uuid.to_string()).or_insert_with(|| DcgmGpu {
            uuid: uuid.to_string(),
            index: first(labels, &["gpu"]).unwrap_or_default().to_string(),
            model_name: first(labels, &["modelName", "model_name"]).unwrap_or_default().to_string(),
            hostname: first(labels, &["Hostname", "hostname"]).map(str::to_string),
            ..DcgmGpu::default()
        });
        let pod = first(labels, &["pod", "pod_name"]).filter(|p| !p.is_empty());
        let ns = first(labels, &["namespace", "pod_namespace"]).filter(|p| !p.is_empty());
        if let (Some(pod), Some(namespace)) = (pod, ns) {
            let p = PodRef {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                container: first(labels, &["container", "container_name"])
                    .filter(|c| !c.is_empty())
                    .map(str::to_string),
            };
            if !gpu.pods.contains(&p) {
                gpu.pods.push(p.clone());
            }
            gpu.pod.get_or_insert(p);
        }
        if !is_blank(s.value) {
            let factor = exp.family_of(s).help.as_deref().and_then(help_factor).unwrap_or(factor);
            gpu.readings.insert(reading, s.value * factor);
        }
    }
    by_uuid.into_values().collect()
}

impl DcgmGpu {
    /// The source-neutral reading. Memory total is the capacity field, else FB_TOTAL, else
    /// used + free + reserved (what dcgm-exporter's default fields allow).
    pub fn to_reading(&self) -> GpuReading {
        let r = |k: &str| self.readings.get(k).copied();
        let summed = match (r("memory_used_bytes"), r("memory_free_bytes")) {
            (Some(u), Some(f)) => Some(u + f + r("memory_reserved_bytes").unwrap_or(0.0)),
            _ => None,
        };
        GpuReading {
            index: self.index.clone(),
            uuid: self.uuid.clone(),
            name: self.model_name.clone(),
            gpu_utilization_ratio: r("gpu_utilization_ratio"),
            memory_controller_utilization_ratio: r("memory_controller_utilization_ratio"),
            memory_used_bytes: r("memory_used_bytes"),
            memory_total_bytes: r("memory_capacity_bytes").or(r("memory_total_bytes")).or(summed),
            power_watts: r("power_watts"),
            power_limit_watts: r("power_limit_watts").or(r("power_management_limit_watts")),
            sm_clock_hertz: r("sm_clock_hertz"),
            memory_clock_hertz: r("memory_clock_hertz"),
            temperature_celsius: r("temperature_celsius"),
            throttle_reasons: r("throttle_reasons").filter(|v| *v >= 0.0).map(|v| v as u64),
            pcie_tx_bytes_per_second: r("pcie_tx_bytes_per_second"),
            pcie_rx_bytes_per_second: r("pcie_rx_bytes_per_second"),
            dram_active_ratio: r("dram_active_ratio"),
            tensor_active_ratio: r("tensor_active_ratio"),
            sm_occupancy_ratio: r("sm_occupancy_ratio"),
        }
    }
}

/// Which of a node's GPUs belong to this sidecar's engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSelector {
    /// Configured UUIDs: always wins.
    Uuids(Vec<String>),
    /// The pod (and optionally container) dcgm-exporter mapped the GPU to.
    Pod { namespace: String, pod: String, container: Option<String> },
    /// No identity known: every GPU in the scrape (a single-tenant node or an aggregator).
    Everything,
}

impl PodSelector {
    /// From config, else the Downward API variables (`POD_NAME`, `POD_NAMESPACE`, optionally
    /// `CONTAINER_NAME`) read through `env`, so callers and tests inject the environment.
    pub fn resolve(cfg: &crate::gpu::config::DcgmConfig, env: impl Fn(&str) -> Option<String>) -> PodSelector {
        if !cfg.uuids.is_empty() {
            return PodSelector::Uuids(cfg.uuids.clone());
        }
        let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let pod = nonempty(cfg.pod.clone()).or_else(|| nonempty(env("POD_NAME")));
        let namespace = nonempty(cfg.namespace.clone()).or_else(|| nonempty(env("POD_NAMESPACE")));
        match (pod, namespace) {
            (Some(pod), Some(namespace)) => {
                PodSelector::Pod { namespace, pod, container: nonempty(env("CONTAINER_NAME")) }
            }
            _ => PodSelector::Everything,
        }
    }

    pub fn selects(&self, g: &DcgmGpu) -> bool {
        match self {
            PodSelector::Uuids(u) => u.iter().any(|u| u.eq_ignore_ascii_case(&g.uuid)),
            PodSelector::Pod { namespace, pod, container } => g.pods.iter().any(|p| {
                &p.namespace == namespace
                    && &p.pod == pod
                    && container.as_ref().is_none_or(|c| p.container.as_ref() == Some(c))
            }),
            PodSelector::Everything => true,
        }
    }
}

/// The GPUs the selector picks, as source-neutral readings.
pub fn own_gpus(gpus: &[DcgmGpu], selector: &PodSelector) -> Vec<GpuReading> {
    gpus.iter().filter(|g| selector.selects(g)).map(DcgmGpu::to_reading).collect()
}

/// One dcgm-exporter scrape body → this engine's GPUs. The daemon's dcgm scrape calls this.
pub fn read(body: &[u8], limits: &Limits, selector: &PodSelector) -> Result<Vec<GpuReading>, ParseError> {
    let exp = parse(body, limits)?;
    Ok(own_gpus(&gpus(&exp), selector))
}
