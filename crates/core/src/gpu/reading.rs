//! One GPU's latest readings in SI units, whatever the source (NVML or dcgm-exporter).
//!
//! Every reading is optional: a driver that lacks a function, a SKU that does not support a
//! counter, or a dcgm-exporter that does not export a field leaves just that reading empty.

/// Where a GPU's readings came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuSource {
    Nvml,
    Dcgm,
}

/// One GPU at one instant. Utilizations are 0–1 ratios, memory bytes, clocks Hz, power W.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct GpuReading {
    /// The device index as the source numbers it (NVML index or dcgm `gpu` label).
    pub index: String,
    pub uuid: String,
    /// The product name, e.g. `NVIDIA H100 80GB HBM3` (NVML `name()`, dcgm `modelName`).
    pub name: String,
    /// Share of the sample period in which at least one kernel ran (not a FLOP fraction).
    pub gpu_utilization_ratio: Option<f64>,
    /// Share of time device memory was read or written (time-based, not bandwidth).
    pub memory_controller_utilization_ratio: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub power_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub sm_clock_hertz: Option<f64>,
    pub memory_clock_hertz: Option<f64>,
    pub temperature_celsius: Option<f64>,
    /// NVML clock-event (throttle) reason bits, `nvmlClocksEventReason*`.
    pub throttle_reasons: Option<u64>,
    pub pcie_tx_bytes_per_second: Option<f64>,
    pub pcie_rx_bytes_per_second: Option<f64>,
    /// Achieved DRAM bandwidth over the theoretical maximum (GPM `DramBwUtil`, DCGM `DRAM_ACTIVE`).
    pub dram_active_ratio: Option<f64>,
    /// Share of time any tensor pipe was busy (GPM `AnyTensorUtil`, DCGM `PIPE_TENSOR_ACTIVE`).
    pub tensor_active_ratio: Option<f64>,
    /// Resident warps over the maximum (GPM `SmOccupancy`, DCGM `SM_OCCUPANCY`).
    pub sm_occupancy_ratio: Option<f64>,
}

/// Throttle (clock-event) reason bits from nvml.h, with the label each one gets.
pub const THROTTLE_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// Mean DRAM-active ratio over the GPUs, only when every one of them reports it (a partial mean
/// would misstate the engine's bandwidth use).
pub fn mean_dram_active(readings: &[GpuReading]) -> Option<f64> {
    if readings.is_empty() {
        return None;
    }
    let sum: Option<f64> = readings.iter().map(|r| r.dram_active_ratio).sum();
    Some(sum? / readings.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dram_mean_needs_every_gpu() {
        let g = |v: Option<f64>| GpuReading { dram_active_ratio: v, ..GpuReading::default() };
        assert_eq!(mean_dram_active(&[g(Some(0.2)), g(Some(0.6))]), Some(0.4));
        assert_eq!(mean_dram_active(&[g(Some(0.2)), g(None)]), None);
        assert_eq!(mean_dram_active(&[]), None);
    }
}
