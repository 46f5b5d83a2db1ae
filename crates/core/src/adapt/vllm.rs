//! vLLM V1 (0.8 → newest) and V0. docs/engines.md#vllm-v1 and #vllm-v0 have the semantics.
//!
//! Notable meanings: `time_per_output_token_seconds` is the per-*step* inter-token
//! latency in every vLLM version (renamed `inter_token_latency_seconds` in 0.11), never
//! per-request TPOT; the per-request TPOT is `request_time_per_output_token_seconds`
//! (≥ 0.11), and older versions simply lack it. `request_success_total` counts every
//! finished request, aborted and errored ones included, split by `finished_reason`.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, GaugeKind as G, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("vllm:time_to_first_token_seconds", Histogram(H::Ttft)),
    m("vllm:request_time_per_output_token_seconds", Histogram(H::Tpot)),
    m("vllm:inter_token_latency_seconds", Histogram(H::Itl)),
    m("vllm:time_per_output_token_seconds", Histogram(H::Itl)),
    m("vllm:e2e_request_latency_seconds", Histogram(H::E2e)),
    m("vllm:request_queue_time_seconds", Histogram(H::QueueTime)),
    m("vllm:request_prefill_time_seconds", Histogram(H::PrefillTime)),
    m("vllm:request_decode_time_seconds", Histogram(H::DecodeTime)),
    m("vllm:request_prompt_tokens", Histogram(H::RequestPromptTokens)),
    m("vllm:request_generation_tokens", Histogram(H::RequestGenerationTokens)),
    m("vllm:prompt_tokens_total", Counter(C::PromptTokens)),
    m("vllm:generation_tokens_total", Counter(C::GenerationTokens)),
    m("vllm:request_success_total", FinishedByLabel("finished_reason")),
    m("vllm:num_preemptions_total", Counter(C::Preemptions)),
    m("vllm:spec_decode_num_drafts_total", Counter(C::SpecDrafts)),
    m("vllm:spec_decode_num_draft_tokens_total", Counter(C::SpecDraftTokens)),
    m("vllm:spec_decode_num_accepted_tokens_total", Counter(C::SpecAcceptedTokens)),
    m("vllm:spec_decode_num_accepted_tokens_per_pos_total", SpecAcceptedPerPosition),
    // Tokens from 0.9 on; 0.8 counted blocks under the gpu_ names. Both give a hit ratio.
    m("vllm:prefix_cache_queries_total", Counter(C::PrefixCacheQueries)),
    m("vllm:gpu_prefix_cache_queries_total", Counter(C::PrefixCacheQueries)),
    m("vllm:prefix_cache_hits_total", Counter(C::PrefixCacheHits)),
    m("vllm:gpu_prefix_cache_hits_total", Counter(C::PrefixCacheHits)),
    m("vllm:estimated_flops_per_gpu_total", Counter(C::EstimatedFlopsPerGpu)),
    m("vllm:estimated_read_bytes_per_gpu_total", Counter(C::EstimatedReadBytesPerGpu)),
    m("vllm:estimated_write_bytes_per_gpu_total", Counter(C::EstimatedWriteBytesPerGpu)),
    m("vllm:kv_cache_usage_perc", Gauge(G::KvCacheUsage)),
    m("vllm:gpu_cache_usage_perc", Gauge(G::KvCacheUsage)),
    m("vllm:num_requests_running", Gauge(G::Running)),
    m("vllm:num_requests_waiting", Gauge(G::Waiting)),
    m("vllm:cache_config_info", KvCapacityInfo),
];

pub static TABLE: EngineTable =
    EngineTable { model_labels: &["model_name"], gauge_rank_label: None, mappings: MAPPINGS };
