//! GPU, MFU, HBM, TPOT-floor and cost families, with their HELP/TYPE.
//!
//! Per-GPU families carry `gpu` (index), `uuid` and `model_name` (the GPU product name, as
//! dcgm-exporter's `modelName`), plus `target` when the caller joined the GPU to one. A reading
//! the source could not give is simply absent: no sample, never a zero.

use super::emit::{Collect, Emit, ExportSample, Finite, Label, Labels};
use super::families::Window;
use super::registry::{Family, Unit};
use crate::gpu::derive::Derived;
use crate::gpu::reading::{GpuReading, THROTTLE_REASONS};

type Field = fn(&GpuReading) -> Option<f64>;

crate::label_set! {
    /// `target` where the GPU is joined to one; `model_name` where the source names the product.
    pub Gpu = [target, gpu, uuid, model_name];
    pub Throttle = [target, gpu, uuid, model_name, reason];
    pub WindowSource = [target, model, window, source];
    pub Cost = [target, model, window, kind, bound];
}

/// Gauge families read straight off a [`GpuReading`], in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Gpu>(
        "llm_slo_gpu_utilization_ratio",
        Unit::Ratio,
        "Share of time at least one kernel ran on the GPU (NVML/DCGM GPU_UTIL; not a FLOP fraction).",
    ),
    Family::gauge::<Gpu>(
        "llm_slo_gpu_memory_controller_utilization_ratio",
        Unit::Ratio,
        "Share of time device memory was read or written (time-based, not bandwidth).",
    ),
    Family::gauge::<Gpu>("llm_slo_gpu_memory_used_bytes", Unit::Bytes, "Device memory in use."),
    Family::gauge::<Gpu>("llm_slo_gpu_memory_total_bytes", Unit::Bytes, "Device memory in total."),
    Family::gauge::<Gpu>("llm_slo_gpu_power_watts", Unit::Watts, "Power draw (1 s average on Ampere and newer)."),
    Family::gauge::<Gpu>("llm_slo_gpu_power_limit_watts", Unit::Watts, "Enforced power limit."),
    Family::gauge::<Gpu>("llm_slo_gpu_sm_clock_hertz", Unit::Hertz, "Current SM clock."),
    Family::gauge::<Gpu>("llm_slo_gpu_memory_clock_hertz", Unit::Hertz, "Current memory clock."),
    Family::gauge::<Gpu>("llm_slo_gpu_temperature_celsius", Unit::Celsius, "GPU die temperature."),
    Family::gauge::<Gpu>("llm_slo_gpu_pcie_tx_bytes_per_second", Unit::BytesPerSecond, "PCIe transmit throughput."),
    Family::gauge::<Gpu>("llm_slo_gpu_pcie_rx_bytes_per_second", Unit::BytesPerSecond, "PCIe receive throughput."),
    Family::gauge::<Gpu>(
        "llm_slo_gpu_dram_active_ratio",
        Unit::Ratio,
        "DRAM bandwidth used over the theoretical maximum (NVML GPM DramBwUtil or DCGM DRAM_ACTIVE).",
    ),
    Family::gauge::<Gpu>(
        "llm_slo_gpu_tensor_active_ratio",
        Unit::Ratio,
        "Share of time any tensor pipe was active (GPM AnyTensorUtil or DCGM PIPE_TENSOR_ACTIVE).",
    ),
    Family::gauge::<Gpu>(
        "llm_slo_gpu_sm_occupancy_ratio",
        Unit::Ratio,
        "Resident warps over the maximum (GPM SmOccupancy or DCGM SM_OCCUPANCY).",
    ),
];

/// What each of [`FAMILIES`] reads off a reading, in the same order.
#[rustfmt::skip]
const FIELDS: [Field; 14] = [
    |r| r.gpu_utilization_ratio,
    |r| r.memory_controller_utilization_ratio,
    |r| r.memory_used_bytes,
    |r| r.memory_total_bytes,
    |r| r.power_watts,
    |r| r.power_limit_watts,
    |r| r.sm_clock_hertz,
    |r| r.memory_clock_hertz,
    |r| r.temperature_celsius,
    |r| r.pcie_tx_bytes_per_second,
    |r| r.pcie_rx_bytes_per_second,
    |r| r.dram_active_ratio,
    |r| r.tensor_active_ratio,
    |r| r.sm_occupancy_ratio,
];

const THROTTLE: &str = "llm_slo_gpu_throttle_reasons";
const MFU: &str = "llm_slo_mfu_ratio";
const HBM: &str = "llm_slo_hbm_bandwidth_utilization_ratio";
const TPOT_FLOOR: &str = "llm_slo_decode_tpot_floor_seconds";
const COST: &str = "llm_slo_cost_dollars_per_million_tokens";

/// Throttling per GPU, then the figures derived per target, model and window.
pub const DERIVED: &[Family] = &[
    Family::gauge::<Throttle>(
        THROTTLE,
        Unit::Flag,
        "1 when the GPU clocks are held down for this reason (NVML clock-event reasons), else 0.",
    ),
    Family::gauge::<WindowSource>(
        MFU,
        Unit::Ratio,
        "Model FLOPs utilization: achieved model FLOP/s over dense peak FLOP/s of the serving GPUs.",
    ),
    Family::gauge::<WindowSource>(
        HBM,
        Unit::Ratio,
        "Memory bandwidth used over the peak, per GPU; source says how it was measured.",
    ),
    Family::gauge::<Window>(
        TPOT_FLOOR,
        Unit::Seconds,
        "Fastest possible decode step: bytes read per step per GPU over peak memory bandwidth.",
    ),
    Family::gauge::<Cost>(
        COST,
        Unit::Dollars,
        "Dollars per million output tokens (kind=output) or SLO-compliant output tokens (kind=good_output).",
    ),
];

