//! MFU, HBM bandwidth utilization, the decode TPOT floor and cost, from rates over one window.
//!
//! Pure: every input is a number the caller already computed (rates over the window, the
//! joined GPUs' peak spec, the model spec). Each result names its source, because an engine's
//! own counter, a hardware counter and a params-based estimate are not equally trustworthy.
//! Formulas and their limits are in docs/gpu.md.

use crate::gpu::models::ModelSpec;
use crate::gpu::peaks::PeakSpec;

/// Where achieved FLOP/s came from (`source` label of `llm_slo_mfu_ratio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlopsSource {
    /// The engine's own estimate, e.g. vLLM `estimated_flops_per_gpu_total` (`--enable-mfu-metrics`).
    EngineCounter,
    /// 2 × active params per token plus the attention term 4 × layers × context × attention dim.
    ParamsAndAttention,
    /// 2 × active params per token; attention omitted (model shapes or context length unknown).
    ParamsOnly,
}

impl FlopsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FlopsSource::EngineCounter => "engine_counter",
            FlopsSource::ParamsAndAttention => "params_attention",
            FlopsSource::ParamsOnly => "params",
        }
    }
}

/// Where achieved memory bandwidth came from (`source` label of the HBM family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthSource {
    /// vLLM `estimated_read_bytes_per_gpu_total` + `estimated_write_bytes_per_gpu_total`.
    EngineCounter,
    /// Hardware DRAM activity: NVML GPM `DramBwUtil` or DCGM `DCGM_FI_PROF_DRAM_ACTIVE`.
    DramActive,
    /// Weights plus KV bytes per step × steps/s, over peak bandwidth.
    Estimate,
}

impl BandwidthSource {
    pub fn as_str(self) -> &'static str {
        match self {
            BandwidthSource::EngineCounter => "engine_counter",
            BandwidthSource::DramActive => "dram_active",
            BandwidthSource::Estimate => "estimate",
        }
    }
}

/// Rates and context over one window for one target and model. Rates are per second and
/// summed over the engine's GPUs unless named `_per_gpu`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// GPUs serving this model (TP × PP × DP). Zero means unknown: nothing is derived.
    pub n_gpus: u32,
    /// Engine FLOP counter rate per GPU (vLLM `estimated_flops_per_gpu_total`).
    pub engine_flops_per_gpu: Option<f64>,
    /// Engine read + write byte counter rates per GPU.
    pub engine_bytes_per_gpu: Option<f64>,
    /// Mean DRAM-active ratio over the joined GPUs (GPM or DCGM).
    pub dram_active_ratio: Option<f64>,
    /// Prompt tokens computed per second (prefix-cache hits already subtracted when known).
    pub prefill_tokens_per_second: Option<f64>,
    /// Output (decode) tokens per second.
    pub decode_tokens_per_second: Option<f64>,
    /// Mean prompt and output length per request, for the attention term and KV bytes.
    pub mean_prompt_tokens: Option<f64>,
    pub mean_output_tokens: Option<f64>,
    /// Engine steps per second (vLLM `rate(iteration_tokens_total_count)`).
    pub steps_per_second: Option<f64>,
    /// Sequences per decode step, when known (e.g. mean `num_requests_running`).
    pub batch: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Mfu {
    pub ratio: f64,
    /// Achieved FLOP/s summed over the GPUs.
    pub achieved_flops: f64,
    pub source: FlopsSource,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Hbm {
    pub ratio: f64,
    pub source: BandwidthSource,
}

fn pos(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite() && *v >= 0.0)
}

/// Mean context a decode token attends to: the prompt plus half the output so far.
pub fn mean_decode_context(i: &Inputs) -> Option<f64> {
    Some(pos(i.mean_prompt_tokens)? + pos(i.mean_output_tokens)? / 2.0)
}

/// Achieved FLOP/s summed over the GPUs, with its source.
pub fn achieved_flops(i: &Inputs, model: Option<&ModelSpec>) -> Option<(f64, FlopsSource)> {
    if i.n_gpus == 0 {
        return None;
    }
    if let Some(f) = pos(i.engine_flops_per_gpu) {
        return Some((f * f64::from(i.n_gpus), FlopsSource::EngineCounter));
    }
    let m = model?;
    let prefill = pos(i.prefill_tokens_per_second).unwrap_or(0.0);
    let decode = pos(i.decode_tokens_per_second)?;
    let dense = 2.0 * m.active_params * (prefill + decode);
    // Attention: QKᵀ and AV are 2·c·d FLOPs each per layer per token (as vLLM counts them).
    // Prefill tokens attend on average to half the prompt, decode tokens to prompt + half output.
    let attention = match (m.layers, m.attention_dim, pos(i.mean_prompt_tokens), mean_decode_context(i)) {
        (Some(l), Some(d), Some(p), Some(c)) => {
            let per = 4.0 * f64::from(l) * f64::from(d);
            Some(per * (prefill * p / 2.0 + decode * c))
        }
        _ => None,
    };
    Some(match attention {
        Some(a) => (dense + a, FlopsSource::ParamsAndAttention),
        None => (dense, FlopsSource::ParamsOnly),
    })
}

/// MFU = achieved FLOP/s / (peak × n_gpus). `None` without a peak: never a guess.
pub fn mfu(i: &Inputs, model: Option<&ModelSpec>, peak: Option<&PeakSpec>) -> Option<Mfu> {
    let precision = model.map(|m| m.precision).unwrap_or_default();
    let peak = peak?.flops(precision)?;
    let (achieved, source) = achieved_flops(i, model)?;
    Some(Mfu { ratio: achieved / (peak * f64::from(i.n_gpus)), achieved_flops: achieved, source })
}

