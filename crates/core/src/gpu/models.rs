//! Shapes of popular served models, matched from the served model name, for MFU and bandwidth
//! estimates when the engine does not export its own FLOP/byte counters.
//!
//! Names are split into lowercase words on anything but letters, digits and `.`, so
//! `meta-llama/Llama-3.1-8B-Instruct` becomes `meta llama 3.1 8b instruct`. Values are from
//! the models' config.json (docs/gpu.md#model-table). Quantization words in the name change the
//! bytes per parameter (`fp8` → 1 and FP8 compute; `awq`/`gptq`/`int4`/`w4a16` → 0.5).

use crate::gpu::config::ModelOverride;
use crate::gpu::peaks::Precision;

/// What the derivations need to know about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub label: String,
    /// Parameters touched per token (MoE: shared + routed experts per token).
    pub active_params: f64,
    /// Parameters resident in memory.
    pub total_params: f64,
    /// Weight bytes per parameter (2 for BF16).
    pub bytes_per_param: f64,
    pub precision: Precision,
    /// Layers and attention width n_heads × head_dim, for the attention FLOP term.
    pub layers: Option<u32>,
    pub attention_dim: Option<u32>,
    /// KV-cache bytes per token of context, whole model, at the default KV dtype (BF16).
    pub kv_bytes_per_token: Option<f64>,
    /// MoE: (routed experts, routed experts per token), for weight bytes touched per step.
    pub experts: Option<(u32, u32)>,
}

impl ModelSpec {
    /// Weight bytes resident in memory (whole model, all GPUs together).
    pub fn weight_bytes(&self) -> f64 {
        self.total_params * self.bytes_per_param
    }

    /// Weight bytes read by one decode step of `batch` tokens. Dense models read every weight;
    /// MoE models read the shared part plus the expected share of experts hit by the batch,
    /// E·(1−(1−k/E)^B), which approaches all experts quickly.
    pub fn weight_bytes_per_step(&self, batch: f64) -> f64 {
        let Some((e, k)) = self.experts.filter(|(e, k)| *e > *k && *k > 0) else {
            return self.weight_bytes();
        };
        let (e, k) = (f64::from(e), f64::from(k));
        let per_expert = (self.total_params - self.active_params) / (e - k);
        let shared = self.active_params - k * per_expert;
        let hit = e * (1.0 - (1.0 - k / e).powf(batch.max(1.0)));
        (shared + hit * per_expert) * self.bytes_per_param
    }
}

struct Row {
    all: &'static [&'static str],
    /// A word starting with this must be present ("3" matches `3`, `3.1`, `3.3`).
    prefix: &'static str,
    none: &'static [&'static str],
    label: &'static str,
    active: f64,
    total: f64,
    bytes: f64,
    precision: Precision,
    layers: u32,
    attention_dim: u32,
    kv_bytes: f64,
    experts: Option<(u32, u32)>,
}

const B: f64 = 1e9;
const BF: Precision = Precision::Bf16;

#[rustfmt::skip]
const ROWS: &[Row] = &[
    Row { all: &["llama", "8b"], prefix: "3", none: &[], label: "Llama-3.x-8B", active: 8.03 * B, total: 8.03 * B, bytes: 2.0, precision: BF, layers: 32, attention_dim: 4096, kv_bytes: 131_072.0, experts: None },
    Row { all: &["llama", "70b"], prefix: "3", none: &[], label: "Llama-3.x-70B", active: 70.55 * B, total: 70.55 * B, bytes: 2.0, precision: BF, layers: 80, attention_dim: 8192, kv_bytes: 327_680.0, experts: None },
    Row { all: &["llama", "405b"], prefix: "3", none: &[], label: "Llama-3.x-405B", active: 405.85 * B, total: 405.85 * B, bytes: 2.0, precision: BF, layers: 126, attention_dim: 16384, kv_bytes: 516_096.0, experts: None },
    Row { all: &["7b"], prefix: "qwen2.5", none: &[], label: "Qwen2.5-7B", active: 7.61 * B, total: 7.61 * B, bytes: 2.0, precision: BF, layers: 28, attention_dim: 3584, kv_bytes: 57_344.0, experts: None },
    Row { all: &["72b"], prefix: "qwen2.5", none: &[], label: "Qwen2.5-72B", active: 72.7 * B, total: 72.7 * B, bytes: 2.0, precision: BF, layers: 80, attention_dim: 8192, kv_bytes: 327_680.0, experts: None },
    Row { all: &["mixtral", "8x7b"], prefix: "", none: &[], label: "Mixtral-8x7B", active: 12.9 * B, total: 46.7 * B, bytes: 2.0, precision: BF, layers: 32, attention_dim: 4096, kv_bytes: 131_072.0, experts: Some((8, 2)) },
    Row { all: &["mistral", "7b"], prefix: "", none: &[], label: "Mistral-7B", active: 7.24 * B, total: 7.24 * B, bytes: 2.0, precision: BF, layers: 32, attention_dim: 4096, kv_bytes: 131_072.0, experts: None },
    // Native FP8 weights. MLA attention: QKᵀ over 128 heads × 192 and AV over 128 × 128, so the
    // 4·L·c·d term uses their mean, 20480. KV: (512 + 64) · 61 layers · 2 bytes.
    Row { all: &["deepseek"], prefix: "v3", none: &["distill", "lite"], label: "DeepSeek-V3", active: 37.0 * B, total: 671.0 * B, bytes: 1.0, precision: Precision::Fp8, layers: 61, attention_dim: 20480, kv_bytes: 70_272.0, experts: Some((256, 8)) },
    Row { all: &["deepseek", "r1"], prefix: "", none: &["distill", "lite"], label: "DeepSeek-R1", active: 37.0 * B, total: 671.0 * B, bytes: 1.0, precision: Precision::Fp8, layers: 61, attention_dim: 20480, kv_bytes: 70_272.0, experts: Some((256, 8)) },
];

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The table row for a served model name, with quantization words applied; `None` when unknown.
pub fn builtin(served: &str) -> Option<ModelSpec> {
    let w = words(served);
    let has = |x: &str| w.iter().any(|n| n == x);
    let row = ROWS.iter().find(|r| {
        r.all.iter().all(|a| has(a))
            && (r.prefix.is_empty() || w.iter().any(|n| n.starts_with(r.prefix)))
            && !r.none.iter().any(|n| has(n))
    })?;
    let mut spec = ModelSpec {
        label: row.label.to_string(),
        active_params: row.active,
        total_params: row.total,
        bytes_per_param: row.bytes,
        precision: row.precision,
        layers: Some(row.layers),
        attention_dim: Some(row.attention_dim),
        kv_bytes_per_token: Some(row.kv_bytes),
        experts: row.experts,
    };
    if ["awq", "gptq", "int4", "w4a16"].iter().any(|q| has(q)) {
        spec.bytes_per_param = 0.5;
        spec.precision = Precision::Bf16;
    } else if ["fp8", "w8a8"].iter().any(|q| has(q)) {
        spec.bytes_per_param = 1.0;
        spec.precision = Precision::Fp8;
    }
    Some(spec)
}