/// Where a per-GPU family comes among them: the gauges in table order, then throttling.
pub fn reading_rank(name: &str) -> Option<usize> {
    FAMILIES.iter().position(|g| g.name == name).or_else(|| (name == THROTTLE).then_some(FAMILIES.len()))
}

/// Per-GPU samples, grouped by family, GPUs in the given order.
pub fn gpu_samples(readings: &[GpuReading], target: Option<&str>) -> Vec<ExportSample> {
    let mut out = Collect::new(reading_rank);
    emit_readings(readings, target, &mut Finite(&mut out));
    out.finish()
}

/// Emits [`gpu_samples`], family by family.
pub fn emit_readings<'a>(readings: &'a [GpuReading], target: Option<&'a str>, out: &mut impl Emit) {
    let labels = |r: &'a GpuReading| {
        let mut l: Vec<Label<'a>> = Vec::with_capacity(5);
        if let Some(t) = target {
            l.push(("target", t));
        }
        l.push(("gpu", r.index.as_str()));
        l.push(("uuid", r.uuid.as_str()));
        if !r.name.is_empty() {
            l.push(("model_name", r.name.as_str()));
        }
        l
    };
    let all: Vec<Vec<Label<'a>>> = readings.iter().map(labels).collect();
    for (family, field) in FAMILIES.iter().zip(FIELDS) {
        for (r, l) in readings.iter().zip(&all) {
            if let Some(v) = field(r) {
                out.sample(family.name, Labels::new(l, &[]), v);
            }
        }
    }
    for (r, l) in readings.iter().zip(&all) {
        let Some(bits) = r.throttle_reasons else { continue };
        for (bit, reason) in THROTTLE_REASONS {
            let value = if bits & bit != 0 { 1.0 } else { 0.0 };
            out.sample(THROTTLE, Labels::new(l, &[("reason", *reason)]), value);
        }
    }
}

/// The derived families for one target, model and window.
pub fn derived_samples(target: &str, model: &str, window: &str, d: &Derived) -> Vec<ExportSample> {
    let mut out = Collect::new(|_| None);
    emit_derived(&[("target", target), ("model", model), ("window", window)], d, &mut Finite(&mut out));
    out.finish()
}

/// Emits the derived families of one window; `base` is its target, model and window labels.
pub fn emit_derived(base: &[Label<'_>], d: &Derived, out: &mut impl Emit) {
    if let Some(m) = d.mfu {
        out.sample(MFU, Labels::new(base, &[("source", m.source.as_str())]), m.ratio);
    }
    if let Some(h) = d.hbm {
        out.sample(HBM, Labels::new(base, &[("source", h.source.as_str())]), h.ratio);
    }
    if let Some(f) = d.decode_tpot_floor_seconds {
        out.sample(TPOT_FLOOR, Labels::new(base, &[]), f);
    }
    if let Some(c) = d.cost_per_million_output {
        out.sample(COST, Labels::new(base, &[("kind", "output"), ("bound", "estimate")]), c);
    }
    if let Some(b) = d.cost_per_million_good_output {
        for (bound, v) in [("lower", b.lower), ("estimate", b.estimate), ("upper", b.upper)] {
            if let Some(v) = v {
                out.sample(COST, Labels::new(base, &[("kind", "good_output"), ("bound", bound)]), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::derive::{Bounds, FlopsSource, Mfu};

    #[test]
    fn every_family_is_a_gauge_with_help() {
        for f in FAMILIES.iter().chain(DERIVED) {
            assert!(!f.help.is_empty() && f.kind == crate::export::Kind::Gauge, "{}", f.name);
        }
        assert_eq!(FAMILIES.len(), FIELDS.len());
    }

    #[test]
    fn throttle_bits_and_missing_readings() {
        let r = GpuReading {
            index: "0".into(),
            uuid: "GPU-a".into(),
            throttle_reasons: Some(0x4 | 0x40),
            ..Default::default()
        };
        let s = gpu_samples(&[r], Some("llama"));
        assert_eq!(s.len(), THROTTLE_REASONS.len());
        let on: Vec<&str> = s.iter().filter(|x| x.value == 1.0).map(|x| x.labels.last().unwrap().1.as_str()).collect();
        assert_eq!(on, ["sw_power_cap", "hw_thermal_slowdown"]);
        assert_eq!(s[0].labels[0], ("target", "llama".to_string()));
    }

    #[test]
    fn derived_labels() {
        let d = Derived {
            mfu: Some(Mfu { ratio: 0.25, achieved_flops: 1.0, source: FlopsSource::ParamsOnly }),
            cost_per_million_good_output: Some(Bounds { lower: Some(1.0), estimate: Some(2.0), upper: None }),
            ..Derived::default()
        };
        let s = derived_samples("t", "m", "5m", &d);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].labels[3], ("source", "params".to_string()));
        assert_eq!(s[2].labels[3..], [("kind", "good_output".to_string()), ("bound", "estimate".to_string())]);
    }
}
