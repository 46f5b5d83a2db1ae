//! Every real scrape in the fixtures (tests/it/tools: `real_fixtures`) parses, its engine is detected, and the
//! canonical values equal numbers read off the file by a plain line filter (not the parser).

use crate::tools;

use goodput::adapt::{EngineHint, adapt, detect};
use goodput::canonical::{CounterKind, Engine, FinishReason, GaugeKind, HistogramKind, Snapshot};
use goodput::gpu::dcgm;
use goodput::parse::{Limits, parse};

fn fixture(name: &str) -> String {
    let path = tools::real_fixture(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Sum of the values of every line that starts with `prefix` (a name, optionally with `{`).
fn grep_sum(body: &str, prefix: &str, must_contain: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(must_contain))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn snapshot(body: &str) -> Snapshot {
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    assert!(exp.duplicates.is_empty());
    adapt(&exp, EngineHint::Auto, "tgi-default").unwrap()
}

#[test]
fn every_fixture_parses_and_is_detected() {
    let dir = tools::real_fixtures();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "prom") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let body = std::fs::read(&path).unwrap();
        let exp = parse(&body, &Limits::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = match name.split('-').next().unwrap() {
            "vllm" => Some(Engine::Vllm),
            "sglang" => Some(Engine::Sglang),
            "tgi" => Some(Engine::Tgi),
            "trtllm" => Some(Engine::Trtllm),
            "dynamo" => Some(Engine::Dynamo),
            "nim" => Some(Engine::Nim),
            "llamacpp" => Some(Engine::Llamacpp),
            "dcgm" => None,
            other => panic!("{name}: unknown fixture family {other}"),
        };
        assert_eq!(detect(&exp), expected, "{name}");
        if expected.is_none() {
            assert!(dcgm::is_dcgm(&exp), "{name}");
        } else {
            let snap = adapt(&exp, EngineHint::Auto, "").unwrap();
            assert!(!snap.models.is_empty(), "{name}");
        }
        seen += 1;
    }
    assert_eq!(seen, 14, "every fixture is covered");
}

#[test]
fn vllm_v1_ttft_tpot_tokens() {
    let body = fixture("vllm-v1-0.13ish-dynamo-worker-full.prom");
    let s = snapshot(&body);
    let m = &s.models["Qwen/Qwen3-0.6B"];
    let ttft = m.histogram_total(HistogramKind::Ttft).unwrap();
    assert_eq!(ttft.count, grep_sum(&body, "vllm:time_to_first_token_seconds_count{", ""));
    assert_eq!(ttft.sum, 0.4143967628479004);
    assert_eq!(ttft.count, 2.0);
    let tpot = m.histogram_total(HistogramKind::Tpot).unwrap();
    assert_eq!(tpot.sum, grep_sum(&body, "vllm:request_time_per_output_token_seconds_sum{", ""));
    // ITL counts one observation per step after the first token: 600 tokens − 2 requests.
    assert_eq!(m.histogram_total(HistogramKind::Itl).unwrap().count, 598.0);
    assert_eq!(m.counter_total(CounterKind::GenerationTokens), Some(600.0));
    assert_eq!(m.counter_total(CounterKind::PromptTokens), Some(66.0));
    let inf = ttft.buckets.last().unwrap();
    assert_eq!((inf.le, inf.count), (f64::INFINITY, 2.0));
    let info = body.lines().find(|l| l.starts_with("vllm:cache_config_info{")).unwrap();
    let label = |k: &str| -> f64 {
        let i = info.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
        info[i..].split('"').next().unwrap().parse().unwrap()
    };
    assert_eq!(m.gauge_total(GaugeKind::KvCapacityTokens), Some(label("num_gpu_blocks") * label("block_size")));
}

#[test]
fn vllm_v0_and_nim() {
    let body = fixture("vllm-v0-0.4.x-datadog-fixture-v0part.prom");
    let m = &snapshot(&body).models["facebook/opt-125m"];
    assert_eq!(m.histogram_total(HistogramKind::Ttft).unwrap().count, 1.0);
    assert!(!m.has_histogram(HistogramKind::Tpot), "V0 has no per-request TPOT");
    assert_eq!(
        m.histogram_total(HistogramKind::Itl).unwrap().count,
        grep_sum(&body, "vllm:time_per_output_token_seconds_count", "")
    );

    let body = fixture("nim-llm-2024-10-datadog-nvidia_nim.prom");
    let s = snapshot(&body);
    assert_eq!(s.engine, Engine::Nim);
    let m = &s.models["meta/llama-3.1-8b-instruct"];
    // V0 semantics: ITL count = generated tokens − requests (169 = 174 − 5).
    let itl = m.histogram_total(HistogramKind::Itl).unwrap().count;
    assert_eq!(itl, grep_sum(&body, "time_per_output_token_seconds_count", ""));
    assert_eq!(itl, m.counter_total(CounterKind::GenerationTokens).unwrap() - 5.0);
    assert_eq!(
        m.counter_total(CounterKind::RequestsFinished),
        Some(grep_sum(&body, "request_finish_total", "") + grep_sum(&body, "request_failure_total", ""))
    );
    assert_eq!(m.gauge_total(GaugeKind::KvCacheUsage), Some(grep_sum(&body, "gpu_cache_usage_perc", "")));
}

#[test]
fn sglang_token_usage_and_ttft() {
    let body = fixture("sglang-0.4.x-docs-production_metrics.prom");
    let m = &snapshot(&body).models["meta-llama/Llama-3.1-8B-Instruct"];
    assert_eq!(m.gauge_total(GaugeKind::KvCacheUsage), Some(0.28));
    assert_eq!(m.histogram_total(HistogramKind::Ttft).unwrap().count, 11008.0);
    assert!(!m.has_histogram(HistogramKind::Tpot), "SGLang's running-average TPOT is not per-request TPOT");
    let body = fixture("sglang-0.5.x-dynamo-sglang-only.prom");
    let m = &snapshot(&body).models["Qwen/Qwen3-0.6B"];
    assert_eq!(
        m.histogram_total(HistogramKind::Itl).unwrap().count,
        grep_sum(&body, "sglang:inter_token_latency_seconds_count", "")
    );
    assert_eq!(m.counter_total(CounterKind::PromptTokens), Some(33.0));
}

#[test]
fn tgi_queue_duration_and_no_ttft() {
    let body = fixture("tgi-3.3.5-datadog-hugging_face_tgi.prom");
    let s = snapshot(&body);
    let m = &s.models["tgi-default"];
    let q = m.histogram_total(HistogramKind::QueueTime).unwrap();
    assert_eq!((q.count, q.sum), (109.0, 295.275961956));
    for absent in ["ttft", "tpot", "itl", "kv_cache_usage"] {
        assert!(s.absent().contains(&absent), "{absent}");
    }
    let fin = &m.counters[&CounterKind::RequestsFinished];
    let failed: f64 = fin.iter().filter(|c| c.value.reason == Some(FinishReason::Error)).map(|c| c.value.value).sum();
    assert_eq!(failed, grep_sum(&body, "tgi_request_failure{", ""));
    assert_eq!(
        m.counter_total(CounterKind::GenerationTokens),
        Some(grep_sum(&body, "tgi_request_generated_tokens_sum", ""))
    );
}

#[test]
fn trtllm_worker_under_dynamo() {
    let body = fixture("trtllm-dynamo-2026-01-worker-full.prom");
    let s = snapshot(&body);
    // A Dynamo worker scrape is the backend engine it passes through.
    assert_eq!(s.engine, Engine::Trtllm);
    let m = &s.models["Qwen/Qwen3-0.6B"];
    // trtllm's time_per_output_token is per request: it is TPOT here, unlike vLLM's.
    assert_eq!(m.histogram_total(HistogramKind::Tpot).unwrap().count, 2.0);
    assert_eq!(m.counter_total(CounterKind::RequestsFinished), Some(2.0));
}

#[test]
fn dynamo_frontend_is_its_own_engine() {
    let body = fixture("dynamo-frontend-2026-01-fe.prom");
    let s = snapshot(&body);
    assert_eq!(s.engine, Engine::Dynamo);
    // Request metrics carry the lower-cased `model` label.
    assert_eq!(s.models.keys().collect::<Vec<_>>(), ["qwen/qwen3-0.6b"]);
    let m = &s.models["qwen/qwen3-0.6b"];
    assert_eq!(
        m.counter_total(CounterKind::GenerationTokens),
        Some(grep_sum(&body, "dynamo_frontend_output_tokens_total{", ""))
    );
    assert_eq!(m.counter_total(CounterKind::GenerationTokens), Some(300.0));
    // Per token: 300 output tokens give 299 gaps.
    assert_eq!(m.histogram_total(HistogramKind::Itl).unwrap().count, 299.0);
    let ttft = m.histogram_total(HistogramKind::Ttft).unwrap();
    assert_eq!(ttft.count, grep_sum(&body, "dynamo_frontend_time_to_first_token_seconds_count{", ""));
    assert_eq!(ttft.buckets[0].le, 0.0, "the le=\"0\" bucket is kept");
    let fin = &m.counters[&CounterKind::RequestsFinished];
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].value.reason, Some(FinishReason::Success));
    assert_eq!(fin[0].value.value, grep_sum(&body, "dynamo_frontend_requests_total{", "status=\"success\""));
    // No per-request TPOT and no KV usage at the frontend; queued_requests is not `waiting`.
    assert!(!m.has_histogram(HistogramKind::Tpot));
    assert!(m.gauges.is_empty(), "{:?}", m.gauges.keys().collect::<Vec<_>>());
    // Named in config, the same scrape maps the same way; named as trtllm, it maps nothing.
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    assert_eq!(adapt(&exp, EngineHint::Is(Engine::Dynamo), "").unwrap(), s);
    assert!(adapt(&exp, EngineHint::Is(Engine::Trtllm), "").is_err());
    assert_eq!(Engine::parse("dynamo"), Some(Engine::Dynamo));
}

