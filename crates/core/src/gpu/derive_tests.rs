//! Hand calculations for derive.rs (the formulas of docs/gpu.md#formulas, worked through).

use super::*;
use crate::gpu::{models, peaks};

fn close(a: f64, b: f64) {
    assert!(((a - b) / b).abs() < 1e-12, "{a} != {b}");
}

fn llama8b() -> ModelSpec {
    models::builtin("meta-llama/Llama-3.1-8B-Instruct").unwrap()
}

fn h100() -> PeakSpec {
    peaks::builtin("NVIDIA H100 80GB HBM3").unwrap().1
}

/// Llama-3.1-8B on one H100 SXM decoding 5,000 tok/s at mean context 1536 + 1024/2 = 2048.
fn decode() -> Inputs {
    Inputs {
        n_gpus: 1,
        decode_tokens_per_second: Some(5000.0),
        mean_prompt_tokens: Some(1536.0),
        mean_output_tokens: Some(1024.0),
        steps_per_second: Some(40.0),
        ..Inputs::default()
    }
}

#[test]
fn mfu_params_and_attention() {
    // 5000 × (2 × 8.03e9 + 4 × 32 × 4096 × 2048) = 5000 × 17.133741824e9 = 85.66870912e12 FLOP/s.
    let m = mfu(&decode(), Some(&llama8b()), Some(&h100())).unwrap();
    assert_eq!(m.source, FlopsSource::ParamsAndAttention);
    close(m.achieved_flops, 85.668_709_12e12);
    close(m.ratio, 85.668_709_12e12 / 989e12);
}

#[test]
fn mfu_with_prefill() {
    // Dense 2 × 8.03e9 × 15000 = 240.9e12; prefill attention 524288 × 10000 × 768 = 4.02653184e12;
    // decode attention 524288 × 5000 × 2048 = 5.36870912e12.
    let i = Inputs { prefill_tokens_per_second: Some(10_000.0), ..decode() };
    let m = mfu(&i, Some(&llama8b()), Some(&h100())).unwrap();
    close(m.achieved_flops, 240.9e12 + 4.026_531_84e12 + 5.368_709_12e12);
}

#[test]
fn mfu_params_only_without_lengths() {
    let i = Inputs { mean_prompt_tokens: None, ..decode() };
    let m = mfu(&i, Some(&llama8b()), Some(&h100())).unwrap();
    assert_eq!(m.source, FlopsSource::ParamsOnly);
    close(m.ratio, 80.3e12 / 989e12);
}

#[test]
fn mfu_engine_counter_wins() {
    let i = Inputs { n_gpus: 2, engine_flops_per_gpu: Some(100e12), ..decode() };
    let m = mfu(&i, Some(&llama8b()), Some(&h100())).unwrap();
    assert_eq!(m.source, FlopsSource::EngineCounter);
    close(m.achieved_flops, 200e12);
    close(m.ratio, 100.0 / 989.0);
    // FP8 model on an A10G (no FP8 peak), unknown GPU, zero GPUs: no MFU.
    let fp8 = models::builtin("meta-llama/Llama-3.1-8B-Instruct-FP8").unwrap();
    let a10g = peaks::builtin("NVIDIA A10G").unwrap().1;
    assert_eq!(mfu(&decode(), Some(&fp8), Some(&a10g)), None);
    assert_eq!(mfu(&decode(), Some(&llama8b()), None), None);
    assert_eq!(mfu(&Inputs { n_gpus: 0, ..decode() }, Some(&llama8b()), Some(&h100())), None);
}

#[test]
fn hbm_sources_in_order() {
    // Estimate: batch 5000/40 = 125; KV 125 × 2048 × 131072 = 33.554432e9 B; weights 16.06e9 B;
    // 49.614432e9 B/step × 40 steps/s = 1.98457728e12 B/s over 3.35e12.
    let h = hbm_utilization(&decode(), Some(&llama8b()), Some(&h100())).unwrap();
    assert_eq!(h.source, BandwidthSource::Estimate);
    close(h.ratio, 1.984_577_28e12 / 3.35e12);
    let dram = Inputs { dram_active_ratio: Some(0.42), ..decode() };
    assert_eq!(hbm_utilization(&dram, None, None), Some(Hbm { ratio: 0.42, source: BandwidthSource::DramActive }));
    let eng = Inputs { engine_bytes_per_gpu: Some(1.675e12), ..dram };
    let h = hbm_utilization(&eng, None, Some(&h100())).unwrap();
    assert_eq!(h.source, BandwidthSource::EngineCounter);
    close(h.ratio, 0.5);
}

#[test]
fn tpot_floor() {
    close(decode_tpot_floor_seconds(&decode(), Some(&llama8b()), Some(&h100())).unwrap(), 49.614_432e9 / 3.35e12);
    // Llama-3.1-70B on 4 × H100, batch unknown: 141.1e9 / 4 / 3.35e12 ≈ 10.5 ms.
    let m70 = models::builtin("meta-llama/Llama-3.1-70B-Instruct").unwrap();
    let i = Inputs { n_gpus: 4, ..Inputs::default() };
    close(decode_tpot_floor_seconds(&i, Some(&m70), Some(&h100())).unwrap(), 141.1e9 / 4.0 / 3.35e12);
}

#[test]
fn cost_and_good_cost_bounds_swap() {
    close(dollars_per_million_tokens(2.5, 1, 5000.0).unwrap(), 2.5 / 3600.0 / 5000.0 * 1e6);
    close(dollars_per_million_tokens(2.0, 8, 1000.0).unwrap(), 16.0 / 3600.0 / 1000.0 * 1e6);
    assert_eq!(dollars_per_million_tokens(2.5, 1, 0.0), None);
    let g = Bounds { lower: Some(3000.0), estimate: Some(4000.0), upper: Some(4500.0) };
    let c = dollars_per_million_good_tokens(2.5, 1, &g);
    close(c.lower.unwrap(), 2.5 / 3600.0 / 4500.0 * 1e6);
    close(c.estimate.unwrap(), 2.5 / 3600.0 / 4000.0 * 1e6);
    close(c.upper.unwrap(), 2.5 / 3600.0 / 3000.0 * 1e6);
    assert!(c.lower < c.estimate && c.estimate < c.upper);
    let zero = Bounds { lower: Some(0.0), ..g };
    assert_eq!(dollars_per_million_good_tokens(2.5, 1, &zero).upper, None);
    let d = derive(&decode(), Some(&llama8b()), Some(&h100()), Some(2.5), Some(&g));
    close(d.cost_per_million_output.unwrap(), 2.5 / 3600.0 / 5000.0 * 1e6);
    assert!(d.mfu.is_some() && d.hbm.is_some() && d.decode_tpot_floor_seconds.is_some());
    assert_eq!(derive(&decode(), None, None, None, None), Derived::default());
}
