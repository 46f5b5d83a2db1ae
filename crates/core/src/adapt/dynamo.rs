//! The NVIDIA Dynamo HTTP frontend (`python -m dynamo.frontend`), docs/engines.md#dynamo-frontend.
//!
//! An engine of its own: it fronts vLLM, SGLang or TensorRT-LLM workers and measures what
//! clients see, whatever the backend. Its inter-token latency is per token. Its
//! `queued_requests` gauge counts requests until their first token (prefill included), so
//! it is not mapped to `waiting`. The model label is `model`.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("dynamo_frontend_time_to_first_token_seconds", Histogram(H::Ttft)),
    m("dynamo_frontend_inter_token_latency_seconds", Histogram(H::Itl)),
    m("dynamo_frontend_request_duration_seconds", Histogram(H::E2e)),
    m("dynamo_frontend_input_sequence_tokens", Histogram(H::RequestPromptTokens)),
    m("dynamo_frontend_output_sequence_tokens", Histogram(H::RequestGenerationTokens)),
    m("dynamo_frontend_output_tokens_total", Counter(C::GenerationTokens)),
    m("dynamo_frontend_requests_total", FinishedByLabel("status")),
];

pub static TABLE: EngineTable = EngineTable { model_labels: &["model"], gauge_rank_label: None, mappings: MAPPINGS };
