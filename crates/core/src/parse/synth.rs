//! A synthetic vLLM-V1-like exposition for benchmarks, memory measurements and tests.
//!
//! It mirrors what `vllm serve` exposes per (model, engine): every V1 histogram with its
//! real bucket list, the counters with their prometheus_client `*_created` gauge
//! companions, the gauges and the info metric, with Python's float formatting. Values
//! come from a seeded SplitMix64, so a given (size, seed) always yields the same bytes.

use std::fmt::Write;

const LATENCY: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];
const TTFT: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
const ITL: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const TOKENS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0];
const ITERATION: &[f64] = &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
const PARAMS_N: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];

const HISTOGRAMS: &[(&str, &[f64])] = &[
    ("request_prompt_tokens", TOKENS),
    ("request_generation_tokens", TOKENS),
    ("iteration_tokens_total", ITERATION),
    ("request_max_num_generation_tokens", TOKENS),
    ("request_params_n", PARAMS_N),
    ("request_params_max_tokens", TOKENS),
    ("time_to_first_token_seconds", TTFT),
    ("inter_token_latency_seconds", ITL),
    ("request_time_per_output_token_seconds", ITL),
    ("e2e_request_latency_seconds", LATENCY),
    ("request_queue_time_seconds", LATENCY),
    ("request_inference_time_seconds", LATENCY),
    ("request_prefill_time_seconds", LATENCY),
    ("request_decode_time_seconds", LATENCY),
    ("request_prefill_kv_computed_tokens", TOKENS),
];
const COUNTERS: &[&str] = &[
    "prefix_cache_queries",
    "prefix_cache_hits",
    "external_prefix_cache_queries",
    "external_prefix_cache_hits",
    "mm_cache_queries",
    "mm_cache_hits",
    "num_preemptions",
    "prompt_tokens",
    "generation_tokens",
];
const GAUGES: &[&str] = &["num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"];
const FINISHED: &[&str] = &["stop", "length", "abort", "error"];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Python's `repr(float)` for the values we generate: always a `.` or an exponent.
fn py(out: &mut String, v: f64) {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e16 {
        let _ = write!(out, "{v:.1}");
    } else if v.abs() >= 1e16 || (v != 0.0 && v.abs() < 1e-4) {
        let s = format!("{v:e}");
        // Rust writes `1.5e9`; Python writes `1.5e+09`.
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
                let _ = write!(out, "{m}e{sign}{digits:0>2}");
            }
            None => out.push_str(&s),
        }
    } else {
        let _ = write!(out, "{v}");
    }
}

fn labels(out: &mut String, engine: usize, model: &str, extra: Option<(&str, &str)>) {
    let _ = write!(out, "{{engine=\"{engine}\"");
    if let Some((k, v)) = extra {
        let _ = write!(out, ",{k}=\"{v}\"");
    }
    let _ = write!(out, ",model_name=\"{model}\"}} ");
}

fn model_name(i: usize) -> String {
    const ORGS: &[&str] = &["meta-llama", "Qwen", "mistralai", "deepseek-ai", "google"];
    format!("{}/Model-{}-{}B-Instruct", ORGS[i % ORGS.len()], i, 1 + (i * 7) % 70)
}

