//! Peak dense tensor FLOP/s and memory bandwidth per GPU, keyed by the NVML/dcgm product name.
//!
//! Dense numbers only: datasheets headline 2:4-sparsity figures that are exactly 2×. Rules are
//! tried in order, most specific first, and match whole words of the normalized name (lowercase,
//! `-`/`_` as spaces), so `l4` never matches `L40S` and `h100` never matches `GH200`. An unknown
//! GPU gets `None`: no MFU rather than a guess. Sources: docs/gpu.md#peak-table-dense-no-sparsity.

use crate::gpu::config::PeakOverride;
use crate::gpu::reading::GpuReading;

pub use super::precision::Precision;

/// Peak specs of one GPU, in SI units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeakSpec {
    /// Dense BF16/FP16 tensor FLOP/s.
    pub bf16_flops: f64,
    /// Dense FP8 tensor FLOP/s; `None` before Ada/Hopper.
    pub fp8_flops: Option<f64>,
    /// Peak memory bandwidth, bytes/s.
    pub memory_bytes_per_second: f64,
}

impl PeakSpec {
    pub fn flops(&self, p: Precision) -> Option<f64> {
        match p {
            Precision::Bf16 => Some(self.bf16_flops),
            Precision::Fp8 => self.fp8_flops,
        }
    }
}

struct Rule {
    /// Every word must appear.
    all: &'static [&'static str],
    /// At least one must appear (when non-empty).
    any: &'static [&'static str],
    label: &'static str,
    spec: PeakSpec,
}

const T: f64 = 1e12;

const fn spec(bf16_tflops: f64, fp8_tflops: Option<f64>, tb_per_s: f64) -> PeakSpec {
    PeakSpec {
        bf16_flops: bf16_tflops * T,
        fp8_flops: match fp8_tflops {
            Some(f) => Some(f * T),
            None => None,
        },
        memory_bytes_per_second: tb_per_s * T,
    }
}

#[rustfmt::skip]
const RULES: &[Rule] = &[
    Rule { all: &["gh200"], any: &["144g", "144gb", "hbm3e"], label: "GH200 (HBM3e)", spec: spec(989.0, Some(1979.0), 4.9) },
    Rule { all: &["gh200"], any: &[], label: "GH200 (HBM3)", spec: spec(989.0, Some(1979.0), 4.0) },
    Rule { all: &["gb200"], any: &[], label: "GB200", spec: spec(2500.0, Some(5000.0), 8.0) },
    Rule { all: &["h200", "nvl"], any: &[], label: "H200 NVL", spec: spec(835.0, Some(1671.0), 4.8) },
    Rule { all: &["h200"], any: &[], label: "H200 SXM", spec: spec(989.0, Some(1979.0), 4.8) },
    Rule { all: &["b200"], any: &[], label: "B200", spec: spec(2250.0, Some(4500.0), 8.0) },
    Rule { all: &["h100", "nvl"], any: &[], label: "H100 NVL", spec: spec(835.0, Some(1671.0), 3.9) },
    Rule { all: &["h100", "pcie"], any: &[], label: "H100 PCIe", spec: spec(756.0, Some(1513.0), 2.0) },
    Rule { all: &["h100"], any: &["hbm3", "sxm", "sxm5"], label: "H100 SXM", spec: spec(989.0, Some(1979.0), 3.35) },
    Rule { all: &["a100", "80gb", "pcie"], any: &[], label: "A100 80GB PCIe", spec: spec(312.0, None, 1.935) },
    Rule { all: &["a100", "80gb"], any: &[], label: "A100 80GB SXM", spec: spec(312.0, None, 2.039) },
    Rule { all: &["a100", "40gb"], any: &[], label: "A100 40GB", spec: spec(312.0, None, 1.555) },
    Rule { all: &["l40s"], any: &[], label: "L40S", spec: spec(362.0, Some(733.0), 0.864) },
    Rule { all: &["l4"], any: &[], label: "L4", spec: spec(121.0, Some(242.5), 0.3) },
    Rule { all: &["a10g"], any: &[], label: "A10G", spec: spec(70.0, None, 0.6) },
    Rule { all: &["rtx", "4090"], any: &[], label: "RTX 4090", spec: spec(165.2, Some(330.3), 1.008) },
];

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn has_all(name: &[String], want: &[&str]) -> bool {
    want.iter().all(|w| name.iter().any(|n| n == w))
}

