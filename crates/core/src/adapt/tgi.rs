//! Hugging Face TGI 3.x. docs/engines.md#tgi.
//!
//! TGI exposes **no TTFT**, no per-request TPOT and no ITL: its
//! `request_mean_time_per_token_duration` divides prefill plus decode by all tokens, a
//! different quantity, so it is not mapped. No model label exists. Token throughput
//! comes from the `_sum` of the per-request length histograms (input length counted at
//! validation, generated tokens at completion), the only monotonic token totals TGI has.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, FinishReason, GaugeKind as G, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("tgi_request_duration", Histogram(H::E2e)),
    m("tgi_request_queue_duration", Histogram(H::QueueTime)),
    m("tgi_request_input_length", Histogram(H::RequestPromptTokens)),
    m("tgi_request_generated_tokens", Histogram(H::RequestGenerationTokens)),
    m("tgi_request_input_length", HistogramSumAsCounter(C::PromptTokens)),
    m("tgi_request_generated_tokens", HistogramSumAsCounter(C::GenerationTokens)),
    m("tgi_request_success", Finished(FinishReason::Success)),
    m("tgi_request_failure", Finished(FinishReason::Error)),
    m("tgi_queue_size", Gauge(G::Waiting)),
    m("tgi_batch_current_size", Gauge(G::Running)),
];

pub static TABLE: EngineTable = EngineTable { model_labels: &[], gauge_rank_label: None, mappings: MAPPINGS };