fn write_block(out: &mut String, models: &[String], engines: usize, rng: &mut Rng) {
    let created = 1.768264339889e9;
    let series = || models.iter().flat_map(|m| (0..engines).map(move |e| (m.as_str(), e)));
    for g in GAUGES {
        let _ = write!(out, "# HELP vllm:{g} {g} of the engine.\n# TYPE vllm:{g} gauge\n");
        for (m, e) in series() {
            let _ = write!(out, "vllm:{g}");
            labels(out, e, m, None);
            py(out, (rng.unit() * 64.0).floor());
            out.push('\n');
        }
    }
    for c in COUNTERS {
        let _ = write!(out, "# HELP vllm:{c}_total Number of {c}.\n# TYPE vllm:{c}_total counter\n");
        for (m, e) in series() {
            let _ = write!(out, "vllm:{c}_total");
            labels(out, e, m, None);
            py(out, (rng.unit() * 1e7).floor());
            out.push('\n');
        }
        let _ = write!(out, "# HELP vllm:{c}_created Number of {c}.\n# TYPE vllm:{c}_created gauge\n");
        for (m, e) in series() {
            let _ = write!(out, "vllm:{c}_created");
            labels(out, e, m, None);
            py(out, created + rng.unit());
            out.push('\n');
        }
    }
    out.push_str("# HELP vllm:request_success_total Count of successfully processed requests.\n");
    out.push_str("# TYPE vllm:request_success_total counter\n");
    for (m, e) in series() {
        for r in FINISHED {
            out.push_str("vllm:request_success_total");
            labels(out, e, m, Some(("finished_reason", r)));
            py(out, (rng.unit() * 1e5).floor());
            out.push('\n');
        }
    }
    for (h, buckets) in HISTOGRAMS {
        let _ = write!(out, "# HELP vllm:{h} Histogram of {h}.\n# TYPE vllm:{h} histogram\n");
        for (m, e) in series() {
            let mut cum = 0.0;
            let mut sum = 0.0;
            for b in buckets.iter() {
                let n = (rng.unit() * 50.0).floor();
                cum += n;
                sum += n * b * rng.unit();
                let _ = write!(out, "vllm:{h}_bucket{{engine=\"{e}\",le=\"");
                py(out, *b);
                let _ = write!(out, "\",model_name=\"{m}\"}} ");
                py(out, cum);
                out.push('\n');
            }
            cum += (rng.unit() * 3.0).floor();
            let _ = write!(out, "vllm:{h}_bucket{{engine=\"{e}\",le=\"+Inf\",model_name=\"{m}\"}} ");
            py(out, cum);
            let _ = write!(out, "\nvllm:{h}_count");
            labels(out, e, m, None);
            py(out, cum);
            let _ = write!(out, "\nvllm:{h}_sum");
            labels(out, e, m, None);
            py(out, sum + rng.unit() * 1e-3);
            out.push('\n');
        }
        let _ = write!(out, "# HELP vllm:{h}_created Histogram of {h}.\n# TYPE vllm:{h}_created gauge\n");
        for (m, e) in series() {
            let _ = write!(out, "vllm:{h}_created");
            labels(out, e, m, None);
            py(out, created + rng.unit());
            out.push('\n');
        }
    }
    out.push_str("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n");
    out.push_str("# TYPE vllm:cache_config_info gauge\n");
    for (m, e) in series() {
        let _ = writeln!(
            out,
            "vllm:cache_config_info{{block_size=\"16\",cache_dtype=\"auto\",engine=\"{e}\",gpu_memory_utilization=\"0.9\",model_name=\"{m}\",num_gpu_blocks=\"{}\"}} 1.0",
            20000 + e
        );
    }
}

/// A vLLM-V1-like exposition of about `target_bytes` (never less than one model on one
/// engine), for `engines` data-parallel engines per model.
pub fn vllm_like_exposition(target_bytes: usize, engines: usize, seed: u64) -> String {
    let engines = engines.max(1);
    let mut probe = String::new();
    write_block(&mut probe, &[model_name(0)], engines, &mut Rng(seed));
    let per_model = probe.len().max(1);
    let models: Vec<String> = (0..target_bytes.div_ceil(per_model).max(1)).map(model_name).collect();
    let mut out = String::with_capacity(per_model * models.len() + 1024);
    write_block(&mut out, &models, engines, &mut Rng(seed));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Limits, MetricType, parse};

    #[test]
    fn python_float_forms() {
        let f = |v| {
            let mut s = String::new();
            py(&mut s, v);
            s
        };
        assert_eq!(f(2.0), "2.0");
        assert_eq!(f(1.768264339889e9), "1768264339.889");
        assert_eq!(f(0.00001), "1e-05");
        assert_eq!(f(0.25), "0.25");
    }

    #[test]
    fn generated_exposition_parses_with_every_series_counted() {
        let text = vllm_like_exposition(200_000, 4, 7);
        assert!(text.len() >= 200_000 && text.len() < 400_000, "{}", text.len());
        let e = parse(text.as_bytes(), &Limits::default()).unwrap();
        let lines = text.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(e.samples.len(), lines);
        assert!(e.duplicates.is_empty());
        let models: std::collections::HashSet<&str> =
            text.split("model_name=\"").skip(1).filter_map(|r| r.split('"').next()).collect();
        let ttft = e.samples.iter().filter(|s| s.name == "vllm:time_to_first_token_seconds_bucket").count();
        assert_eq!(ttft, models.len() * 4 * (TTFT.len() + 1));
        let hist = e.families.iter().filter(|f| f.kind == MetricType::Histogram).count();
        assert_eq!(hist, HISTOGRAMS.len());
        assert_eq!(vllm_like_exposition(200_000, 4, 7), text, "deterministic");
    }
}
