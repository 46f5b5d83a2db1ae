//! TensorRT-LLM (`trtllm-serve`, unprefixed, or `trtllm_` as a Dynamo worker),
//! docs/engines.md#tensorrt-llm. The Dynamo frontend is an engine of its own (`dynamo.rs`).
//!
//! TensorRT-LLM's `time_per_output_token_seconds` is observed once per finished request as
//! `(last − first token) / (n_out − 1)`, which *is* per-request TPOT (unlike vLLM's family
//! of the same name).

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{GaugeKind as G, HistogramKind as H};

const MAPPINGS: &[Mapping] = &[
    m("trtllm_time_to_first_token_seconds", Histogram(H::Ttft)),
    m("time_to_first_token_seconds", Histogram(H::Ttft)),
    m("trtllm_time_per_output_token_seconds", Histogram(H::Tpot)),
    m("time_per_output_token_seconds", Histogram(H::Tpot)),
    m("trtllm_e2e_request_latency_seconds", Histogram(H::E2e)),
    m("e2e_request_latency_seconds", Histogram(H::E2e)),
    m("trtllm_request_queue_time_seconds", Histogram(H::QueueTime)),
    m("request_queue_time_seconds", Histogram(H::QueueTime)),
    m("trtllm_request_success_total", FinishedByLabel("finished_reason")),
    m("request_success_total", FinishedByLabel("finished_reason")),
    m("trtllm_kv_cache_utilization", Gauge(G::KvCacheUsage)),
    m("trtllm_num_requests_running", Gauge(G::Running)),
    m("trtllm_num_requests_waiting", Gauge(G::Waiting)),
];

pub static TABLE: EngineTable =
    EngineTable { model_labels: &["model_name"], gauge_rank_label: None, mappings: MAPPINGS };