/// The built-in peak for a product name and the table row it matched, or `None` when unknown.
pub fn builtin(name: &str) -> Option<(&'static str, PeakSpec)> {
    let w = words(name);
    RULES
        .iter()
        .find(|r| has_all(&w, r.all) && (r.any.is_empty() || r.any.iter().any(|a| w.iter().any(|n| n == a))))
        .map(|r| (r.label, r.spec))
}

/// Config overrides first (all words of `match` present), then the built-in table.
pub fn lookup(name: &str, overrides: &[PeakOverride]) -> Option<PeakSpec> {
    let w = words(name);
    if let Some(o) = overrides.iter().find(|o| {
        let want = words(&o.matches);
        !want.is_empty() && want.iter().all(|x| w.contains(x))
    }) {
        return Some(PeakSpec {
            bf16_flops: o.bf16_tflops * T,
            fp8_flops: o.fp8_tflops.map(|f| f * T),
            memory_bytes_per_second: o.hbm_gbps * 1e9,
        });
    }
    builtin(name).map(|(_, s)| s)
}

/// The peak shared by every joined GPU; `None` when any is unknown or they differ (a mixed
/// set has no single per-GPU peak to multiply by n_gpus).
pub fn peak_for(readings: &[GpuReading], overrides: &[PeakOverride]) -> Option<PeakSpec> {
    let mut peaks = readings.iter().map(|r| lookup(&r.name, overrides));
    let first = peaks.next()??;
    peaks.all(|p| p == Some(first)).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(name: &str) -> Option<&'static str> {
        builtin(name).map(|(l, _)| l)
    }

    #[test]
    fn most_specific_first() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", "H100 SXM"),
            ("NVIDIA H100 PCIe", "H100 PCIe"),
            ("NVIDIA H100 NVL", "H100 NVL"),
            ("NVIDIA H200", "H200 SXM"),
            ("NVIDIA H200 NVL", "H200 NVL"),
            ("NVIDIA GH200 480GB", "GH200 (HBM3)"),
            ("NVIDIA GH200 144G HBM3e", "GH200 (HBM3e)"),
            ("NVIDIA B200", "B200"),
            ("NVIDIA GB200", "GB200"),
            ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
            ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
            ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
            ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
            ("NVIDIA L40S", "L40S"),
            ("NVIDIA L4", "L4"),
            ("NVIDIA A10G", "A10G"),
            ("NVIDIA-H100-80GB-HBM3", "H100 SXM"),
        ];
        for (name, want) in cases {
            assert_eq!(label(name), Some(want), "{name}");
        }
    }

    #[test]
    fn unknown_is_none_not_a_guess() {
        for name in
            ["NVIDIA L40", "NVIDIA A10", "Tesla T4", "NVIDIA RTX 4000 Ada Generation", "NVIDIA A100", "NVIDIA H100", ""]
        {
            assert_eq!(builtin(name), None, "{name}");
        }
    }

    #[test]
    fn dense_values_and_overrides() {
        let h100 = builtin("NVIDIA H100 80GB HBM3").unwrap().1;
        assert_eq!(h100.bf16_flops, 989e12);
        assert_eq!(h100.flops(Precision::Fp8), Some(1979e12));
        assert_eq!(h100.memory_bytes_per_second, 3.35e12);
        assert_eq!(builtin("NVIDIA A10G").unwrap().1.flops(Precision::Fp8), None);
        let o = PeakOverride { matches: "A10G".into(), bf16_tflops: 125.0, fp8_tflops: None, hbm_gbps: 600.0 };
        assert_eq!(lookup("NVIDIA A10G", std::slice::from_ref(&o)).unwrap().bf16_flops, 125e12);
        assert_eq!(lookup("NVIDIA L4", &[o]).unwrap().bf16_flops, 121e12);
    }

    #[test]
    fn one_peak_for_a_set_of_gpus() {
        let gpu = |name: &str| GpuReading { name: name.into(), ..GpuReading::default() };
        let h = [gpu("NVIDIA H100 80GB HBM3"), gpu("NVIDIA H100 80GB HBM3")];
        assert_eq!(peak_for(&h, &[]).unwrap().bf16_flops, 989e12);
        assert_eq!(peak_for(&[gpu("NVIDIA H100 80GB HBM3"), gpu("NVIDIA L4")], &[]), None);
        assert_eq!(peak_for(&[gpu("NVIDIA H100 80GB HBM3"), gpu("Tesla T4")], &[]), None);
        assert_eq!(peak_for(&[], &[]), None);
    }
}