#[test]
fn llamacpp_counters_and_gauges_without_histograms() {
    let body = fixture("llamacpp-server-0c1e570.prom");
    let s = snapshot(&body);
    assert_eq!(s.engine, Engine::Llamacpp);
    // No model label: the series belong to the configured model.
    assert_eq!(s.models.keys().collect::<Vec<_>>(), ["tgi-default"]);
    let m = &s.models["tgi-default"];
    let v = |name: &str| grep_sum(&body, &format!("llamacpp:{name} "), "");
    // The prompt tokens computed and those reused from the prompt cache are every prompt token.
    let (computed, cached) = (v("prompt_tokens_total"), v("prompt_tokens_cached_total"));
    assert_eq!((computed, cached), (1536.0, 57.0));
    assert_eq!(m.counter_total(CounterKind::PromptTokens), Some(computed + cached));
    assert_eq!(m.counters[&CounterKind::PromptTokens].len(), 2, "each keeps its own series, and its own rate");
    assert_eq!(m.counter_total(CounterKind::PrefixCacheHits), Some(cached));
    assert_eq!(m.counter_total(CounterKind::PrefixCacheQueries), Some(computed + cached));
    assert_eq!(m.counter_total(CounterKind::GenerationTokens), Some(v("tokens_predicted_total")));
    assert_eq!(m.counter_total(CounterKind::DecodeCalls), Some(368.0));
    assert_eq!(m.counter_total(CounterKind::SpecDrafts), Some(v("spec_decode_num_drafts_total")));
    assert_eq!(m.counter_total(CounterKind::SpecDraftTokens), Some(v("spec_decode_num_draft_tokens_total")));
    assert_eq!(m.counter_total(CounterKind::SpecAcceptedTokens), Some(v("spec_decode_num_accepted_tokens_total")));
    assert_eq!(m.gauge_total(GaugeKind::Running), Some(v("requests_processing")));
    assert_eq!(m.gauge_total(GaugeKind::Waiting), Some(v("requests_deferred")));
    assert_eq!(m.gauge_total(GaugeKind::BusySlotsPerDecode), Some(3.26087));
    // Latency, finished requests and the KV cache are not exposed: the request path has them.
    assert!(m.histograms.is_empty());
    for absent in ["ttft", "tpot", "itl", "e2e", "requests_finished", "kv_cache_usage"] {
        assert!(s.absent().contains(&absent), "{absent}");
    }
    assert!(!Engine::Llamacpp.has_latency_histograms() && Engine::Tgi.has_latency_histograms());
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    assert_eq!(adapt(&exp, EngineHint::Is(Engine::Llamacpp), "tgi-default").unwrap(), s);
    assert!(adapt(&exp, EngineHint::Is(Engine::Vllm), "").is_err(), "named as another engine, it maps nothing");
    assert_eq!(Engine::parse("llamacpp"), Some(Engine::Llamacpp));
}

#[test]
fn dcgm_gpu_utilization() {
    let body = fixture("dcgm-exporter-linode-lke-ai-conformance.prom");
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    let gpus = dcgm::gpus(&exp);
    assert_eq!(gpus.len(), 1);
    let g = &gpus[0];
    assert_eq!(g.uuid, "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c");
    assert_eq!(g.readings["gpu_utilization_ratio"], grep_sum(&body, "DCGM_FI_DEV_GPU_UTIL{", "") / 100.0);
    assert_eq!(g.readings["memory_used_bytes"], grep_sum(&body, "DCGM_FI_DEV_FB_USED{", "") * 1_048_576.0);
    let pod = g.pod.as_ref().unwrap();
    assert_eq!((pod.namespace.as_str(), pod.pod.as_str()), ("default", "cuda-75454ffb9f-8ljq7"));
}