/// Sequences per decode step: the given batch, else decode tokens per step.
fn batch(i: &Inputs) -> Option<f64> {
    pos(i.batch).or_else(|| Some(pos(i.decode_tokens_per_second)? / pos(i.steps_per_second).filter(|s| *s > 0.0)?))
}

/// Bytes one decode step reads per GPU: its share of weights plus the batch's KV cache.
/// Without a batch size this is the batch-1 weights-only floor.
pub fn bytes_per_step_per_gpu(i: &Inputs, model: &ModelSpec) -> Option<f64> {
    if i.n_gpus == 0 {
        return None;
    }
    let b = batch(i).unwrap_or(1.0);
    let kv = match (model.kv_bytes_per_token, mean_decode_context(i), batch(i)) {
        (Some(kv), Some(c), Some(b)) => b * c * kv,
        _ => 0.0,
    };
    Some((model.weight_bytes_per_step(b) + kv) / f64::from(i.n_gpus))
}

/// HBM bandwidth utilization per GPU, best source first: engine byte counters, hardware DRAM
/// activity, then the weights + KV estimate at the measured step rate.
pub fn hbm_utilization(i: &Inputs, model: Option<&ModelSpec>, peak: Option<&PeakSpec>) -> Option<Hbm> {
    let bw = peak.map(|p| p.memory_bytes_per_second);
    if let (Some(b), Some(bw)) = (pos(i.engine_bytes_per_gpu), bw) {
        return Some(Hbm { ratio: b / bw, source: BandwidthSource::EngineCounter });
    }
    if let Some(r) = pos(i.dram_active_ratio) {
        return Some(Hbm { ratio: r, source: BandwidthSource::DramActive });
    }
    let steps = pos(i.steps_per_second)?;
    let bytes = bytes_per_step_per_gpu(i, model?)?;
    Some(Hbm { ratio: steps * bytes / bw?, source: BandwidthSource::Estimate })
}

/// The fastest a decode step can be: bytes per step per GPU over peak bandwidth.
pub fn decode_tpot_floor_seconds(i: &Inputs, model: Option<&ModelSpec>, peak: Option<&PeakSpec>) -> Option<f64> {
    Some(bytes_per_step_per_gpu(i, model?)? / peak?.memory_bytes_per_second)
}

/// A value with honest bounds (`bound="lower|estimate|upper"`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Bounds {
    pub lower: Option<f64>,
    pub estimate: Option<f64>,
    pub upper: Option<f64>,
}

/// Dollars per million tokens at a token rate: gpu_hour × n_gpus / 3600 / tokens_per_s × 1e6.
/// `None` when nothing was produced (the cost per token is unbounded).
pub fn dollars_per_million_tokens(gpu_hour_dollars: f64, n_gpus: u32, tokens_per_second: f64) -> Option<f64> {
    if n_gpus == 0
        || tokens_per_second.is_nan()
        || tokens_per_second <= 0.0
        || !gpu_hour_dollars.is_finite()
        || gpu_hour_dollars < 0.0
    {
        return None;
    }
    Some(gpu_hour_dollars * f64::from(n_gpus) / 3600.0 / tokens_per_second * 1e6)
}

/// Cost per million *good* output tokens from token-goodput bounds. The bounds swap: the
/// upper goodput gives the lower cost. A zero lower goodput leaves the upper cost unbounded.
pub fn dollars_per_million_good_tokens(gpu_hour_dollars: f64, n_gpus: u32, goodput: &Bounds) -> Bounds {
    let c = |g: Option<f64>| g.and_then(|g| dollars_per_million_tokens(gpu_hour_dollars, n_gpus, g));
    Bounds { lower: c(goodput.upper), estimate: c(goodput.estimate), upper: c(goodput.lower) }
}

/// Everything derived for one target, model and window.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Derived {
    pub mfu: Option<Mfu>,
    pub hbm: Option<Hbm>,
    pub decode_tpot_floor_seconds: Option<f64>,
    pub cost_per_million_output: Option<f64>,
    pub cost_per_million_good_output: Option<Bounds>,
}

/// Runs every derivation; `goodput_tokens` is token goodput (output tokens/s) with bounds.
pub fn derive(
    i: &Inputs,
    model: Option<&ModelSpec>,
    peak: Option<&PeakSpec>,
    gpu_hour_dollars: Option<f64>,
    goodput_tokens: Option<&Bounds>,
) -> Derived {
    let cost = gpu_hour_dollars.zip(pos(i.decode_tokens_per_second));
    Derived {
        mfu: mfu(i, model, peak),
        hbm: hbm_utilization(i, model, peak),
        decode_tpot_floor_seconds: decode_tpot_floor_seconds(i, model, peak),
        cost_per_million_output: cost.and_then(|(d, t)| dollars_per_million_tokens(d, i.n_gpus, t)),
        cost_per_million_good_output: gpu_hour_dollars
            .zip(goodput_tokens)
            .map(|(d, g)| dollars_per_million_good_tokens(d, i.n_gpus, g))
            .filter(|b| i.n_gpus > 0 && (b.lower.is_some() || b.estimate.is_some() || b.upper.is_some())),
    }
}

#[cfg(test)]
#[path = "derive_tests.rs"]
mod tests;