/// Config overrides first, then the built-in table.
pub fn lookup(served: &str, overrides: &[ModelOverride]) -> Option<ModelSpec> {
    let w = words(served);
    let hit = overrides.iter().find(|o| {
        let want = words(&o.matches);
        !want.is_empty() && want.iter().all(|x| w.contains(x))
    });
    let Some(o) = hit else { return builtin(served) };
    let base = builtin(served);
    Some(ModelSpec {
        label: o.matches.clone(),
        active_params: o.active_params,
        total_params: o.total_params.unwrap_or(o.active_params),
        bytes_per_param: o.bytes_per_param.unwrap_or(2.0),
        precision: o.precision.unwrap_or_default(),
        layers: o.layers.or(base.as_ref().and_then(|b| b.layers)),
        attention_dim: o.attention_dim.or(base.as_ref().and_then(|b| b.attention_dim)),
        kv_bytes_per_token: o.kv_bytes_per_token.or(base.as_ref().and_then(|b| b.kv_bytes_per_token)),
        experts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(s: &str) -> Option<String> {
        builtin(s).map(|m| m.label)
    }

    #[test]
    fn matches_served_names() {
        let cases = [
            ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.x-8B"),
            ("meta-llama/Meta-Llama-3-8B-Instruct", "Llama-3.x-8B"),
            ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3.x-70B"),
            ("meta-llama/Llama-3.1-405B-Instruct-FP8", "Llama-3.x-405B"),
            ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B"),
            ("Qwen/Qwen2.5-72B-Instruct", "Qwen2.5-72B"),
            ("mistralai/Mistral-7B-Instruct-v0.3", "Mistral-7B"),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"),
            ("deepseek-ai/DeepSeek-V3", "DeepSeek-V3"),
            ("deepseek-ai/DeepSeek-V3-0324", "DeepSeek-V3"),
        ];
        for (name, want) in cases {
            assert_eq!(label(name).as_deref(), Some(want), "{name}");
        }
        for name in
            ["meta-llama/Llama-2-7b-hf", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "Qwen/Qwen3-8B", "gpt2", ""]
        {
            assert_eq!(label(name), None, "{name}");
        }
    }

    #[test]
    fn quantization_and_moe() {
        let fp8 = builtin("meta-llama/Llama-3.1-405B-Instruct-FP8").unwrap();
        assert_eq!((fp8.bytes_per_param, fp8.precision), (1.0, Precision::Fp8));
        assert_eq!(builtin("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4").unwrap().bytes_per_param, 0.5);
        let m = builtin("mistralai/Mixtral-8x7B-v0.1").unwrap();
        // Hand: per expert = (46.7−12.9)/6 = 5.6333B; shared = 12.9 − 2·5.6333 = 1.6333B.
        // Batch 1: 1.6333 + 8·(1−0.75)·5.6333 = 12.9B params → 25.8 GB.
        assert!((m.weight_bytes_per_step(1.0) - 25.8e9).abs() < 1e3);
        // Batch 8: hit = 8·(1−0.75^8) = 7.19922; bytes = 2·(1.6333 + 7.19922·5.6333)B.
        let want = 2.0 * (1.633_333_333e9 + 8.0 * (1.0 - 0.75f64.powi(8)) * 5.633_333_333e9);
        assert!((m.weight_bytes_per_step(8.0) - want).abs() < 1e4);
        assert!((builtin("meta-llama/Llama-3.1-8B").unwrap().weight_bytes_per_step(64.0) - 16.06e9).abs() < 1.0);
    }

    #[test]
    fn overrides_win() {
        let o = ModelOverride {
            matches: "my-finetune".into(),
            active_params: 1e9,
            total_params: None,
            bytes_per_param: None,
            layers: None,
            attention_dim: None,
            kv_bytes_per_token: None,
            precision: None,
        };
        let m = lookup("org/my-finetune-v2", &[o]).unwrap();
        assert_eq!((m.active_params, m.total_params, m.bytes_per_param), (1e9, 1e9, 2.0));
        assert_eq!(lookup("org/other", &[]), None);
    }
}
