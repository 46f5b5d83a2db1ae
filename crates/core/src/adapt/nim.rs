//! NVIDIA NIM for LLMs (2024 builds): vLLM V0 families without the `vllm:` prefix
//! (docs/engines.md#nim).
//!
//! `request_finish_total{finished_reason}` counts finished requests; failures are a
//! separate `request_failure_total`. `request_success_total` repeats the successful
//! finishes without a reason and is ignored so nothing is counted twice.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, FinishReason, GaugeKind as G, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("time_to_first_token_seconds", Histogram(H::Ttft)),
    // Per decode step per sequence group, as in vLLM V0: inter-token latency, not TPOT.
    m("time_per_output_token_seconds", Histogram(H::Itl)),
    m("e2e_request_latency_seconds", Histogram(H::E2e)),
    m("request_queue_time_seconds", Histogram(H::QueueTime)),
    m("request_prefill_time_seconds", Histogram(H::PrefillTime)),
    m("request_decode_time_seconds", Histogram(H::DecodeTime)),
    m("request_prompt_tokens", Histogram(H::RequestPromptTokens)),
    m("request_generation_tokens", Histogram(H::RequestGenerationTokens)),
    m("prompt_tokens_total", Counter(C::PromptTokens)),
    m("generation_tokens_total", Counter(C::GenerationTokens)),
    m("request_finish_total", FinishedByLabel("finished_reason")),
    m("request_failure_total", Finished(FinishReason::Error)),
    m("num_preemptions_total", Counter(C::Preemptions)),
    m("gpu_cache_usage_perc", Gauge(G::KvCacheUsage)),
    m("num_requests_running", Gauge(G::Running)),
    m("num_requests_waiting", Gauge(G::Waiting)),
];

pub static TABLE: EngineTable =
    EngineTable { model_labels: &["model_name"], gauge_rank_label: None, mappings: MAPPINGS };
