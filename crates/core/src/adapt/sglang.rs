//! SGLang (0.4 → 0.5). docs/engines.md#sglang.
//!
//! SGLang has no per-request TPOT histogram: its `inter_token_latency_seconds` is per
//! token, and the old `time_per_output_token_seconds` is a running average re-observed at
//! every chunk, so neither is mapped to `tpot`, and the old one is not mapped at all.
//! Token counters move when a request finishes. Scheduler gauges repeat on every
//! tensor-parallel rank, so only `tp_rank="0"` is read.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, FinishReason, GaugeKind as G, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("sglang:time_to_first_token_seconds", Histogram(H::Ttft)),
    m("sglang:inter_token_latency_seconds", Histogram(H::Itl)),
    m("sglang:e2e_request_latency_seconds", Histogram(H::E2e)),
    m("sglang:queue_time_seconds", Histogram(H::QueueTime)),
    m("sglang:prompt_tokens_histogram", Histogram(H::RequestPromptTokens)),
    m("sglang:generation_tokens_histogram", Histogram(H::RequestGenerationTokens)),
    m("sglang:prompt_tokens_total", Counter(C::PromptTokens)),
    m("sglang:generation_tokens_total", Counter(C::GenerationTokens)),
    m("sglang:num_requests_total", Finished(FinishReason::Success)),
    m("sglang:token_usage", Gauge(G::KvCacheUsage)),
    m("sglang:num_running_reqs", Gauge(G::Running)),
    m("sglang:num_queue_reqs", Gauge(G::Waiting)),
    m("sglang:max_total_num_tokens", Gauge(G::KvCapacityTokens)),
];

pub static TABLE: EngineTable =
    EngineTable { model_labels: &["model_name"], gauge_rank_label: Some("tp_rank"), mappings: MAPPINGS };
